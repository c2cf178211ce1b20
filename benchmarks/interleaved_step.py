"""MuNet compiled vs torch.compile vs the GEMM floor, timed in alternation in one process.

On a shared machine whose load moves by 2x within minutes, ``compare_pytorch.py`` (each mode's
steps back to back) can put one mode in a quiet minute and the next in a busy one. Here each
round times one MuNet compiled step, one torch.compile step and one pass over the step's GEMMs
(the floor) back to back, so load drift hits all three alike; the figures are medians over the
rounds, and the ratios are medians of per-round ratios.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/interleaved_step.py gpt [--rounds 15] [--warmup 3]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import time

import numpy as np
import torch
from compare_pytorch import build, gemms, munet_step, torch_step

import munet


def _gemm_pass(name):
    """A callable running every GEMM of one step once (NumPy float32, preallocated outputs)."""
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


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=("mlp", "cnn", "gpt"))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    munet.set_num_threads(1)
    m_args, t_args = build(args.workload, "munet"), build(args.workload, "torch")
    m_step, t_step = munet.compile(munet_step), torch.compile(torch_step)
    floor = _gemm_pass(args.workload)
    runs = {
        "munet compiled": lambda: m_step(*m_args).item(),
        "torch.compile": lambda: t_step(*t_args).item(),
        "GEMM floor": floor,
    }
    for _ in range(args.warmup):
        for fn in runs.values():
            fn()
    samples = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, fn in runs.items():
            samples[name].append(_timed(fn))
    load = os.getloadavg()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')} {args.workload}, {args.rounds} rounds, load {load[0]:.1f}")
    for name, values in samples.items():
        print(f"  {name:15s} {statistics.median(values):8.1f} ms (min {min(values):.1f})")
    mine, theirs, gemm = (samples[k] for k in runs)
    vs_torch = statistics.median(t / m for m, t in zip(mine, theirs))
    vs_floor = statistics.median(m / f for m, f in zip(mine, gemm))
    print(
        f"  torch.compile / munet compiled = {vs_torch:.2f}x (above 1: MuNet faster); compiled / floor = {vs_floor:.2f}x"
    )


if __name__ == "__main__":
    main()
