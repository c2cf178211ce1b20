"""all_reduce's two paths in this process (a group of one over a store, the TCP transport): the synchronous
call on a contiguous cpu tensor (``ProcessGroup.allreduce_now``: the transport works on the tensor's memory,
no Work) and the general one (``async_op=True``, a staged tensor) give the same values, version bumps and
errors. tests/distributed/worker_collectives.py checks the same across ranks, over MPI and TCP."""

import numpy as np
import pytest

import munet
import munet.distributed as dist
from munet.distributed import ReduceOp


@pytest.fixture
def one_rank():
    dist.init_process_group("gloo", store=dist.HashStore(), world_size=1, rank=0)
    yield dist.group.WORLD
    dist.destroy_process_group()


CASES = [(ReduceOp.SUM, munet.float32), (ReduceOp.AVG, munet.float32), (ReduceOp.AVG, munet.float64),
         (ReduceOp.MAX, munet.int64), (ReduceOp.BXOR, munet.int32), (ReduceOp.MIN, munet.bool),
         (ReduceOp.AVG, munet.bfloat16), (ReduceOp.SUM, munet.float16)]  # fmt: skip


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{op.name}-{dtype.name}" for op, dtype in CASES])
def test_synchronous_and_general_paths_agree(one_rank, op, dtype, monkeypatch):
    values = np.random.default_rng(0).integers(-5, 6, (3, 4)) / 3
    now, general = (munet.tensor(values).to(dtype) for _ in range(2))
    taken = []
    fast = type(one_rank).allreduce_now
    monkeypatch.setattr(type(one_rank), "allreduce_now", lambda *a: taken.append(fast(*a)) or taken[-1])
    versions = now._version, general._version
    assert dist.all_reduce(now, op) is None
    dist.all_reduce(general, op, async_op=True).wait()
    low_precision = dtype in (munet.float16, munet.bfloat16)  # staged through float32
    assert taken == [not low_precision], "which path the synchronous call took"
    assert np.array_equal(now.float().numpy(), general.float().numpy())
    assert np.array_equal(now.float().numpy(), munet.tensor(values).to(dtype).float().numpy())  # one rank
    assert (now._version, general._version) == (versions[0] + 1, versions[1] + 1)


def test_a_strided_view_takes_the_general_path(one_rank):
    base = munet.arange(12.0).reshape(3, 4)
    view = base[:, ::2]
    assert not one_rank.allreduce_now(view, ReduceOp.SUM, "SUM")
    dist.all_reduce(view, ReduceOp.AVG)
    assert base.tolist() == munet.arange(12.0).reshape(3, 4).tolist()
    row = base[1:2]  # contiguous at an offset: its own buffer
    assert one_rank.allreduce_now(row, ReduceOp.SUM, "SUM")


@pytest.mark.parametrize("async_op", [False, True])
def test_both_paths_raise_the_same_errors(one_rank, async_op):
    with pytest.raises(ValueError, match="all_reduce: ReduceOp.AVG needs a floating-point tensor, got int64"):
        dist.all_reduce(munet.ones(2, dtype=munet.int64), ReduceOp.AVG, async_op=async_op)
    with pytest.raises(ValueError, match="all_reduce: ReduceOp.BOR needs an integer or bool tensor, got float32"):
        dist.all_reduce(munet.ones(2), ReduceOp.BOR, async_op=async_op)
    with pytest.raises(TypeError, match="all_reduce: tensor must be a munet.Tensor, got ndarray"):
        dist.all_reduce(np.ones(2), async_op=async_op)
    with pytest.raises(TypeError, match="all_reduce: op must be a munet.distributed.ReduceOp, got 'sum'"):
        dist.all_reduce(munet.ones(2), "sum", async_op=async_op)
