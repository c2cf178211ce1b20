"""Run by test_faults.py under mpirun on 3 ranks: rank 1 raises while ranks 0 and 2 wait in an all_reduce with a
long timeout; the job ends at once with status 1 and rank 1's traceback (munet-run aborts the job)."""

from datetime import timedelta

import munet
import munet.distributed as dist

dist.init_process_group("mpi", timeout=timedelta(seconds=300))
if dist.get_rank() == 1:
    raise ValueError("rank 1 raises on purpose")
dist.all_reduce(munet.ones(3))
