"""munet.distributed before init_process_group, in this process (no mpirun): clear errors, PyTorch's names."""

import pytest

import munet
import munet.distributed as dist


def test_availability_and_state_before_init():
    assert dist.is_available() and dist.is_gloo_available(), "the TCP transport needs only Python"
    assert not dist.is_nccl_available() and not dist.is_initialized()
    for query in (dist.get_rank, dist.get_world_size, dist.get_backend):
        with pytest.raises(ValueError, match="init_process_group"):
            query()
    with pytest.raises(ValueError, match="all_reduce: Default process group has not been initialized"):
        dist.all_reduce(munet.ones(2))


def test_nccl_and_unknown_backends_are_refused_clearly(monkeypatch):
    with pytest.raises(RuntimeError, match="backend 'nccl' .* is unavailable here: no CUDA device"):
        dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="unknown backend 'ucc'"):
        dist.init_process_group("ucc")
    with pytest.raises(ValueError, match="world_size must be positive if using store"):
        dist.init_process_group("gloo", store=dist.HashStore())
    with pytest.raises(ValueError, match="rank must be non-negative if using store"):
        dist.init_process_group("gloo", store=dist.HashStore(), world_size=2)
    with pytest.raises(ValueError, match="backend 'mpi' needs ranks started by mpirun"):
        dist.init_process_group("mpi", store=dist.HashStore(), world_size=1, rank=0)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(ValueError, match="environment variable MASTER_PORT expected"):
        dist.init_process_group("gloo", init_method="env://", world_size=1, rank=0)
    assert not dist.is_initialized()


def test_one_rank_over_a_store_runs_collectives_in_this_process():
    dist.init_process_group("gloo", store=dist.HashStore(), world_size=1, rank=0)
    try:
        assert dist.get_backend() == "gloo" and dist.get_world_size() == 1
        t = munet.arange(4.0)
        dist.all_reduce(t)
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    finally:
        dist.destroy_process_group()
