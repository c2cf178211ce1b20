"""The cost of the vulkan backend's device-side index checks (backends/vulkan/device_asserts.py).

Each case runs with the checks and without them, alternating for ``--repeats`` rounds in one
process, so machine load affects both alike; minima (the least disturbed) and medians are
reported. "Without" patches the indexing kernels back to what they were before the checks
(an out-of-range index skipped silently: the same compare, no fault record bound or read back),
so the difference is what the checks add. "bound" binds the fault record to the unchecked
kernels (never written): what binding it costs by itself. Cases:

- ``gather``/``index_select``/``scatter_add``/``x[idx]`` on 1M float32 elements with 1M indices,
  ``--calls`` ops then one ``synchronize()`` (the kernels' cost);
- ``gather 1M + sync``: one op, then ``synchronize()`` (adds the fault record's copy-back);
- ``gather 1K + .item()``: a small op and a host read (fixed costs dominate).

Usage:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/vulkan_index_checks.py [--device vulkan:0] [--repeats 9]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics

import numpy as np
from vulkan_f16 import seconds

import munet


@contextlib.contextmanager
def unchecked(bind_record: bool = False):
    """The indexing kernels as before the checks: out-of-range indices skipped, nothing recorded
    (``bind_record``: the fault record is bound all the same, and never written)."""
    from munet.backends.vulkan import kernels_indexing  # after the device exists (import order)

    check_index, launch = kernels_indexing.check_index, kernels_indexing.launch

    def silent(rt, p, value, size, caller, dim, given=None):
        return f"({value} < 0 || u32({value}) >= {size})"

    def launch_unchecked(*args, checked=False, **kwargs):
        return launch(*args, checked=bind_record and checked, **kwargs)

    kernels_indexing.check_index, kernels_indexing.launch = silent, launch_unchecked
    try:
        yield
    finally:
        kernels_indexing.check_index, kernels_indexing.launch = check_index, launch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="vulkan:0")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    dev, n = args.device, 1 << 20
    rng = np.random.default_rng(0)
    x = munet.tensor(rng.standard_normal(n).astype(np.float32)).to(dev)
    idx = munet.tensor(rng.integers(0, n, n)).to(dev)
    small = idx[:1024].clone()
    sync = munet.vulkan.synchronize
    cases = {
        "gather 1M": (lambda: x.gather(0, idx), args.calls),
        "index_select 1M": (lambda: x.index_select(0, idx), args.calls),
        "scatter_add 1M": (lambda: x.scatter_add(0, idx, x), args.calls),
        "x[idx] 1M": (lambda: x[idx], args.calls),
        "gather 1M + sync": (lambda: (x.gather(0, idx), sync()), 20),
        "gather 1K + .item()": (lambda: x.gather(0, small)[0].item(), 20),
    }
    modes = {"checked": contextlib.nullcontext, "unchecked": unchecked, "bound": lambda: unchecked(True)}
    times = {(name, mode): [] for name in cases for mode in modes}
    for _ in range(args.repeats):
        for name, (fn, calls) in cases.items():
            for mode, context in modes.items():
                with context():
                    times[name, mode].append(seconds(fn, sync, calls))
    print(f"{args.device}, {args.repeats} repeats, ms per op")
    print(
        "| case | " + " | ".join(f"{m}, min" for m in modes) + " | " + " | ".join(f"{m}, median" for m in modes) + " |"
    )
    print("|---" * (1 + 2 * len(modes)) + "|")
    for name in cases:
        runs = [times[name, m] for m in modes]
        mins = " | ".join(f"{min(r) * 1e3:.3f}" for r in runs)
        medians = " | ".join(f"{statistics.median(r) * 1e3:.3f}" for r in runs)
        print(f"| {name} | {mins} | {medians} |")


if __name__ == "__main__":
    main()
