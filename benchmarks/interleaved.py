"""MuNet compiled vs torch.compile on one workload, steps interleaved so machine load hits both alike.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/interleaved.py mlp [--steps 30] [--warmup 5] [--modes ...]

``compare_pytorch.py`` times each mode as one block of steps; on a shared machine the load
changes between blocks, so its ratios swing. Here every round runs one step of each mode
back to back (in an order rotated each round) and the ratio is taken per round: the median
of those ratios, and each mode's median ms/step, are printed. Workloads and steps are those
of ``compare_pytorch.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch
from compare_pytorch import build, munet_step, torch_step

import munet

MODES = ("munet compiled", "torch.compile", "munet unfused", "torch eager", "munet eager")


def make_step(name: str, mode: str):
    """``() -> loss`` running one training step of ``name`` in ``mode``."""
    lib = "munet" if mode.startswith("munet") else "torch"
    model, opt, x, y = build(name, lib)
    step = munet_step if lib == "munet" else torch_step
    if mode == "munet compiled":
        step = munet.compile(step)
    elif mode == "munet unfused":
        step = munet.compile(step, fuse=False)
    elif mode == "torch.compile":
        step = torch.compile(step)
    return lambda: step(model, opt, x, y).item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=("mlp", "cnn", "gpt"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--modes", default="munet compiled,torch.compile")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ["OPENBLAS_NUM_THREADS"]))
    modes = [m.strip() for m in args.modes.split(",")]
    steps = {m: make_step(args.workload, m) for m in modes}
    for _ in range(args.warmup):
        for m in modes:
            steps[m]()
    samples: dict = {m: [] for m in modes}
    for r in range(args.steps):
        order = modes[r % len(modes) :] + modes[: r % len(modes)]
        for m in order:
            start = time.perf_counter()
            steps[m]()
            samples[m].append((time.perf_counter() - start) * 1e3)
    base = modes[0]
    print(
        f"{args.workload}: {args.steps} interleaved rounds, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}"
    )
    for m in modes:
        line = f"  {m:16s} {statistics.median(samples[m]):8.1f} ms/step"
        if m != base:
            ratios = [a / b for a, b in zip(samples[m], samples[base])]
            line += f"   {m}/{base} per round: median {statistics.median(ratios):.2f}x"
        print(line)


if __name__ == "__main__":
    main()
