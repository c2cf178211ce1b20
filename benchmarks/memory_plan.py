"""What memory planning buys: the compiled MLP AdamW step with and without the arena.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/memory_plan.py [--steps 20] [--rounds 2]

Runs the MLP 784-1024-1024-10 step (batch 256, cross-entropy, AdamW) compiled with fusion off
and on, each with memory planning on and off (``Executable(plan_memory=False)``), in
alternating rounds so machine load hits every variant alike. Prints the median ms/step per
variant and the plan's arena size, naive size and number of in-place state updates.
"""

from __future__ import annotations

import argparse
import statistics
import time

import munet
import munet.compiler.compiled as compiled_module
import munet.nn.functional as F
from munet import nn
from munet.compiler.executable import Executable


def step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def variant(fuse: bool, plan: bool, x, y):
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = munet.optim.AdamW(model.parameters(), lr=1e-3)
    compiled_module.Executable = lambda graph, device, **kw: Executable(graph, device, **{**kw, "plan_memory": plan})
    try:
        fn = munet.compile(step, fuse=fuse)
        for _ in range(3):
            fn(model, opt, x, y)
    finally:
        compiled_module.Executable = Executable
    return fn, (model, opt, x, y)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    munet.manual_seed(1)
    x, y = munet.randn(256, 784), munet.randint(0, 10, (256,))
    variants = {(fuse, plan): variant(fuse, plan, x, y) for fuse in (False, True) for plan in (False, True)}
    samples = {key: [] for key in variants}
    for _ in range(args.rounds):
        for key, (fn, inputs) in variants.items():
            for _ in range(args.steps // args.rounds):
                start = time.perf_counter()
                fn(*inputs).item()
                samples[key].append((time.perf_counter() - start) * 1e3)
    for (fuse, plan), (fn, _) in variants.items():
        s = fn.stats()
        memory = s["memory"] or {}
        print(
            f"fuse={fuse!s:5} plan={plan!s:5} {statistics.median(samples[fuse, plan]):8.1f} ms/step"
            f"  arena={s['arena_bytes']} naive={memory.get('naive_bytes')} inplace={memory.get('inplace_updates')}"
        )


if __name__ == "__main__":
    main()
