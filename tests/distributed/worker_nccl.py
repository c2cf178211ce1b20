"""Run by test_nccl.py on 2 or 4 ranks: backend 'nccl' on the fake CuPy (tests/backends/fake_cupy.py),
whose NCCL really exchanges the data between the ranks (through files its unique id names).

Each rank takes fake device ``LOCAL_RANK % 2`` and joins with the backend in
``MUNET_TEST_NCCL_BACKEND`` (``"nccl"`` or ``"cpu:gloo,cuda:nccl"``; the unique id goes over the
host transport: MPI under mpirun, TCP otherwise). Then every collective on cuda tensors against
its NumPy result, the NCCL call each one made (op and dtype mapping, the stream it was issued on),
the work handles' events, AVG before NCCL 2.10, the errors for what NCCL cannot do, groups, and DDP
training on cuda shards against single-process training on the whole batch. Exits non-zero on the
first mismatch.
"""

import os

import numpy as np
import pytest

from tests.backends import fake_cupy

fake_cupy.install(pytest.MonkeyPatch())

import munet  # noqa: E402 - after the fake CuPy is in place
import munet.distributed as dist  # noqa: E402
from munet import nn  # noqa: E402
from munet.distributed import ReduceOp  # noqa: E402
from tests.distributed.launch import expect_raises  # noqa: E402

LOCAL = int(os.environ["LOCAL_RANK"])
DEV = f"cuda:{LOCAL % fake_cupy.DEVICES}"
munet.cuda.set_device(DEV)
BACKEND = os.environ.get("MUNET_TEST_NCCL_BACKEND", "nccl")
dist.init_process_group(BACKEND)
RANK, WORLD = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == BACKEND and dist.is_nccl_available() and dist.is_backend_available("nccl")
assert dist.get_backend_config() == ("cuda:nccl" if BACKEND == "nccl" else BACKEND)
CALLS = fake_cupy.NCCL_CALLS
NCCL_TYPES = {"float32": fake_cupy.NCCL_FLOAT32, "float64": fake_cupy.NCCL_FLOAT64, "float16": fake_cupy.NCCL_FLOAT16,
              "bfloat16": fake_cupy.NCCL_BFLOAT16, "int64": fake_cupy.NCCL_INT64, "int32": fake_cupy.NCCL_INT32,
              "int8": fake_cupy.NCCL_INT8, "uint8": fake_cupy.NCCL_UINT8, "bool": fake_cupy.NCCL_UINT8}  # fmt: skip
NCCL_OPS = {ReduceOp.SUM: fake_cupy.NCCL_SUM, ReduceOp.PRODUCT: fake_cupy.NCCL_PROD, ReduceOp.MAX: fake_cupy.NCCL_MAX,
            ReduceOp.MIN: fake_cupy.NCCL_MIN, ReduceOp.AVG: fake_cupy.NCCL_AVG}  # fmt: skip
COMBINE = {ReduceOp.SUM: np.sum, ReduceOp.PRODUCT: np.prod, ReduceOp.MAX: np.max, ReduceOp.MIN: np.min}


def values(rank: int, n: int = 6) -> np.ndarray:
    """Small integers (every sum, product and average below is exact in every dtype)."""
    return (np.arange(n) % 3 + rank + 1).astype(np.float64)


def on_device(array: np.ndarray, dtype: str):
    return munet.tensor(array).to(getattr(munet, dtype)).to(DEV)


def host(t) -> np.ndarray:
    assert t.device.type == "cuda", t.device
    return np.asarray(t.cpu().float().numpy() if t.dtype is munet.bfloat16 else t.cpu().numpy())


def same(t, expected, what: str) -> None:
    got = host(t)
    if got.shape != np.shape(expected) or not np.array_equal(got.astype(np.float64), np.asarray(expected, np.float64)):
        raise AssertionError(f"rank {RANK}: {what}: got {got.tolist()}, expected {np.asarray(expected).tolist()}")


def last_call(name: str, count: int, dtype: str, op=None, root=None) -> None:
    got = CALLS[-1]
    wanted = (name, count, NCCL_TYPES[dtype] if dtype else fake_cupy.NCCL_UINT8, op, root)
    assert got[:5] == wanted, f"rank {RANK}: NCCL call {got[:5]}, expected {wanted}"
    assert got[5] == munet.cuda.current_stream().cuda_stream, "issued on MuNet's current stream"


everyone = np.stack([values(r) for r in range(WORLD)])

# all_reduce: every op on every dtype NCCL reduces, mapped onto NCCL's op and datatype -------------------
for dtype in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8"):
    for op in (ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.AVG):
        if op is ReduceOp.AVG and dtype not in ("float32", "float64", "float16", "bfloat16"):
            continue
        if op is ReduceOp.PRODUCT and dtype in ("int8", "uint8"):
            continue  # the product of 4 ranks' values overflows 8 bits
        t = on_device(values(RANK), dtype)
        dist.all_reduce(t, op)
        expected = everyone.mean(0) if op is ReduceOp.AVG else COMBINE[op](everyone, axis=0)
        same(t, expected, f"all_reduce {op} {dtype}")
        last_call("allReduce", 6, dtype, NCCL_OPS[op])
for op, nccl_op, expected in ((ReduceOp.SUM, fake_cupy.NCCL_MAX, True), (ReduceOp.PRODUCT, fake_cupy.NCCL_MIN, False),
                              (ReduceOp.MAX, fake_cupy.NCCL_MAX, True), (ReduceOp.MIN, fake_cupy.NCCL_MIN, False)):  # fmt: skip
    t = munet.tensor([RANK == 0, True]).to(DEV)
    dist.all_reduce(t, op)
    same(t, [expected, True], f"all_reduce {op} bool")
    last_call("allReduce", 2, "bool", nccl_op)

# a strided view is staged through a contiguous copy on the device and written back
base = on_device(np.arange(12.0).reshape(3, 4) + RANK, "float32")
view = base.t()[1:3]
version = base._version
dist.all_reduce(view)
expected = (np.arange(12.0).reshape(3, 4) * WORLD + sum(range(WORLD))).T[1:3]
same(view, expected, "all_reduce of a strided view")
assert base._version > version, "the write-back bumps the version"

# the stream: issued on the current one; the handle's event; wait() makes the waiting stream wait ---------
side = munet.cuda.Stream()
with munet.cuda.stream(side):
    t = on_device(values(RANK), "float32")
    work = dist.all_reduce(t, async_op=True)
    assert CALLS[-1][5] == side.cuda_stream != munet.cuda.default_stream().cuda_stream
assert work.request.event.recorded_on is side._stream, "the event is recorded behind the operation, on its stream"
other = munet.cuda.Stream()
with munet.cuda.stream(other):
    work.wait()
assert work.request.event in other._stream.waited, "Work.wait() makes the current stream wait for the event"
assert work.is_completed()
same(t, everyone.sum(0), "async all_reduce")

# before NCCL 2.10: AVG is SUM then a division; bfloat16 cannot be reduced ------------------------------
fake_cupy.NCCL_VERSION = 20907
t = on_device(values(RANK), "float32")
dist.all_reduce(t, ReduceOp.AVG)
same(t, everyone.mean(0), "AVG as SUM and a division")
last_call("allReduce", 6, "float32", fake_cupy.NCCL_SUM)
expect_raises(
    TypeError, ["NCCL 20907 cannot reduce bfloat16"], lambda: dist.all_reduce(on_device(values(0), "bfloat16"))
)
fake_cupy.NCCL_VERSION = 22703

# what NCCL cannot do raises on every rank, before any message -------------------------------------------
expect_raises(TypeError, ["backend 'nccl' cannot reduce int16"], lambda: dist.all_reduce(on_device(values(0), "int16")))
expect_raises(ValueError, ["Cannot use ReduceOp.BAND with NCCL"],
              lambda: dist.all_reduce(on_device(values(0), "int32"), ReduceOp.BAND))  # fmt: skip
expect_raises(ValueError, ["cannot receive from any source"], lambda: dist.recv(on_device(values(0), "float32")))
mixed = on_device(values(RANK), "float32") if RANK == 0 else munet.tensor(values(RANK)).float()
expect_raises(RuntimeError, ["the ranks disagree", "rank 0 called all_reduce of float32 [6] (a cuda tensor, through NCCL)"],
              lambda: dist.all_reduce(mixed))  # fmt: skip

# the other collectives ----------------------------------------------------------------------------------
root = WORLD - 1
t = on_device(values(RANK), "float64")
dist.broadcast(t, src=root)
same(t, values(root), "broadcast")
last_call("broadcast", 6 * 8, None, None, root)

t = on_device(values(RANK), "int64")
dist.reduce(t, dst=1 % WORLD, op=ReduceOp.MAX)
same(t, everyone.max(0) if RANK == 1 % WORLD else values(RANK), "reduce")
last_call("reduce", 6, "int64", fake_cupy.NCCL_MAX, 1 % WORLD)

outs = [on_device(np.zeros(6), "float32") for _ in range(WORLD)]
dist.all_gather(outs, on_device(values(RANK), "float32"))
for r in range(WORLD):
    same(outs[r], values(r), f"all_gather [{r}]")
assert all(o.device.type == "cuda" for o in outs)
out = on_device(np.zeros((WORLD, 6)), "bfloat16")
dist.all_gather_into_tensor(out, on_device(values(RANK), "bfloat16"))
same(out, everyone, "all_gather_into_tensor")
last_call("allGather", 6 * 2, None)

big = on_device(np.arange(WORLD * 3, dtype=np.float64) + RANK, "float32")
out = on_device(np.zeros(3), "float32")
dist.reduce_scatter_tensor(out, big, ReduceOp.AVG)
reduced = np.mean([np.arange(WORLD * 3) + r for r in range(WORLD)], axis=0)
same(out, reduced[RANK * 3 : RANK * 3 + 3], "reduce_scatter_tensor AVG")
last_call("reduceScatter", 3, "float32", fake_cupy.NCCL_AVG)
out = on_device(np.zeros(6), "float64")
dist.reduce_scatter(out, [on_device(values(RANK) * (j + 1), "float64") for j in range(WORLD)], ReduceOp.MIN)
same(out, everyone.min(0) * (RANK + 1), "reduce_scatter MIN")

# uneven all-to-all: rank r sends r + j + 1 elements to rank j
send_sizes = [RANK + j + 1 for j in range(WORLD)]
recv_sizes = [r + RANK + 1 for r in range(WORLD)]
inp = on_device(np.concatenate([np.full(n, 10 * RANK + j) for j, n in enumerate(send_sizes)]), "float32")
out = on_device(np.zeros(sum(recv_sizes)), "float32")
dist.all_to_all_single(out, inp, recv_sizes, send_sizes)
same(out, np.concatenate([np.full(n, 10 * r + RANK) for r, n in enumerate(recv_sizes)]), "all_to_all_single uneven")
assert {c[0] for c in CALLS[-2 * WORLD :]} == {"send", "recv"}, "all_to_all is grouped sends and receives"
outs = [on_device(np.zeros(2), "int64") for _ in range(WORLD)]
dist.all_to_all(outs, [on_device(np.array([RANK, j]), "int64") for j in range(WORLD)])
for r in range(WORLD):
    same(outs[r], [r, RANK], f"all_to_all [{r}]")

gathered = [on_device(np.zeros(6), "float32") for _ in range(WORLD)] if RANK == 0 else None
dist.gather(on_device(values(RANK), "float32"), gathered, dst=0)
if RANK == 0:
    for r in range(WORLD):
        same(gathered[r], values(r), f"gather [{r}]")
t = on_device(np.zeros(6), "float32")
dist.scatter(t, [on_device(values(r), "float32") for r in range(WORLD)] if RANK == 0 else None, src=0)
same(t, values(RANK), "scatter")

ts = [on_device(values(RANK)[:2], "float64"), on_device(values(RANK)[:3].reshape(3, 1), "float64")]
dist.all_reduce_coalesced(ts)
same(ts[0], everyone[:, :2].sum(0), "all_reduce_coalesced [0]")
same(ts[1], everyone[:, :3].sum(0).reshape(3, 1), "all_reduce_coalesced [1]")
last_call("allReduce", 5, "float64", fake_cupy.NCCL_SUM)
dist.barrier()

# point to point: a ring as one batch (one NCCL group), and pairs in an order that cannot deadlock
right, left = (RANK + 1) % WORLD, (RANK - 1) % WORLD
got = on_device(np.zeros(6), "float32")
works = dist.batch_isend_irecv([dist.P2POp(dist.isend, on_device(values(RANK), "float32"), right),
                                dist.P2POp(dist.irecv, got, left)])  # fmt: skip
for w in works:
    w.wait()
same(got, values(left), "batch_isend_irecv ring")
got = on_device(np.zeros(6), "float64")
if RANK % 2 == 0:
    dist.send(on_device(values(RANK), "float64"), dst=RANK ^ 1)
    assert dist.recv(got, src=RANK ^ 1) == RANK ^ 1
else:
    assert dist.recv(got, src=RANK ^ 1) == RANK ^ 1
    dist.send(on_device(values(RANK), "float64"), dst=RANK ^ 1)
same(got, values(RANK ^ 1), "send/recv")

# groups: each makes its own communicator (its id over the group's host transport) -----------------------
pairs = [dist.new_group([r, r ^ 1]) for r in range(0, WORLD, 2)]
mine = pairs[RANK // 2]
t = on_device(values(RANK), "float32")
dist.all_reduce(t, group=mine)
same(t, values(RANK) + values(RANK ^ 1), "all_reduce in a pair")
gloo = dist.new_group(backend="gloo")
before = len(CALLS)
t = on_device(values(RANK), "float32")
dist.all_reduce(t, group=gloo)
same(t, everyone.sum(0), "cuda tensors on a gloo group go through host memory")
c = munet.tensor(values(RANK))
dist.all_reduce(c)
assert np.array_equal(c.numpy(), everyone.sum(0)), "cpu tensors on this group go over the host transport"
assert len(CALLS) == before, "no NCCL call for either"
sub, _ = dist.new_subgroups()  # PyTorch's default size: the machine's cuda devices (the fake has 2)
assert dist.get_process_group_ranks(sub) == [RANK & ~1, RANK | 1]

# a device mesh of cuda ranks: its groups carry cuda tensors through NCCL too
mesh = dist.device_mesh.init_device_mesh("cuda", (WORLD // 2, 2), mesh_dim_names=("dp", "tp"))
t = on_device(values(RANK), "float32")
dist.all_reduce(t, group=mesh.get_group("tp"))
same(t, values(RANK) + values(RANK ^ 1), "all_reduce over the mesh's tp dimension")
assert len(CALLS) > before and CALLS[-1][0] == "allReduce"
t = on_device(values(RANK), "float32")
dist.all_reduce(t, group=mesh["dp"].get_group())
same(t, everyone[RANK % 2 :: 2].sum(0), "all_reduce over the mesh's dp dimension")


# DDP on cuda shards equals single-process training on the whole batch ------------------------------------
def mlp(seed):
    munet.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).to(munet.float64)


reference, model = mlp(0), mlp(RANK).to(DEV)
ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1e-6)  # a bucket per parameter once rebuilt
assert all(b.flat.device.type == "cuda" for b in ddp.reducer.buckets)
opt_ref = munet.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
opt = munet.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
for step in range(3):
    rng = np.random.default_rng(step)
    x, y = munet.tensor(rng.standard_normal((2 * WORLD, 5))), munet.tensor(rng.standard_normal((2 * WORLD, 3)))
    opt_ref.zero_grad()
    nn.functional.mse_loss(reference(x), y).backward()
    opt_ref.step()
    opt.zero_grad()
    before = len(CALLS)
    nn.functional.mse_loss(ddp(x[2 * RANK : 2 * RANK + 2].to(DEV)), y[2 * RANK : 2 * RANK + 2].to(DEV)).backward()
    assert any(c[0] == "allReduce" and c[3] == fake_cupy.NCCL_AVG for c in CALLS[before:]), "buckets averaged by NCCL"
    opt.step()
    for (name, p), q in zip(reference.named_parameters(), ddp.module.parameters()):
        difference = np.abs(p.detach().numpy() - q.detach().cpu().numpy()).max()
        assert difference < 1e-10, f"rank {RANK}: step {step}: {name} differs by {difference:g}"
assert len(ddp.reducer.buckets) == 4 and all(b.flat.device.type == "cuda" for b in ddp.reducer.buckets)


# a munet.compile'd DDP step on cuda: the bucket averages are all_reduce nodes on the device, reduced
# by NCCL at every replay (no host copy); the plan runs step by step, as a collective refuses capture
def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


reference, ddp = mlp(0), nn.parallel.DistributedDataParallel(mlp(RANK).to(DEV), bucket_cap_mb=1e-4)
opt_ref = munet.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
opt = munet.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
compiled_step = munet.compile(train_step)
for step in range(4):  # the trace, then replays (past the CUDA graph warm-up)
    rng = np.random.default_rng(10 + step)
    x, y = munet.tensor(rng.standard_normal((2 * WORLD, 5))), munet.tensor(rng.standard_normal((2 * WORLD, 3)))
    train_step(reference, opt_ref, x, y)
    before = len(CALLS)
    compiled_step(ddp, opt, x[2 * RANK : 2 * RANK + 2].to(DEV), y[2 * RANK : 2 * RANK + 2].to(DEV))
    averaged = [c for c in CALLS[before:] if c[0] == "allReduce" and c[3] == fake_cupy.NCCL_AVG]
    assert len(averaged) == len(ddp.reducer.buckets), f"rank {RANK}: step {step}: {len(averaged)} NCCL averages"
    for (name, p), q in zip(reference.named_parameters(), ddp.module.parameters()):
        difference = np.abs(p.detach().numpy() - q.detach().cpu().numpy()).max()
        assert difference < 1e-10, f"rank {RANK}: compiled step {step}: {name} differs by {difference:g}"
reductions = [n for n in compiled_step.graph.nodes if n.op.name == "all_reduce"]
assert len(reductions) == len(ddp.reducer.buckets)
assert all(n.outputs[0].device == munet.device(DEV) and n.args[0].device == munet.device(DEV) for n in reductions)
stats = compiled_step.stats()
assert not stats["cuda_graphs"] and "collective cannot run inside a CUDA graph" in stats["cuda_graph"], stats


# find_unused_parameters on cuda: rank 0 uses head b, the others head a; each gets the average over
# the ranks of the local gradients (zero where unused), as the reference's loss summed over the shards
class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(5, 3), nn.Linear(5, 3)

    def forward(self, x, use_b):
        return self.b(x) if use_b else self.a(x)


def heads():
    munet.manual_seed(3)
    return Heads().to(munet.float64)


reference, ddp = heads(), nn.parallel.DistributedDataParallel(heads().to(DEV), find_unused_parameters=True)
rng = np.random.default_rng(7)
x, y = munet.tensor(rng.standard_normal((2 * WORLD, 5))), munet.tensor(rng.standard_normal((2 * WORLD, 3)))
shards = [(x[2 * r : 2 * r + 2], y[2 * r : 2 * r + 2]) for r in range(WORLD)]
sum(nn.functional.mse_loss(reference(xs, r == 0), ys) for r, (xs, ys) in enumerate(shards)).div(WORLD).backward()
xs, ys = shards[RANK]
nn.functional.mse_loss(ddp(xs.to(DEV), RANK == 0), ys.to(DEV)).backward()
for (name, p), q in zip(reference.named_parameters(), ddp.module.parameters()):
    difference = np.abs(p.grad.numpy() - q.grad.cpu().numpy()).max()
    assert difference < 1e-10, f"rank {RANK}: find_unused_parameters: {name}.grad differs by {difference:g}"

dist.destroy_process_group()
print(f"rank {RANK}: nccl ok", flush=True)
