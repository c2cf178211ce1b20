"""Run under mpirun by test_collectives.py: every collective against its single-process result.

Rank r's inputs are a known function of r, so every rank computes what each collective must
give with NumPy from all ranks' inputs. Exits non-zero on the first mismatch.
"""

import os

import numpy as np

import munet
import munet.distributed as dist
from munet.distributed import ReduceOp
from tests.distributed.launch import expect_raises

# before init ----------------------------------------------------------------------------------------
expect_raises(ValueError, ["init_process_group"], dist.get_rank)
expect_raises(ValueError, ["init_process_group"], lambda: dist.all_reduce(munet.ones(2)))
expect_raises(RuntimeError, ["backend 'nccl'", "unavailable"], lambda: dist.init_process_group("nccl"))
expect_raises(ValueError, ["mpirun"], lambda: dist.init_process_group("mpi", world_size=99))
dist.init_process_group("gloo", init_method="env://")
expect_raises(ValueError, ["twice"], lambda: dist.init_process_group("gloo"))
RANK, WORLD = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "gloo"
assert RANK == int(os.environ["RANK"]) and WORLD == int(os.environ["WORLD_SIZE"]), "munet-run sets torchrun's variables"
DTYPES = {"float32": munet.float32, "float64": munet.float64, "int64": munet.int64, "int32": munet.int32,
          "bool": munet.bool, "bfloat16": munet.bfloat16}  # fmt: skip


def data(rank, shape, dtype="float32"):
    """Rank ``rank``'s input: distinct small values, exact in every dtype here."""
    rng = np.random.default_rng(1000 + rank)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return (rng.integers(-4, 5, shape) + rank).astype(np.float32 if dtype == "bfloat16" else dtype)


def tensor(array, dtype="float32", device="cpu"):
    return munet.tensor(array, dtype=DTYPES[dtype], device=device)


def check(t, expected, what):
    got = np.asarray(t.detach().cpu().float().numpy() if t.dtype is munet.bfloat16 else t.detach().cpu().numpy())
    if got.shape != np.shape(expected) or not np.allclose(got, expected, rtol=1e-6, atol=1e-6):
        raise AssertionError(f"rank {RANK}: {what}: got {got.tolist()}, expected {np.asarray(expected).tolist()}")


every = [data(r, (3, 4)) for r in range(WORLD)]
REDUCE = {ReduceOp.SUM: np.sum, ReduceOp.AVG: np.mean, ReduceOp.MAX: np.max, ReduceOp.MIN: np.min,
          ReduceOp.PRODUCT: np.prod}  # fmt: skip

# all_reduce: every op and dtype, in place, also on a strided view ----------------------------------
for device in ["cpu", "vulkan"] if os.environ.get("MUNET_TEST_VULKAN") == "1" else ["cpu"]:
    for op, fn in REDUCE.items():
        t = tensor(every[RANK], device=device)
        assert dist.all_reduce(t, op=op) is None
        check(t, fn(np.stack(every), axis=0), f"all_reduce {op.name} on {device}")
for dtype in ["float64", "int64", "int32", "bfloat16"]:
    t = tensor(data(RANK, (5,), dtype), dtype)
    dist.all_reduce(t)
    check(t, np.sum([data(r, (5,), dtype) for r in range(WORLD)], axis=0), f"all_reduce SUM {dtype}")
t = tensor(data(RANK, (6,), "bool"), "bool")
dist.all_reduce(t, op=ReduceOp.MAX)
check(t, np.any([data(r, (6,), "bool") for r in range(WORLD)], axis=0), "all_reduce MAX bool")
t = tensor(data(RANK, (4,), "int64"), "int64")
dist.all_reduce(t, op=ReduceOp.BXOR)
check(t, np.bitwise_xor.reduce([data(r, (4,), "int64") for r in range(WORLD)]), "all_reduce BXOR int64")
base = munet.zeros(3, 8)
view = base[:, ::2]
view.copy_(tensor(every[RANK]))
version = view._version
dist.all_reduce(view)
check(base[:, ::2], np.sum(every, axis=0), "all_reduce into a strided view")
check(base[:, 1::2], np.zeros((3, 4)), "all_reduce leaves the rest of the base alone")
assert view._version > version, "an in-place collective bumps the version"
expect_raises(ValueError, ["AVG", "int64"], lambda: dist.all_reduce(munet.ones(2, dtype=munet.int64), ReduceOp.AVG))
# large arrays (the TCP transport's ring, uneven chunks), and ranks reach the same bits
for op, fn in {ReduceOp.SUM: np.sum, ReduceOp.MAX: np.max, ReduceOp.AVG: np.mean}.items():
    large = [np.random.default_rng(7 + r).standard_normal(40_003) for r in range(WORLD)]
    t = tensor(large[RANK], "float64")
    dist.all_reduce(t, op=op)
    check(t, fn(np.stack(large), axis=0), f"all_reduce {op.name} of 40003 float64")
    copies = [munet.zeros(40_003, dtype=munet.float64) for _ in range(WORLD)]
    dist.all_gather(copies, t)
    assert all(np.array_equal(c.numpy(), t.numpy()) for c in copies), "every rank got the same bits"

# broadcast, reduce ---------------------------------------------------------------------------------
for src in range(WORLD):
    t = tensor(every[RANK])
    dist.broadcast(t, src=src)
    check(t, every[src], f"broadcast from {src}")
    t = tensor(every[RANK])
    dist.reduce(t, dst=src, op=ReduceOp.MAX)
    check(t, np.max(every, axis=0) if RANK == src else every[RANK], f"reduce MAX to {src}")

# gathers and scatters --------------------------------------------------------------------------------
outs = [munet.zeros(3, 4) for _ in range(WORLD)]
dist.all_gather(outs, tensor(every[RANK]))
for r in range(WORLD):
    check(outs[r], every[r], f"all_gather [{r}]")
out = munet.zeros(WORLD * 3, 4)
dist.all_gather_into_tensor(out, tensor(every[RANK]))
check(out, np.concatenate(every), "all_gather_into_tensor (concatenated)")
out = munet.zeros(WORLD, 3, 4)
dist.all_gather_into_tensor(out, tensor(every[RANK]))
check(out, np.stack(every), "all_gather_into_tensor (stacked)")
expect_raises(ValueError, ["world_size"], lambda: dist.all_gather_into_tensor(munet.zeros(1), munet.zeros(3)))

chunks = [[data(10 * r + j, (2, 3)) for j in range(WORLD)] for r in range(WORLD)]  # chunks[r][j]: rank r's input j
out = munet.zeros(2, 3)
dist.reduce_scatter(out, [tensor(c) for c in chunks[RANK]])
check(out, np.sum([chunks[r][RANK] for r in range(WORLD)], axis=0), "reduce_scatter")
out = munet.zeros(2, 3)
dist.reduce_scatter_tensor(out, tensor(np.concatenate(chunks[RANK])), op=ReduceOp.MIN)
check(out, np.min([chunks[r][RANK] for r in range(WORLD)], axis=0), "reduce_scatter_tensor MIN")

# all_to_all with uneven sizes: rank r sends r + j + 1 elements to rank j
sent = [[data(100 * r + j, (r + j + 1,)) for j in range(WORLD)] for r in range(WORLD)]
outs = [munet.zeros(j + RANK + 1) for j in range(WORLD)]
dist.all_to_all(outs, [tensor(s) for s in sent[RANK]])
for j in range(WORLD):
    check(outs[j], sent[j][RANK], f"all_to_all from {j}")
out = munet.zeros(WORLD * 2)
dist.all_to_all_single(out, tensor(np.concatenate([data(50 * RANK + j, (2,)) for j in range(WORLD)])))
check(out, np.concatenate([data(50 * j + RANK, (2,)) for j in range(WORLD)]), "all_to_all_single")
expect_raises(
    RuntimeError,
    ["disagree"],
    lambda: dist.all_to_all(
        [munet.zeros(1) for _ in range(WORLD)], [munet.zeros(1 + (RANK == 0)) for _ in range(WORLD)]
    ),
)

gathered = [munet.zeros(3, 4) for _ in range(WORLD)] if RANK == WORLD - 1 else None
dist.gather(tensor(every[RANK]), gathered, dst=WORLD - 1)
if RANK == WORLD - 1:
    for r in range(WORLD):
        check(gathered[r], every[r], f"gather [{r}]")
out = munet.zeros(3, 4)
dist.scatter(out, [tensor(e) for e in every] if RANK == 0 else None, src=0)
check(out, every[RANK], "scatter")

# async handles, point to point ------------------------------------------------------------------------
t = tensor(every[RANK])
work = dist.all_reduce(t, async_op=True)
assert isinstance(work, dist.Work)
assert work.wait() and work.is_completed()
check(work.result()[0], np.sum(every, axis=0), "async all_reduce")
# a synchronous all_reduce of a contiguous cpu tensor runs MPI on the tensor's memory without a Work
# (ProcessGroup.allreduce_now); it gives the bits, the version bump and the errors of the general path
for op, dtype in [(ReduceOp.SUM, "float32"), (ReduceOp.AVG, "float32"), (ReduceOp.AVG, "float64"),
                  (ReduceOp.PRODUCT, "int64"), (ReduceOp.BAND, "int32"), (ReduceOp.MIN, "bool")]:  # fmt: skip
    values = [data(r, (2, 3), dtype) / 7 if op is ReduceOp.AVG else data(r, (2, 3), dtype) for r in range(WORLD)]
    now, general = tensor(values[RANK], dtype), tensor(values[RANK], dtype)
    version = now._version
    assert dist.all_reduce(now, op=op) is None
    dist.all_reduce(general, op=op, async_op=True).wait()
    assert now._version == version + 1, "the synchronous path bumps the version once"
    assert np.array_equal(now.numpy(), general.numpy()), f"{op.name} {dtype}: {now.tolist()} != {general.tolist()}"
    expected = {ReduceOp.BAND: np.bitwise_and.reduce, ReduceOp.MIN: np.all}.get(op, REDUCE.get(op))
    check(now, expected(np.stack(values), axis=0), f"synchronous all_reduce {op.name} {dtype}")
base = munet.zeros(4, 3)
row = base[1:2]  # contiguous, at an offset into its storage: MPI works on that row only
row.copy_(tensor(every[RANK][:1, :3]))
dist.all_reduce(row)
check(base[1:2], np.sum([e[:1, :3] for e in every], axis=0), "all_reduce of a contiguous view")
check(base[2:], np.zeros((2, 3)), "all_reduce of a contiguous view leaves the rest of its base alone")
for shape in [(), (0,), (2, 0, 3)]:
    t = munet.ones(shape)
    dist.all_reduce(t)
    check(t, np.full(shape, float(WORLD)), f"all_reduce of shape {shape}")
for async_op in (False, True):
    expect_raises(
        ValueError,
        ["all_reduce", "AVG", "int64"],
        lambda: dist.all_reduce(munet.ones(2, dtype=munet.int64), ReduceOp.AVG, async_op=async_op),
    )
    expect_raises(
        ValueError, ["BAND", "float32"], lambda: dist.all_reduce(munet.ones(2), ReduceOp.BAND, async_op=async_op)
    )
    expect_raises(
        TypeError, ["all_reduce", "munet.Tensor", "ndarray"], lambda: dist.all_reduce(np.ones(2), async_op=async_op)
    )
    expect_raises(
        TypeError, ["all_reduce", "ReduceOp", "'sum'"], lambda: dist.all_reduce(munet.ones(2), "sum", async_op=async_op)
    )
    expect_raises(
        RuntimeError,
        ["disagree", "[3]", "[4]"],
        lambda: dist.all_reduce(munet.zeros(3 + (RANK == 1)), async_op=async_op),
    )
# the agreement check reuses one persistent all-gather: after many identical calls it still catches a change
t = munet.zeros(5)
for _ in range(50):
    dist.all_reduce(t)
expect_raises(RuntimeError, ["disagree", "[5]", "[6]"], lambda: dist.all_reduce(munet.zeros(5 + (RANK == 1))))
expect_raises(RuntimeError, ["disagree", "op #"], lambda: dist.all_reduce(t, ReduceOp.MAX if RANK else ReduceOp.SUM))
t = tensor(every[RANK])
dist.all_reduce(t)
check(t, np.sum(every, axis=0), "all_reduce after a caught mismatch")
right, left = (RANK + 1) % WORLD, (RANK - 1) % WORLD
incoming = munet.zeros(3, 4)
works = [dist.isend(tensor(every[RANK]), dst=right), dist.irecv(incoming, src=left)]
for w in works:
    w.wait()
check(incoming, every[left], "isend/irecv ring")
if RANK == 0:
    dist.send(tensor(every[0]), dst=WORLD - 1, tag=7)
if RANK == WORLD - 1:
    got = munet.zeros(3, 4)
    assert dist.recv(got, tag=7) == 0, "recv from any source returns the sender"
    check(got, every[0], "send/recv")

if RANK == 0:
    dist.send(munet.zeros(3), dst=WORLD - 1, tag=8)
if RANK == WORLD - 1:
    expect_raises(RuntimeError, ["expected 16 bytes", "sent 12"], lambda: dist.recv(munet.zeros(4), src=0, tag=8))

# groups: the even ranks -------------------------------------------------------------------------------
evens = list(range(0, WORLD, 2))
g = dist.new_group(evens)
if RANK in evens:
    assert dist.get_rank(g) == evens.index(RANK) and dist.get_world_size(g) == len(evens)
    assert dist.get_process_group_ranks(g) == evens
    t = tensor(every[RANK])
    dist.all_reduce(t, group=g)
    check(t, np.sum([every[r] for r in evens], axis=0), "all_reduce on a group")
    t = tensor(every[RANK])
    dist.broadcast(t, src=evens[-1], group=g)
    check(t, every[evens[-1]], "broadcast on a group from a global rank")
else:
    assert g is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1
    assert dist.all_reduce(munet.ones(1), group=g) is None
dist.destroy_process_group(g) if RANK in evens else None

# objects: plain data only --------------------------------------------------------------------------------
objects = (
    [{"lr": 0.1, (1, "a"): [None, True, b"\x00\x01"]}, np.arange(3, dtype=np.int16), munet.ones(2)]
    if RANK == 0
    else [None] * 3
)
dist.broadcast_object_list(objects, src=0)
assert objects[0] == {"lr": 0.1, (1, "a"): [None, True, b"\x00\x01"]}, objects[0]
assert objects[1].dtype == np.int16 and objects[1].tolist() == [0, 1, 2]
check(objects[2], np.ones(2), "broadcast_object_list tensor")
everyone = [None] * WORLD
dist.all_gather_object(everyone, {"rank": RANK, "name": f"r{RANK}"})
assert everyone == [{"rank": r, "name": f"r{r}"} for r in range(WORLD)], everyone
words = ["pickle"] if RANK == 1 else ["could not encode"]
expect_raises((TypeError, RuntimeError), words, lambda: dist.all_gather_object(everyone, object() if RANK == 1 else 1))

# mismatches raise on every rank, naming what each rank passed ---------------------------------------------
expect_raises(RuntimeError, ["disagree", "[3]", "[4]"], lambda: dist.all_reduce(munet.zeros(3 + (RANK == 1))))
expect_raises(
    RuntimeError,
    ["disagree", "float64"],
    lambda: dist.all_reduce(munet.zeros(2, dtype=munet.float64 if RANK else munet.float32)),
)
expect_raises(
    RuntimeError,
    ["disagree", "broadcast"],
    lambda: dist.broadcast(munet.zeros(2), 0) if RANK else dist.all_reduce(munet.zeros(2)),
)

# with the checks off the collectives give the same results
dist.set_debug_level(dist.DebugLevel.OFF)
t = tensor(every[RANK])
dist.all_reduce(t)
check(t, np.sum(every, axis=0), "all_reduce with DebugLevel.OFF")
outs = [munet.zeros(j + RANK + 1) for j in range(WORLD)]
dist.all_to_all(outs, [tensor(s) for s in sent[RANK]])
for j in range(WORLD):
    check(outs[j], sent[j][RANK], f"all_to_all from {j} with DebugLevel.OFF")
dist.set_debug_level(dist.DebugLevel.DETAIL)
dist.barrier()
dist.monitored_barrier()
print(f"rank {RANK}: collectives ok", flush=True)
dist.destroy_process_group()
assert not dist.is_initialized()
