"""What a new batch size costs a compiled training step, with and without ``dynamic=True``.

Run: OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/compile_dynamic.py [mlp|cnn|gpt ...] [--module] [--only batch|length]

``--module``: the compiled module instead, ``munet.compile(model)`` with the loss, ``loss.backward()``
and the optimizer step outside (a joint forward/backward program), ``dynamic=False`` and ``None``.

For each workload of ``compare_pytorch.py`` and each mode, in a fresh kernel cache directory:
two steps at the workload's batch size, then two steps at each of three new batch sizes (for the
GPT also three new sequence lengths, a run of their own), and steady steps at the full batch.
Prints the seconds of each new size's first step (trace + plan + C compiles + the step itself)
and of its second (a replay: the difference is what the new size cost), the first step's trace
and lowering milliseconds (``stats()["trace_ms"]``, ``["compile_ms"]``), how many C
compilations it ran ("cc"), "R" where the new size reused a cached program, how many
specializations did (``stats()["reused"]``, "-" for a MuNet without it), and the steady ms/step at the full batch
(median of 10) and at the last new size (median of 5: a reused program's size-generic kernels), so a
size-generic kernel's cost in the steady state shows.
"""

from __future__ import annotations

import argparse
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

# the new sizes of each run: the last partial batch of an epoch, then two more
NEW_BATCHES = {"mlp": (100, 90, 60), "cnn": (40, 30, 20), "gpt": (10, 12, 6)}
NEW_LENGTHS = {"gpt": (96, 112, 80)}  # sequence lengths (the full one is 128)


def batch_of(args, n):
    x, y = args
    if x.ndim == 2 and y.ndim == 1 and y.shape[0] != x.shape[0]:  # gpt: tokens (B, T), targets (B*T,)
        t = x.shape[1]
        return x[:n], y[: n * t]
    return x[:n], y[:n]


def length_of(args, t):
    """The tokens and targets of a gpt batch cut to sequence length ``t``."""
    x, y = args
    b, full = x.shape
    return x[:, :t].contiguous(), y.reshape(b, full)[:, :t].reshape(-1).contiguous()


def run(name: str, dynamic, resize, sizes, module: bool = False) -> tuple[list, float, float, dict]:
    """``([(seconds of the first step, of the second, C compiles, "R" if it reused a program, the first
    step's trace ms, its lowering ms) at each new size], steady ms/step at the full batch, at the last
    new size, stats())``; ``module``: the compiled module, the step around it eager."""
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
            if module:
                compiled_model = munet.compile(model, dynamic=dynamic)

                def step(x, y):
                    return cp.munet_step(compiled_model, opt, x, y)

                step.stats = compiled_model.stats
            else:
                step = munet.compile(lambda x, y: cp.munet_step(model, opt, x, y), dynamic=dynamic)
            for _ in range(2):
                step(*args)
            firsts, reuses = [], 0
            for n in sizes:
                new = resize(args, n)
                before, times_before = len(compiles), step.stats()
                start = time.perf_counter()
                step(*new)
                first = time.perf_counter() - start
                trace_ms = step.stats()["trace_ms"] - times_before["trace_ms"]
                lower_ms = step.stats()["compile_ms"] - times_before["compile_ms"]
                compiled = len(compiles) - before
                start = time.perf_counter()
                step(*new)  # the same size again: a replay, so first - again is what the new size cost
                reused = step.stats().get("reused", 0) > reuses
                reuses = step.stats().get("reused", 0)
                again = time.perf_counter() - start
                firsts.append((first, again, compiled, "R" if reused else "", trace_ms, lower_ms))
            last = []
            for _ in range(5):
                start = time.perf_counter()
                step(*new)
                last.append((time.perf_counter() - start) * 1e3)
            times = []
            for _ in range(10):
                start = time.perf_counter()
                step(*args)
                times.append((time.perf_counter() - start) * 1e3)
            return firsts, statistics.median(times), statistics.median(last), step.stats()
    finally:
        build._compile = original
        os.environ.pop("MUNET_CACHE_DIR", None)


def main(names, module: bool = False, only=None):
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  cores={os.cpu_count()}  load={os.getloadavg()}")
    cases = [(name, "batch", batch_of, NEW_BATCHES[name]) for name in names]
    cases += [(name, "length", length_of, NEW_LENGTHS[name]) for name in names if name in NEW_LENGTHS]
    for name, what, resize, sizes in cases:
        if only is not None and what != only:
            continue
        for dynamic in (False, None) if module else (False, True):
            firsts, steady, steady_last, stats = run(name, dynamic, resize, sizes, module)
            steps = ", ".join(
                f"{what} {n}: {first:5.2f} s (then {again:4.2f} s; trace {trace:.0f} ms, lower {lower:.0f} ms) {cc:2d} cc{r}"
                for n, (first, again, cc, r, trace, lower) in zip(sizes, firsts)
            )
            print(
                f"{name:3}{' module' if module else ''} dynamic={dynamic!s:5}  first step at {steps};  "
                f"reused {stats.get('reused', '-')};  steady full batch {steady:7.1f} ms/step, "
                f"at {what} {sizes[-1]} {steady_last:7.1f} ms/step"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", help=f"of {', '.join(NEW_BATCHES)} (default: all)")
    parser.add_argument("--module", action="store_true", help="compile the module, the step around it eager")
    parser.add_argument("--only", choices=("batch", "length"), help="only new batch sizes, or only new lengths")
    options = parser.parse_args()
    unknown = [w for w in options.workloads if w not in NEW_BATCHES]
    if unknown:
        parser.error(f"unknown workload {unknown[0]!r} (expected one of {', '.join(NEW_BATCHES)})")
    main(options.workloads or list(NEW_BATCHES), options.module, options.only)
