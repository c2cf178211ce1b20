"""What the guards on Python values (``munet/compiler/guards.py``) cost a compiled call.

Run: OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/compile_guards.py

Two compiled callables: ``lambda x: x * scale[0]`` (one guard, a list compared by value) and a
12-block ``Sequential`` of LayerNorm, Linear and Dropout under ``no_grad`` (parameters and
submodules by identity, ``eps``/``p``/``normalized_shape`` by value). Prints, per callable, the
number of guards, the microseconds one check of all of them takes, and the microseconds of a
whole call (best of 5 runs each, so the figures are the least disturbed ones).
"""

from __future__ import annotations

import time

import munet
from munet import nn


def best_us(fn, *args, calls: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.ln, self.fc, self.drop = nn.LayerNorm(width), nn.Linear(width, width), nn.Dropout(0.0)

    def forward(self, x):
        return x + self.drop(self.fc(self.ln(x)))


def report(name: str, compiled, x, calls: int) -> None:
    for _ in range(3):
        compiled(x)
    entry = compiled._last
    checks = best_us(entry.failed_guard, calls=calls * 10)
    call = best_us(compiled, x, calls=calls)
    print(f"{name}: {compiled.stats()['guards']} guards, check {checks:.2f} us, call {call:.1f} us")


def main() -> None:
    scale = [2.0]
    report("x * scale[0]", munet.compile(lambda x: x * scale[0]), munet.ones(3), calls=3000)
    munet.manual_seed(0)
    model = nn.Sequential(*[Block(32) for _ in range(12)]).eval()
    with munet.no_grad():
        report("12 blocks", munet.compile(model), munet.randn(2, 32), calls=300)


if __name__ == "__main__":
    main()
