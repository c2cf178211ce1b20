"""What a graph break costs a compiled training step (munet/compiler/breaks.py).

Run: OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/compile_breaks.py [mlp|cnn|gpt ...]

For each workload of ``compare_pytorch.py``: the eager step, the compiled step (one graph), and the
compiled step with ``loss.item()`` between the forward and ``backward()`` (two segments, run
segmented: the Python records each call, the compiled programs replay). Prints the median ms/step
of 10 steps after 3 warm-up steps, and the break's overhead over the one-graph step.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare_pytorch as cp  # noqa: E402

import munet  # noqa: E402
import munet.nn.functional as F  # noqa: E402


def _step_with_item(model, opt):
    log = []

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        log.append(loss.item())  # the break
        loss.backward()
        opt.step()
        return loss

    return step


def _median_ms(step, args, steps=10, warmup=3) -> float:
    for _ in range(warmup):
        step(*args)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step(*args)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def run(name: str) -> dict:
    out = {}
    for mode in ("eager", "compiled", "compiled with a break"):
        model, opt, *args = cp.build(name, "munet")
        if mode == "eager":
            step = lambda x, y, m=model, o=opt: cp.munet_step(m, o, x, y)  # noqa: E731
        elif mode == "compiled":
            step = munet.compile(lambda x, y, m=model, o=opt: cp.munet_step(m, o, x, y))
        else:
            step = munet.compile(_step_with_item(model, opt))
        out[mode] = _median_ms(step, args)
        if mode == "compiled with a break":
            assert step.stats()["graph_breaks"] == 1
    return out


def main(names):
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  cores={os.cpu_count()}")
    for name in names:
        ms = run(name)
        parts = ", ".join(f"{mode} {value:.1f} ms" for mode, value in ms.items())
        print(f"{name}: {parts}; break overhead {ms['compiled with a break'] / ms['compiled']:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:] or ["mlp", "cnn", "gpt"])
