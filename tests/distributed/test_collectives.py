"""munet.distributed's collectives on 2 and 4 ranks, each checked against its single-process result
(tests/distributed/worker_collectives.py holds the checks): under mpirun (the MPI transport) and as
separate processes started like torchrun (the TCP transport)."""

import pytest

from tests.distributed.launch import needs_mpi, run_ranks, run_separately


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 4])
def test_collectives_match_single_process_results(nprocs):
    run_ranks("worker_collectives.py", nprocs, "collectives ok")


@pytest.mark.parametrize("nprocs", [2, 4])
def test_collectives_match_single_process_results_without_mpirun(nprocs):
    run_separately("worker_collectives.py", nprocs, "collectives ok")
