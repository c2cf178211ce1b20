"""A rank that never joins a collective makes the others raise after the group's timeout (worker_timeout.py)."""

from tests.distributed.launch import needs_mpi, run_ranks


@needs_mpi
def test_missing_peer_times_out_instead_of_hanging():
    run_ranks("worker_timeout.py", 2, "timeout ok", timeout=120)
