"""A composite fused in compiled plans against the same plan keeping its eager kernel, interleaved.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/composite_fusion.py [--op log_softmax]
        [--workloads mlp,cnn,gpt] [--rounds 6]

Builds each workload's compiled training step of ``compare_pytorch.py`` twice in one process: once
with ``compiler/passes/decompose.py`` told to keep ``--op`` whole (its eager kernel runs in the
plan) and once as the compiler does now (decomposed and fused). Then every round runs one step of
each, so load drift on a shared machine hits both alike, and prints the median process CPU time
per step. ``--loss`` adds ``cross_entropy`` forward and backward alone over a few shapes.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import time

import numpy as np
from compare_pytorch import make_step

import munet
import munet.nn.functional as F
from munet.compiler.passes import decompose


def _compiled_pair(build, op: str):
    """``(kept, fused)``: ``build()``'s compiled callable compiled keeping ``op`` whole, and as is."""
    decomposes = decompose._decomposes

    def keep(node, fusing):
        return False if node.op.name == op and fusing else decomposes(node, fusing)

    decompose._decomposes = keep
    try:
        kept = build()  # compiles at its first call, inside the patch
    finally:
        decompose._decomposes = decomposes
    return kept, build()


def _interleaved(runs: dict, rounds: int, calls: int = 1) -> dict:
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.process_time()
            for _ in range(calls):
                run()
            times[name].append((time.process_time() - start) / calls * 1e3)
    return {name: statistics.median(v) for name, v in times.items()}


def _workload(name: str, op: str, rounds: int) -> dict:
    def build():
        step, args = make_step(name, "munet compiled")
        for _ in range(2):
            step(*args)
        return lambda: step(*args)

    kept, fused = _compiled_pair(build, op)
    return _interleaved({"kernel": kept, "fused": fused}, rounds)


def _loss(n: int, c: int, op: str, rounds: int) -> dict:
    g = np.random.default_rng(0)
    x = munet.tensor(g.standard_normal((n, c)).astype(np.float32))
    t = munet.tensor(g.integers(0, c, n))

    def step(x, t):
        x.requires_grad_(True)
        loss = F.cross_entropy(x, t)
        loss.backward()
        return loss, x.grad

    def build():
        compiled = munet.compile(step)
        for _ in range(3):
            compiled(x, t)
        return lambda: compiled(x, t)

    kept, fused = _compiled_pair(build, op)
    return _interleaved({"kernel": kept, "fused": fused}, rounds, calls=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="log_softmax")
    parser.add_argument("--workloads", default="mlp,cnn,gpt")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--loss", action="store_true", help="also cross_entropy alone over 2048x65, 256x10, 24x13")
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  load={os.getloadavg()}")
    print(f"# OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}; median ms of process CPU time")
    for name in filter(None, args.workloads.split(",")):
        r = _workload(name, args.op, args.rounds)
        print(f"{name}: {args.op} kernel {r['kernel']:.1f} ms/step, fused {r['fused']:.1f} ms/step")
    if args.loss:
        for n, c in ((2048, 65), (256, 10), (24, 13)):
            r = _loss(n, c, args.op, 5 * args.rounds)
            print(f"cross_entropy {n}x{c}: {args.op} kernel {r['kernel']:.3f} ms, fused {r['fused']:.3f} ms")


if __name__ == "__main__":
    main()
