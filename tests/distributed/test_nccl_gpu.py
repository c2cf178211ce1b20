"""Backend 'nccl' on a real GPU and NCCL (CuPy's ``cupy.cuda.nccl``): a one-GPU group of world size 1
(a store in this process, no launcher), every collective, the work handles, a side stream, and a DDP
step. Marked ``cuda``: skipped without a GPU, failing under ``MUNET_TEST_CUDA=1``; scripts/gpu_check.sh
runs it. With one rank NCCL's results equal the inputs, so this checks that MuNet drives CuPy's NCCL
API correctly (signatures, pointers, counts, datatypes, streams); test_nccl.py checks the data flow
between ranks on the fake CuPy."""

from datetime import timedelta

import numpy as np
import pytest

import munet
import munet.distributed as dist
from munet import nn
from munet.distributed import ReduceOp

pytestmark = pytest.mark.cuda


@pytest.fixture
def one_gpu_group():
    dist.init_process_group("nccl", store=dist.HashStore(), world_size=1, rank=0, device_id=munet.device("cuda", 0))
    yield
    dist.destroy_process_group()


def _cuda(values, dtype=munet.float32):
    return munet.tensor(np.asarray(values, dtype=np.float64)).to(dtype).cuda()


@pytest.mark.usefixtures("one_gpu_group")
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"])
def test_all_reduce_and_reduce_on_one_gpu(dtype):
    dt = getattr(munet, dtype)
    ops = [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT]
    if dt.is_floating_point:
        ops.append(ReduceOp.AVG)
    for op in ops:
        x = _cuda([0.0, 1.0, 2.0, 3.0, 5.0], dt)
        expected = x.cpu()
        dist.all_reduce(x, op)
        assert munet.equal(x.cpu(), expected), (dtype, op)
        dist.reduce(x, dst=0, op=op)
        assert munet.equal(x.cpu(), expected), (dtype, op)


@pytest.mark.usefixtures("one_gpu_group")
def test_data_movement_point_to_point_and_handles_on_one_gpu():
    x = _cuda(np.arange(12.0).reshape(3, 4))
    dist.broadcast(x, src=0)
    out = munet.zeros(3, 4, device="cuda")
    dist.all_gather_into_tensor(out, x)
    assert munet.equal(out.cpu(), x.cpu())
    outs = [munet.zeros(3, 4, device="cuda")]
    dist.all_gather(outs, x)
    assert munet.equal(outs[0].cpu(), x.cpu())
    scattered = munet.zeros(3, 4, device="cuda")
    dist.reduce_scatter_tensor(scattered, x, ReduceOp.AVG)
    assert munet.equal(scattered.cpu(), x.cpu())
    a2a = munet.zeros(3, 4, device="cuda")
    dist.all_to_all_single(a2a, x)
    assert munet.equal(a2a.cpu(), x.cpu())
    gathered = [munet.zeros(3, 4, device="cuda")]
    dist.gather(x, gathered, dst=0)
    assert munet.equal(gathered[0].cpu(), x.cpu())
    view = x.t()[1:3]  # staged through a contiguous copy and written back
    dist.all_reduce(view, ReduceOp.MAX)
    assert munet.equal(view.cpu(), x.cpu().t()[1:3])
    got = munet.zeros(3, 4, device="cuda")
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, 0), dist.P2POp(dist.irecv, got, 0)])
    for w in works:
        w.wait()
    assert munet.equal(got.cpu(), x.cpu())
    side = munet.cuda.Stream()
    with munet.cuda.stream(side):
        y = x * 2
        work = dist.all_reduce(y, async_op=True)
    work.wait()  # the current stream waits for the event recorded on the side stream
    munet.cuda.synchronize()
    assert work.is_completed() and munet.equal(y.cpu(), x.cpu() * 2)


@pytest.mark.usefixtures("one_gpu_group")
def test_blocking_wait_on_one_gpu(monkeypatch):
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", "1")
    x = munet.ones(1 << 20, device="cuda")
    work = dist.all_reduce(x, async_op=True)
    assert work.wait(timedelta(seconds=30)) and work.is_completed()


@pytest.mark.usefixtures("one_gpu_group")
def test_ddp_step_through_nccl_equals_a_plain_step_on_one_gpu():
    def mlp():
        munet.manual_seed(0)
        return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).cuda()

    plain, ddp = mlp(), nn.parallel.DistributedDataParallel(mlp(), bucket_cap_mb=1e-4)
    assert all(b.flat.device.type == "cuda" for b in ddp.reducer.buckets)
    x, y = munet.randn(4, 5, device="cuda"), munet.randn(4, 3, device="cuda")
    for model in (plain, ddp):
        nn.functional.mse_loss(model(x), y).backward()
    for p, q in zip(plain.parameters(), ddp.module.parameters()):
        assert munet.allclose(p.grad.cpu(), q.grad.cpu(), rtol=0, atol=0)
