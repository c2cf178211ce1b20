"""Run by test_launcher.py through munet-run: prints what a torchrun-style script reads."""

import os
import sys

print(
    f"rank {os.environ['RANK']}: env {os.environ['WORLD_SIZE']} {os.environ['LOCAL_RANK']} {sys.argv[1:]}", flush=True
)
