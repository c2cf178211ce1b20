"""Eager elementwise kernels: CPU time per call of ops rendered from scalar formulas.

Median of 15 batches, in microseconds of process CPU time (steadier than wall time on a shared
machine), for float32 tensors of 4 elements (dispatch overhead) and of 2**20 (kernel throughput).
Usage (one BLAS thread):

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/elementwise_ops.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import statistics
import time

import numpy as np

import munet
from munet.ops._registry import apply
from munet.ops.activation import threshold_backward_op


def median_us(fn, repeat: int) -> float:
    for _ in range(10):
        fn()
    samples = []
    for _ in range(15):
        start = time.process_time()
        for _ in range(repeat):
            fn()
        samples.append((time.process_time() - start) / repeat * 1e6)
    return statistics.median(samples)


def cases(a, b):
    return [
        ("add", lambda: a + b),
        ("mul scalar", lambda: a * 2.0),
        ("exp", lambda: a.exp()),
        ("sin", lambda: a.sin()),
        ("sigmoid", lambda: a.sigmoid()),
        ("abs", lambda: a.abs()),
        ("relu", lambda: munet.relu(a)),
        ("maximum", lambda: munet.maximum(a, b)),
        ("clamp", lambda: a.clamp(-0.5, 0.5)),
        ("where", lambda: munet.where(a > 0, a, b)),
        ("lt", lambda: a < b),
        ("pow", lambda: b.pow(a)),
        ("erf", lambda: a.erf()),
        ("floor", lambda: a.floor()),
        ("remainder", lambda: a.remainder(b)),
        ("isnan", lambda: a.isnan()),
        ("leaky_relu", lambda: munet.nn.functional.leaky_relu(a)),
        ("threshold_backward", lambda: apply(threshold_backward_op, a, b, threshold=0.0)),
    ]


def main() -> None:
    rng = np.random.default_rng(0)
    for n, repeat in ((4, 2000), (1 << 20, 10)):
        a = munet.tensor(rng.standard_normal(n).astype(np.float32))
        b = munet.tensor(rng.standard_normal(n).astype(np.float32) + 3)
        for name, fn in cases(a, b):
            print(f"n={n:>8} {name:20s} {median_us(fn, repeat):10.1f} us", flush=True)


if __name__ == "__main__":
    main()
