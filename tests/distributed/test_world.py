"""munet.distributed before init_process_group, in this process (no mpirun): clear errors, PyTorch's names."""

import pytest

import munet
import munet.distributed as dist


def test_availability_and_state_before_init():
    assert dist.is_available() == dist.is_mpi_available() == dist.is_gloo_available()
    assert not dist.is_nccl_available() and not dist.is_initialized()
    for query in (dist.get_rank, dist.get_world_size, dist.get_backend):
        with pytest.raises(ValueError, match="init_process_group"):
            query()
    with pytest.raises(ValueError, match="all_reduce: Default process group has not been initialized"):
        dist.all_reduce(munet.ones(2))


def test_nccl_and_unknown_backends_are_refused_clearly():
    with pytest.raises(RuntimeError, match="CUDA/NCCL is unavailable"):
        dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="unknown backend 'ucc'"):
        dist.init_process_group("ucc")
    with (
        pytest.raises(ValueError, match="store= is not supported")
        if dist.is_available()
        else pytest.raises(RuntimeError, match="mpi4py")
    ):
        dist.init_process_group("gloo", store=object())


def test_debug_level_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("MUNET_DISTRIBUTED_DEBUG", "off")
    assert dist.get_debug_level() is dist.DebugLevel.OFF
    monkeypatch.delenv("MUNET_DISTRIBUTED_DEBUG")
    monkeypatch.delenv("TORCH_DISTRIBUTED_DEBUG", raising=False)
    assert dist.get_debug_level() is dist.DebugLevel.DETAIL, "MuNet checks collectives by default"
    monkeypatch.setenv("MUNET_DISTRIBUTED_DEBUG", "loud")
    with pytest.raises(ValueError, match="OFF, INFO or DETAIL"):
        dist.get_debug_level()
