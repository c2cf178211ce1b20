"""The float32 erf's cost per element: eager ``erf`` and ``gelu`` and a compiled GELU forward and backward.

Times, in nanoseconds per element of a float32 tensor of ``--elements`` (default 2^21, the GPT
benchmark's hidden layer: batch 16 x context 128 x 1024): eager ``x.erf()`` (the C formula kernel),
eager ``F.gelu(x)``, ``munet.compile``'d ``F.gelu(x)`` (one fused kernel) and a compiled GELU's
backward (``munet.compile``'d module, ``loss.backward()``: GELU's forward stores ``1 + erf``, its
backward kernel reads it). Median of ``--repeat`` calls after 3 warm-up calls, at each thread count of
``--threads``; ``--clock cpu`` times process CPU time. To compare two trees, run the script under each
(``PYTHONPATH`` choosing the tree), alternating. Usage:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/erf_gelu.py [--threads 1,default] [--clock cpu] [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import munet
import munet.nn.functional as F
from munet import nn


class _Gelu(nn.Module):
    def forward(self, x):
        return F.gelu(x)


def cases(x):
    compiled_gelu = munet.compile(lambda z: F.gelu(z))
    module = munet.compile(_Gelu())
    leaf = x.detach().requires_grad_(True)

    def forward_backward():
        leaf.grad = None
        module(leaf).sum().backward()

    return [
        ("eager erf", lambda: x.erf()),
        ("eager gelu", lambda: F.gelu(x)),
        ("compiled gelu", lambda: compiled_gelu(x)),
        ("compiled gelu forward + backward", forward_backward),
    ]


def median_seconds(fn, repeat: int, clock) -> float:
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeat):
        start = clock()
        fn()
        samples.append(clock() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,default", help="comma-separated: 'default' or a thread count")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--elements", type=int, default=1 << 21)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    default = munet.get_num_threads()
    load = os.getloadavg()[0]
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} | {os.cpu_count()} cores | load {load:.1f} | {args.clock}"
    )
    x = munet.tensor(np.random.default_rng(0).standard_normal(args.elements).astype(np.float32) * 2)
    for item in args.threads.split(","):
        threads = default if item == "default" else int(item)
        munet.set_num_threads(threads)
        for name, fn in cases(x):
            seconds = median_seconds(fn, args.repeat, clock)
            print(f"threads {threads} | {name} | {seconds * 1e9 / args.elements:.2f} ns/element", flush=True)


if __name__ == "__main__":
    main()
