"""DistributedDataParallel: training on shards equals single-process training on the whole batch,
no_sync accumulates, unused parameters, buffers and state_dict keys (see worker_ddp.py)."""

import pytest

from tests.distributed.launch import needs_mpi, run_ranks, run_separately


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 4])
def test_ddp_matches_single_process_training(nprocs):
    run_ranks("worker_ddp.py", nprocs, "ddp ok")


def test_ddp_matches_single_process_training_without_mpirun():
    run_separately("worker_ddp.py", 2, "ddp ok")


def test_ddp_needs_an_initialized_process_group():
    from munet import nn

    with pytest.raises(ValueError, match="init_process_group"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
