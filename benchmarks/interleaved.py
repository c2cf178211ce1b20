"""One workload's training step in several modes, interleaved round by round, in wall and CPU time.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/interleaved.py gpt [--rounds 15] [--warmup 3]
        [--modes "munet compiled,torch.compile,GEMM floor"]

``compare_pytorch.py`` times each mode as one block of steps; on a shared machine whose load
moves by 2x within minutes, one block can land in a quiet minute and the next in a busy one.
Here every round runs one step of each mode back to back (the order rotated each round), so
load drift hits all modes alike. Printed per mode: the median wall time and the median process
CPU time (time spent descheduled is not counted; both libraries run one thread). Ratios are
medians of per-round ratios: ``torch.compile / mode`` (above 1: the mode is faster than
torch.compile) and ``mode / GEMM floor`` (the issue's target is at most 1.25).

Modes: ``munet compiled``, ``munet no remat`` (``options={"remat": False}``: fused kernels load what
their producers stored instead of recomputing it, ``passes/remat.py``), ``munet unfused``
(``munet.compile(fuse=False)``), ``munet eager``,
``torch eager``, ``torch.compile`` and ``GEMM floor`` (every GEMM of the step as a NumPy float32
matmul into a preallocated output; ``compare_pytorch.gemms``). Workloads and steps are those of
``compare_pytorch.py``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import time

import numpy as np
import torch
from compare_pytorch import gemms, make_step

import munet

MODES = (
    "munet compiled",
    "munet no remat",
    "munet unfused",
    "munet eager",
    "torch eager",
    "torch.compile",
    "GEMM floor",
)


def gemm_pass(name: str):
    """``() -> None`` running every GEMM of one step of ``name`` once."""
    rng = np.random.default_rng(0)
    work = []
    for batch, m, k, n in gemms(name):
        lead = (batch,) if batch > 1 else ()
        a = rng.standard_normal((*lead, m, k), np.float32)
        b = rng.standard_normal((*lead, k, n), np.float32)
        work.append((a, b, np.empty((*lead, m, n), np.float32)))

    def run():
        for a, b, out in work:
            np.matmul(a, b, out=out)

    return run


def make_run(name: str, mode: str):
    """``() -> None`` running one training step of ``name`` in ``mode`` (reading the loss back)."""
    if mode == "GEMM floor":
        return gemm_pass(name)
    step, args = make_step(name, mode)
    return lambda: step(*args).item()


def _ratio(samples: dict, num: str, den: str) -> float:
    return statistics.median(a / b for a, b in zip(samples[num], samples[den]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=("mlp", "cnn", "gpt"))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--modes", default="munet compiled,torch.compile,GEMM floor")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",")]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown modes {unknown}; choose from {', '.join(MODES)}")
    threads = int(os.environ["OPENBLAS_NUM_THREADS"])
    torch.set_num_threads(threads)
    munet.set_num_threads(threads)
    steps = {m: make_run(args.workload, m) for m in modes}
    for _ in range(args.warmup):
        for m in modes:
            steps[m]()
    wall: dict = {m: [] for m in modes}
    cpu: dict = {m: [] for m in modes}
    for r in range(args.rounds):
        for m in modes[r % len(modes) :] + modes[: r % len(modes)]:
            c0, w0 = time.process_time(), time.perf_counter()
            steps[m]()
            wall[m].append((time.perf_counter() - w0) * 1e3)
            cpu[m].append((time.process_time() - c0) * 1e3)
    load = os.getloadavg()
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')} {args.workload}: {args.rounds} interleaved rounds after "
        f"{args.warmup} warm-up, {threads} thread(s), load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}"
    )
    for m in modes:
        print(f"  {m:15s} wall {statistics.median(wall[m]):8.1f} ms   CPU {statistics.median(cpu[m]):8.1f} ms")
    for m in (m for m in modes if m.startswith("munet")):
        parts = []
        if "torch.compile" in modes:
            parts.append(
                f"torch.compile / {m} = {_ratio(wall, 'torch.compile', m):.2f}x wall, "
                f"{_ratio(cpu, 'torch.compile', m):.2f}x CPU"
            )
        if "GEMM floor" in modes:
            parts.append(
                f"{m} / floor = {_ratio(wall, m, 'GEMM floor'):.2f}x wall, {_ratio(cpu, m, 'GEMM floor'):.2f}x CPU"
            )
        if parts:
            print("  " + "; ".join(parts))


if __name__ == "__main__":
    main()
