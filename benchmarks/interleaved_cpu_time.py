"""MuNet compiled vs PyTorch on one workload, steps interleaved, in process CPU time and wall time.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/interleaved_cpu_time.py cnn [--steps 20] [--warmup 5]

``compare_pytorch.py`` times each configuration in its own block of steps, so on a shared
machine whose load moves by 2x within a minute, a configuration can be slowed by a burst the
others missed. This script builds the four configurations (MuNet compiled, MuNet eager, PyTorch
eager, torch.compile; same workloads and steps as ``compare_pytorch.py``), then runs one step of
each in turn, ``--steps`` rounds, and reports per configuration the median of the process CPU
time of its steps (time spent descheduled is not counted; both libraries run one thread) and
the median wall time. The GEMM floor (``compare_pytorch.gemm_floor``) is measured in CPU time
too, between the rounds. The figures are still exposed to cache and memory-bandwidth contention.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import time

import torch
from compare_pytorch import build, gemms, munet_step, torch_step

import munet


def _configurations(name: str) -> dict:
    runs = {}
    for mode in ("munet compiled", "munet eager", "torch eager", "torch.compile"):
        lib = "munet" if mode.startswith("munet") else "torch"
        model, opt, x, y = build(name, lib)
        step = munet_step if lib == "munet" else torch_step
        if mode == "munet compiled":
            step = munet.compile(step)
        elif mode == "torch.compile":
            step = torch.compile(step)
        runs[mode] = (step, (model, opt, x, y))
    return runs


def _floor_cpu_ms(name: str) -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    total = 0.0
    for batch, m, k, n in gemms(name):
        lead = (batch,) if batch > 1 else ()
        a, b = rng.standard_normal((*lead, m, k), np.float32), rng.standard_normal((*lead, k, n), np.float32)
        out = np.empty((*lead, m, n), np.float32)
        np.matmul(a, b, out=out)
        samples = []
        for _ in range(5):
            start = time.process_time()
            np.matmul(a, b, out=out)
            samples.append(time.process_time() - start)
        total += statistics.median(samples) * 1e3
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=("mlp", "cnn", "gpt"))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    munet.set_num_threads(1)
    runs = _configurations(args.workload)
    for step, inputs in runs.values():
        for _ in range(args.warmup):
            step(*inputs).item()
    cpu = {mode: [] for mode in runs}
    wall = {mode: [] for mode in runs}
    floors = []
    for i in range(args.steps):
        for mode, (step, inputs) in runs.items():
            c0, w0 = time.process_time(), time.perf_counter()
            step(*inputs).item()
            cpu[mode].append((time.process_time() - c0) * 1e3)
            wall[mode].append((time.perf_counter() - w0) * 1e3)
        if i % 5 == 0:
            floors.append(_floor_cpu_ms(args.workload))
    load = os.getloadavg()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  load={load[0]:.1f},{load[1]:.1f},{load[2]:.1f}")
    floor = statistics.median(floors)
    base = statistics.median(cpu["munet compiled"])
    print(
        f"{args.workload}: {args.steps} interleaved rounds after {args.warmup} warm-up; GEMM floor {floor:.1f} ms CPU"
    )
    for mode in runs:
        c, w = statistics.median(cpu[mode]), statistics.median(wall[mode])
        print(f"  {mode:15s} CPU {c:7.1f} ms/step   wall {w:7.1f} ms/step   CPU/compiled {c / base:5.2f}x")
    print(f"  munet compiled CPU / GEMM floor CPU = {base / floor:.2f}x")


if __name__ == "__main__":
    main()
