"""Run by test_faults.py: a collective whose peer never comes raises after the group's timeout, never hangs."""

import time
from datetime import timedelta

import munet
import munet.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=2))
if dist.get_rank() == 0:
    start = time.monotonic()
    try:
        dist.all_reduce(munet.ones(3))
    except RuntimeError as error:
        assert "timed out after 2 s" in str(error), error
        assert time.monotonic() - start < 30
        print("rank 0: timeout ok", flush=True)
else:
    print("rank 1: timeout ok", flush=True)
    time.sleep(4)  # never joins the collective (a stuck or lost rank)
