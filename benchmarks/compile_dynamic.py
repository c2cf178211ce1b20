"""What a new batch size costs a compiled training step, with and without ``dynamic=True``.

Run: OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/compile_dynamic.py [mlp|cnn|gpt ...]

For each workload of ``compare_pytorch.py`` and each mode, in a fresh kernel cache directory:
two steps at the workload's batch size, then the first step at a smaller batch (the last
partial batch of an epoch) and steady steps at both sizes. Prints the seconds of that first
smaller step (trace + plan + C compiles), how many C compilations it ran, and the steady
ms/step at the full batch (median of 10), so a slab kernel's cost in the steady state shows.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare_pytorch as cp  # noqa: E402

import munet  # noqa: E402
from munet.compiler.codegen import build  # noqa: E402

SMALLER = {"mlp": 100, "cnn": 40, "gpt": 10}


def batch_of(args, n):
    x, y = args
    if x.ndim == 2 and y.ndim == 1 and y.shape[0] != x.shape[0]:  # gpt: tokens (B, T), targets (B*T,)
        t = x.shape[1]
        return x[:n], y[: n * t]
    return x[:n], y[:n]


def run(name: str, dynamic: bool) -> tuple[float, int, float]:
    compiles = []
    original = build._compile

    def counting(exe, flags, source, *rest):
        compiles.append(source)
        return original(exe, flags, source, *rest)

    build._compile = counting
    try:
        with tempfile.TemporaryDirectory() as cache:
            os.environ["MUNET_CACHE_DIR"] = cache
            model, opt, *args = cp.build(name, "munet")
            step = munet.compile(lambda x, y: cp.munet_step(model, opt, x, y), dynamic=dynamic)
            for _ in range(2):
                step(*args)
            small = batch_of(args, SMALLER[name])
            before = len(compiles)
            start = time.perf_counter()
            step(*small)
            first = time.perf_counter() - start
            new_compiles = len(compiles) - before
            step(*small)
            times = []
            for _ in range(10):
                start = time.perf_counter()
                step(*args)
                times.append((time.perf_counter() - start) * 1e3)
            return first, new_compiles, statistics.median(times)
    finally:
        build._compile = original
        os.environ.pop("MUNET_CACHE_DIR", None)


def main(names):
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  cores={os.cpu_count()}")
    for name in names:
        for dynamic in (False, True):
            first, compiles, steady = run(name, dynamic)
            print(
                f"{name} dynamic={dynamic!s:5}  first step at batch {SMALLER[name]}: {first:6.2f} s, "
                f"{compiles:3d} C compiles;  steady full batch {steady:7.1f} ms/step"
            )


if __name__ == "__main__":
    main(sys.argv[1:] or ["mlp", "cnn", "gpt"])
