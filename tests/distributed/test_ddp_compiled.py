"""A munet.compile'd training step under DistributedDataParallel equals eager DDP (see worker_ddp_compiled.py)."""

from tests.distributed.launch import needs_mpi, run_ranks, run_separately


@needs_mpi
def test_compiled_ddp_step_matches_eager_ddp():
    run_ranks("worker_ddp_compiled.py", 2, "compiled ddp ok")


def test_compiled_ddp_step_matches_eager_ddp_without_mpirun():
    run_separately("worker_ddp_compiled.py", 2, "compiled ddp ok")
