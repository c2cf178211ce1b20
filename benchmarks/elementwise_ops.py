"""Eager elementwise kernels: time per call of ops rendered from scalar formulas, beside PyTorch.

Median of 15 batches, in microseconds, for float32 tensors of 4 elements (dispatch overhead), of
2**14 (just above the size where MuNet's eager kernels switch from NumPy to compiled C) and of 2**20
(kernel throughput), at each thread count of ``--threads`` (default: each library's
default count, then one thread), MuNet and PyTorch side by side in one process. ``--clock cpu``
times process CPU time (steadier on a shared machine, but it adds up all of PyTorch's threads);
``--clock wall`` (the default) times elapsed time. Usage:

    .venv/bin/python benchmarks/elementwise_ops.py [--threads default,1] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

import munet
from munet.ops._registry import apply
from munet.ops.activation import threshold_backward_op


def median_us(fn, repeat: int, clock) -> float:
    for _ in range(10):
        fn()
    samples = []
    for _ in range(15):
        start = clock()
        for _ in range(repeat):
            fn()
        samples.append((clock() - start) / repeat * 1e6)
    return statistics.median(samples)


def cases(lib, a, b):
    """``(name, fn)`` for library ``lib`` (munet or torch) on its tensors ``a`` and ``b``."""
    if lib is munet:
        threshold_backward = lambda: apply(threshold_backward_op, a, b, threshold=0.0)  # noqa: E731
    else:
        threshold_backward = lambda: torch.ops.aten.threshold_backward(a, b, 0.0)  # noqa: E731
    return [
        ("add", lambda: a + b),
        ("mul scalar", lambda: a * 2.0),
        ("exp", lambda: a.exp()),
        ("sin", lambda: a.sin()),
        ("sigmoid", lambda: a.sigmoid()),
        ("abs", lambda: a.abs()),
        ("relu", lambda: lib.relu(a)),
        ("maximum", lambda: lib.maximum(a, b)),
        ("clamp", lambda: a.clamp(-0.5, 0.5)),
        ("where", lambda: lib.where(a > 0, a, b)),
        ("lt", lambda: a < b),
        ("pow", lambda: b.pow(a)),
        ("erf", lambda: a.erf()),
        ("floor", lambda: a.floor()),
        ("remainder", lambda: a.remainder(b)),
        ("isnan", lambda: a.isnan()),
        ("leaky_relu", lambda: lib.nn.functional.leaky_relu(a)),
        ("threshold_backward", threshold_backward),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="default,1", help="comma-separated: 'default' or a thread count")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    defaults = munet.get_num_threads(), torch.get_num_threads()
    load = os.getloadavg()
    print(f"# {time.strftime('%Y-%m-%d %H:%M %Z')} | {os.cpu_count()} cores | load {load[0]:.1f} | {args.clock} clock")
    rng = np.random.default_rng(0)
    for item in args.threads.split(","):
        threads = defaults if item == "default" else (int(item), int(item))
        munet.set_num_threads(threads[0])
        torch.set_num_threads(threads[1])
        print(f"\n**threads: munet {threads[0]}, torch {threads[1]}** ({item})\n")
        print("| elements | op | MuNet (us) | PyTorch (us) | ratio |\n|---|---|---|---|---|")
        for n, repeat in ((4, 2000), (1 << 14, 200), (1 << 20, 10)):
            x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32) + 3
            ours = cases(munet, munet.tensor(x), munet.tensor(y))
            theirs = cases(torch, torch.tensor(x), torch.tensor(y))
            for (name, m_fn), (_, t_fn) in zip(ours, theirs):
                m, t = median_us(m_fn, repeat, clock), median_us(t_fn, repeat, clock)
                print(f"| {n} | {name} | {m:.1f} | {t:.1f} | {m / t:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
