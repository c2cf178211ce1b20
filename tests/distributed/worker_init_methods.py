"""Run separately by test_init_methods.py: init_process_group through tcp://, file:// and store=, and again
after destroy_process_group on the same store."""

import os
from datetime import timedelta

import munet
import munet.distributed as dist

RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def check_sum(expected_world: int) -> None:
    t = munet.tensor([float(RANK + 1)])
    dist.all_reduce(t)
    assert t.item() == expected_world * (expected_world + 1) / 2, t.item()
    assert dist.get_backend() == "gloo" and dist.get_world_size() == expected_world


dist.init_process_group("gloo", init_method=os.environ["MUNET_TEST_INIT"], rank=RANK, world_size=WORLD)
check_sum(WORLD)
dist.destroy_process_group()

port = int(os.environ["MASTER_PORT"]) + 1
store = dist.TCPStore("127.0.0.1", port, WORLD, RANK == 0, timeout=timedelta(seconds=60))
for _ in range(2):  # the same store twice: each init keeps its own keys
    dist.init_process_group(store=store, rank=RANK, world_size=WORLD, timeout=timedelta(seconds=60))
    check_sum(WORLD)
    dist.destroy_process_group()
print(f"rank {RANK}: init methods ok", flush=True)
