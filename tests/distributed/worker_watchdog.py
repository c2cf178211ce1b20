"""Run by test_faults.py under mpirun on 3 ranks: rank 2 never joins the all_reduce, so ranks 0 and 1
time out, and the watchdog's census (munet/distributed/watchdog.py) names rank 2 and only rank 2."""

import time
from datetime import timedelta

import munet
import munet.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=2))
rank = dist.get_rank()
dist.all_reduce(munet.ones(3))  # every rank arrives here: nothing to report
if rank == 2:
    time.sleep(6)  # a stuck rank: not in any collective while the others wait
    print("rank 2: census ok", flush=True)
else:
    try:
        dist.all_reduce(munet.ones(3))
        raise AssertionError("the all_reduce without rank 2 finished")
    except RuntimeError as error:
        message = str(error)
        assert "timed out after 2 s" in message, message
        assert "did not arrive: rank 2 (not waiting in any collective" in message, message
        assert f"rank {1 - rank} " not in message, message  # the other waiting rank answered the census
        print(f"rank {rank}: census ok", flush=True)
