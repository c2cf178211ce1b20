"""Run by test_faults.py under mpirun on 3 ranks: rank 1 is killed (SIGKILL) while the others compute, outside any
collective. Ranks 0 and 2 finish their work (rank 2 later than rank 0: the first survivor to end must not make
mpirun stop the other), and their exit status (1) and a line naming rank 1 tell that the job failed."""

import os
import signal
import time

import munet.distributed as dist

dist.init_process_group("mpi")
rank = dist.get_rank()
if rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(2 + 2 * (rank == 2))  # long enough for MPI's failure detector to tell the survivors
print(f"rank {rank}: finished its work", flush=True)
