"""ms/step of one MLP 784-1024-1024-10 AdamW training step (batch 256), eager vs munet.compile.

Run: OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/compile_step.py [--compare-fuse]
``--compare-fuse`` also times the compiled step with ``fuse=False`` (before/after fusion, same run).
Prints the median of 20 timed steps after 3 warm-up steps for each mode.
"""

from __future__ import annotations

import statistics
import sys
import time

import munet
import munet.nn.functional as F
from munet import nn


def make():
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    return model, munet.optim.AdamW(model.parameters(), lr=1e-3)


def step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def measure(fn, model, opt, x, y, warmup=3, steps=20) -> float:
    for _ in range(warmup):
        fn(model, opt, x, y)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn(model, opt, x, y)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    munet.manual_seed(1)
    x, y = munet.randn(256, 784), munet.randint(0, 10, (256,))
    eager = measure(step, *make(), x, y)
    if "--compare-fuse" in sys.argv:
        unfused = measure(munet.compile(step, fuse=False), *make(), x, y)
        print(f"compiled, fuse=False {unfused:8.2f} ms/step  ({eager / unfused:.2f}x)")
    compiled_step = munet.compile(step)
    compiled = measure(compiled_step, *make(), x, y)
    stats = compiled_step.stats()
    print(
        f"fused_groups={stats['fused_groups']} generated_code={stats['generated_code']} "
        f"kernel_cache_hits={stats['kernel_cache_hits']}"
    )
    print(f"eager    {eager:8.2f} ms/step")
    print(
        f"compiled {compiled:8.2f} ms/step  ({eager / compiled:.2f}x)  kernels={stats['kernels']} traces={stats['traces']}"
    )


if __name__ == "__main__":
    main()
