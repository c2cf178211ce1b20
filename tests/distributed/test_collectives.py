"""munet.distributed's collectives on 2 and 4 ranks, each checked against its single-process result
(tests/distributed/worker_collectives.py holds the checks)."""

import pytest

from tests.distributed.launch import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.parametrize("nprocs", [2, 4])
def test_collectives_match_single_process_results(nprocs):
    run_ranks("worker_collectives.py", nprocs, "collectives ok")
