"""Run by test_extras.py on 2 or 4 ranks (under mpirun and as separate processes): batched point-to-point,
point-to-point and scattered/gathered objects, coalesced collectives, subgroups and split_group."""

import os
from datetime import timedelta

import numpy as np

import munet
import munet.distributed as dist
from munet.distributed import ReduceOp

dist.init_process_group("gloo")
RANK, WORLD = dist.get_rank(), dist.get_world_size()
right, left = (RANK + 1) % WORLD, (RANK - 1) % WORLD


def same(t, expected, what):
    if not np.allclose(t.numpy(), expected, rtol=1e-6, atol=1e-6):
        raise AssertionError(f"rank {RANK}: {what}: got {t.numpy().tolist()}, expected {np.asarray(expected).tolist()}")


def expect_raises(kind, words, fn):
    try:
        fn()
    except kind as error:
        assert all(w in str(error) for w in words), f"{error!r} does not mention {words}"
        return
    raise AssertionError(f"rank {RANK}: expected {kind.__name__} mentioning {words}")


# batch_isend_irecv: a ring in both directions
to_right, from_left = munet.full((3,), float(RANK)), munet.zeros(3)
to_left, from_right = munet.full((2,), 10.0 + RANK), munet.zeros(2)
ops = [
    dist.P2POp(dist.isend, to_right, right),
    dist.P2POp(dist.irecv, from_left, left),
    dist.P2POp(dist.isend, to_left, left, tag=1),
    dist.P2POp(dist.irecv, from_right, right, tag=1),
]
for work in dist.batch_isend_irecv(ops):
    work.wait()
same(from_left, [left] * 3, "batch_isend_irecv from the left")
same(from_right, [10.0 + right] * 2, "batch_isend_irecv from the right")
expect_raises(ValueError, ["Invalid ``op``"], lambda: dist.P2POp(dist.all_reduce, to_right, right))

# objects: point to point, scatter, gather (plain data only)
if RANK == 0:
    dist.send_object_list([{"step": 3}, (1, "a"), np.arange(3)], dst=1)
elif RANK == 1:
    got = [None, None, None]
    assert dist.recv_object_list(got) == 0, "recv_object_list returns the sender"
    assert got[0] == {"step": 3} and got[1] == (1, "a") and np.array_equal(got[2], np.arange(3)), got
out = [None]
dist.scatter_object_list(out, [{"rank": r, "w": [r] * r} for r in range(WORLD)] if RANK == 1 else None, src=1)
assert out[0] == {"rank": RANK, "w": [RANK] * RANK}, out
gathered = [None] * WORLD if RANK == WORLD - 1 else None
dist.gather_object({"from": RANK, "t": munet.tensor([float(RANK)])}, gathered, dst=WORLD - 1)
if RANK == WORLD - 1:
    assert [g["from"] for g in gathered] == list(range(WORLD)), gathered
    assert [float(g["t"].item()) for g in gathered] == [float(r) for r in range(WORLD)]


class Opaque:
    pass


# the sender of an object that is not plain data raises TypeError, every other rank RuntimeError
expect_raises(
    TypeError if RANK == 0 else RuntimeError,
    ["cannot send"] if RANK == 0 else ["rank(s) [0] could not encode"],
    lambda: dist.gather_object(Opaque() if RANK == 0 else 1, [None] * WORLD if RANK == 0 else None),
)

# coalesced collectives
a, b = munet.full((2, 2), float(RANK + 1)), munet.arange(3.0) * (RANK + 1)
dist.all_reduce_coalesced([a, b], op=ReduceOp.SUM)
total = sum(r + 1 for r in range(WORLD))
same(a, np.full((2, 2), total), "all_reduce_coalesced first tensor")
same(b, np.arange(3.0) * total, "all_reduce_coalesced second tensor")
outs = [[munet.zeros(2), munet.zeros(1, 3)] for _ in range(WORLD)]
dist.all_gather_coalesced(outs, [munet.full((2,), float(RANK)), munet.full((1, 3), -float(RANK))])
for r in range(WORLD):
    same(outs[r][0], [r, r], f"all_gather_coalesced[{r}][0]")
    same(outs[r][1], [[-r, -r, -r]], f"all_gather_coalesced[{r}][1]")
expect_raises(ValueError, ["dtype"], lambda: dist.all_reduce_coalesced([a, munet.ones(2, dtype=munet.int64)]))

# subgroups
count = dist.get_pg_count()
mine, groups = dist.new_subgroups(group_size=2)
assert len(groups) == WORLD // 2 and dist.get_pg_count() == count + 1
assert dist.get_process_group_ranks(mine) == [RANK - RANK % 2, RANK - RANK % 2 + 1]
t = munet.tensor([float(RANK)])
dist.all_reduce(t, group=mine)
same(t, [2 * (RANK - RANK % 2) + 1], "all_reduce on new_subgroups' group")
evens, odds = list(range(0, WORLD, 2)), list(range(1, WORLD, 2))
mine, groups = dist.new_subgroups_by_enumeration([evens, odds])
assert dist.get_process_group_ranks(mine) == (evens if RANK % 2 == 0 else odds) and len(groups) == 2
t = munet.tensor([1.0])
dist.all_reduce(t, group=mine)
same(t, [len(evens if RANK % 2 == 0 else odds)], "all_reduce on an enumerated subgroup")
expect_raises(ValueError, ["appeared in both"], lambda: dist.new_subgroups_by_enumeration([[0, 1], [1]]))
expect_raises(ValueError, ["must not exceed the world size"], lambda: dist.new_subgroups(group_size=WORLD + 1))
if WORLD == 4:
    expect_raises(ValueError, ["divisible"], lambda: dist.new_subgroups(group_size=3))
# split_group of a subgroup: only its members call, the other ranks go on with other work
split = dist.split_group(mine, [[r] for r in dist.get_process_group_ranks(mine)])
assert dist.get_process_group_ranks(split) == [RANK]
t = munet.tensor([5.0])
dist.all_reduce(t, group=split)
same(t, [5.0], "all_reduce on a split_group group of one")
t = munet.tensor([1.0])
dist.all_reduce(t)
same(t, [WORLD], "the default group still works after the subgroups")

# a ProcessGroup's own methods with PyTorch's option records
pg = dist.group.WORLD
opts = dist.AllreduceOptions()
assert opts.reduceOp is ReduceOp.SUM and opts.timeout.total_seconds() < 0, "PyTorch's defaults"
opts.reduceOp = ReduceOp.MAX
t = munet.tensor([float(RANK)])
pg.allreduce([t], opts).wait()
same(t, [WORLD - 1], "pg.allreduce with AllreduceOptions(reduceOp=MAX)")
opts = dist.BroadcastOptions()
opts.rootRank = WORLD - 1
t = munet.tensor([float(RANK)])
pg.broadcast([t], opts).wait()
same(t, [WORLD - 1], "pg.broadcast with BroadcastOptions(rootRank)")
opts = dist.ReduceOptions()
opts.rootRank, opts.reduceOp = 0, ReduceOp.SUM
t = munet.tensor([1.0])
pg.reduce([t], opts).wait()
same(t, [WORLD if RANK == 0 else 1], "pg.reduce with ReduceOptions")
a, b = munet.ones(2), munet.full((3,), 2.0)
pg.allreduce_coalesced([a, b], dist.AllreduceCoalescedOptions()).wait()
same(b, [2.0 * WORLD] * 3, "pg.allreduce_coalesced")
opts = dist.BarrierOptions()
opts.timeout = timedelta(seconds=30)
assert pg.barrier(opts).wait() and opts.device_ids == []
for cls in (dist.GatherOptions, dist.ScatterOptions, dist.ReduceScatterOptions, dist.AllToAllOptions):
    assert cls().asyncOp is True and cls().timeout < timedelta(0)

# DDP communication hooks: PyTorch's two built-in ones equal DDP's own averaging; a custom hook's value is used
from munet import nn  # noqa: E402
from munet.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402
from munet.futures import Future  # noqa: E402


def ddp_grads(register=None, bucket_cap_mb=None):
    munet.manual_seed(0)
    ddp = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)), bucket_cap_mb=bucket_cap_mb
    )
    if register is not None:
        register(ddp)
    x = munet.tensor(np.random.default_rng(RANK).standard_normal((3, 4)).astype(np.float32))
    for _ in range(2):  # the second backward runs on the buckets rebuilt from the first's order
        ddp.zero_grad()
        ddp(x).square().sum().backward()
    return [p.grad.numpy().copy() for p in ddp.parameters()]


reference = ddp_grads()
seen = []


def recording_hook(state, bucket):
    seen.append((bucket.index(), bucket.is_last(), [tuple(g.shape) for g in bucket.gradients()]))
    return default_hooks.allreduce_hook(state, bucket)


for register, tolerance in [
    (lambda d: d.register_comm_hook(None, default_hooks.allreduce_hook), 1e-6),
    (lambda d: d._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE), 1e-6),
    (lambda d: d._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS), 2e-3),
    (lambda d: d.register_comm_hook(None, recording_hook), 1e-6),
]:
    for got, want in zip(ddp_grads(register, bucket_cap_mb=1e-6), reference):
        assert np.allclose(got, want, rtol=tolerance, atol=tolerance), f"rank {RANK}: hook gave {got}, not {want}"
first, rebuilt = seen[0], seen[1:]
assert first == (0, True, [(5, 4), (5,), (2, 5), (2,)]), f"the first backward has one bucket: {first}"
assert [index for index, _, _ in rebuilt] == list(range(len(rebuilt))) and rebuilt[-1][1] and not rebuilt[0][1], seen
assert (
    [shape for _, _, shapes in rebuilt for shape in shapes]
    == [(2,), (2, 5), (5,), (5, 4)]
    == [shapes[0] for _, _, shapes in rebuilt]
), "rebuilt buckets (one parameter each) follow the gradients' ready order; gradients() has their shapes"


def zero_hook(state, bucket):
    future = Future()
    future.set_result(munet.zeros(bucket.buffer().numel()))
    return future


assert all(not g.any() for g in ddp_grads(lambda d: d.register_comm_hook(None, zero_hook))), "the hook's value is used"
expect_raises(TypeError, ["must return a munet.futures.Future"],
              lambda: ddp_grads(lambda d: d.register_comm_hook(None, lambda s, b: b.buffer())))  # fmt: skip
dist.barrier()  # the failed hook left the other ranks' buckets unreduced on purpose; meet again

# small names
assert dist.get_default_backend_for_device("cpu") == "gloo" and dist.is_backend_available("gloo")
assert not dist.is_ucc_available() and not dist.is_xccl_available() and not dist.is_backend_available("nccl")
assert dist.get_node_local_rank() == int(os.environ["LOCAL_RANK"]), "torchrun and munet-run set LOCAL_RANK"
assert dist.supports_complex(ReduceOp.SUM) and not dist.supports_complex(ReduceOp.MAX)
assert dist.get_backend_config() == "cpu:gloo"
dist.destroy_process_group()
assert dist.get_pg_count() == 0
print(f"rank {RANK}: extras ok", flush=True)
