"""munet.distributed against raw mpi4py, and DDP step time against one process.

Run under mpirun (the venv's, through munet-run); rank 0 prints the tables:

    munet-run -n 2 benchmarks/distributed.py [--max-mib 64] [--repeat 20]
    munet-run -n 1 benchmarks/distributed.py --ddp-only     # the one-process baseline

all_reduce: SUM of a contiguous float32 cpu tensor in place, median over ``--repeat`` calls,
munet and mpi4py's ``Allreduce`` (IN_PLACE, on a NumPy array, on its own duplicate of
COMM_WORLD) interleaved call by call so that machine load hits both alike. munet is measured
with its default mismatch check (one small all-gather before each collective) and with
``DebugLevel.OFF``. Bandwidth is bytes / time (the "algorithm bandwidth").

DDP: one SGD step of an MLP (256 -> 512 -> 512 -> 10, ReLU, cross entropy) on ``--batch`` rows
per rank; median step time, with and without DDP on each rank (``-n 1``: the single process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np
from mpi4py import MPI

import munet
import munet.distributed as dist
from munet import nn


def median_s(fn, repeat: int, warmup: int = 3, sync=None) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        if sync is not None:
            sync()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def all_reduce_table(max_mib: float, repeat: int) -> list[dict]:
    comm = MPI.COMM_WORLD.Dup()
    rows = []
    nbytes = 64 * 1024
    while nbytes <= max_mib * 2**20:
        n = nbytes // 4
        raw = np.ones(n, dtype=np.float32)
        t = munet.ones(n)
        times = {"munet": [], "munet_nocheck": [], "mpi4py": []}
        for i in range(repeat + 2):
            comm.Barrier()
            start = time.perf_counter()
            comm.Allreduce(MPI.IN_PLACE, raw, MPI.SUM)
            mpi = time.perf_counter() - start
            comm.Barrier()
            dist.set_debug_level(dist.DebugLevel.DETAIL)
            start = time.perf_counter()
            dist.all_reduce(t)
            checked = time.perf_counter() - start
            comm.Barrier()
            dist.set_debug_level(dist.DebugLevel.OFF)
            start = time.perf_counter()
            dist.all_reduce(t)
            unchecked = time.perf_counter() - start
            if i >= 2:
                times["mpi4py"].append(mpi)
                times["munet"].append(checked)
                times["munet_nocheck"].append(unchecked)
            raw[:] = 1.0
            t.fill_(1.0)
        medians = {k: statistics.median(v) for k, v in times.items()}
        rows.append({"bytes": nbytes, **medians})
        nbytes *= 4
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    comm.Free()
    return rows


def ddp_table(batch: int, repeat: int) -> dict:
    def mlp():
        munet.manual_seed(0)
        return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))

    rng = np.random.default_rng(dist.get_rank())
    x = munet.tensor(rng.standard_normal((batch, 256)).astype(np.float32))
    y = munet.tensor(rng.integers(0, 10, batch))
    result = {}
    for name, model in (("plain", mlp()), ("ddp", nn.parallel.DistributedDataParallel(mlp()))):
        opt = munet.optim.SGD(model.parameters(), lr=0.01)

        def step(model=model, opt=opt):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

        result[name] = median_s(step, repeat, sync=dist.barrier)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-mib", type=float, default=64)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--ddp-only", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    report = {
        "ranks": dist.get_world_size(),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if not args.ddp_only and dist.get_world_size() > 1:
        report["all_reduce"] = all_reduce_table(args.max_mib, args.repeat)
    report["ddp_step_s"] = ddp_table(args.batch, args.repeat)
    report["load_after"] = os.getloadavg()[0]
    if dist.get_rank() == 0:
        print(json.dumps(report, indent=1))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
