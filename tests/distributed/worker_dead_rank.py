"""Run separately by test_faults.py: a rank that dies makes the others' collective fail at once, naming it."""

import os
import time
from datetime import timedelta

import munet
import munet.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
if dist.get_rank() == 1:
    print("rank 1: dead rank ok", flush=True)
    os._exit(0)  # dies without a word (a crash, a killed node)
start = time.monotonic()
try:
    dist.all_reduce(munet.ones(3))
except dist.DistBackendError as error:
    assert "rank 1" in str(error), error
    assert time.monotonic() - start < 30, "the dead rank is noticed when its connection closes, not at the timeout"
    print(f"rank {dist.get_rank()}: dead rank ok", flush=True)
