"""An 8-rank job on one machine (``mpirun -n 8 --oversubscribe``): all-reduce and DDP steps on the MLP equal to
single-process training (worker_eight.py)."""

from tests.distributed.launch import needs_mpi, run_ranks


@needs_mpi
def test_eight_ranks_on_one_machine():
    run_ranks("worker_eight.py", 8, "eight ok")
