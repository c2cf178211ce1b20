"""The cost of the vulkan backend's device-side index checks (backends/vulkan/device_asserts.py).

The checks cannot be switched off, so the comparison is between two checkouts: run this script
once with each on ``PYTHONPATH`` (alternating, a few times, for a loaded machine) and compare the
minima (the least disturbed by other load) and medians. Cases:

- ``gather``/``index_select``/``scatter_add``/``x[idx]`` on 1M float32 elements with 1M indices,
  ``--calls`` ops then one ``synchronize()`` (the kernels' cost: a compare per index);
- ``gather 1M + sync``: one op, then ``synchronize()`` (adds the fault record's readback);
- ``gather 1K + .item()``: a small op and a host read (the readback's fixed cost dominates).

Usage (from a checkout; OTHER is another checkout, e.g. main):

    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/vulkan_index_checks.py [--device vulkan:0]
    PYTHONPATH=OTHER OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/vulkan_index_checks.py
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from vulkan_f16 import seconds

import munet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="vulkan:0")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    dev, n = args.device, 1 << 20
    rng = np.random.default_rng(0)
    x = munet.tensor(rng.standard_normal(n).astype(np.float32)).to(dev)
    idx = munet.tensor(rng.integers(0, n, n)).to(dev)
    small = idx[:1024].clone()
    sync = munet.vulkan.synchronize

    def nothing():
        pass

    cases = {
        "gather 1M": (lambda: x.gather(0, idx), nothing, args.calls),
        "index_select 1M": (lambda: x.index_select(0, idx), nothing, args.calls),
        "scatter_add 1M": (lambda: x.scatter_add(0, idx, x), nothing, args.calls),
        "x[idx] 1M": (lambda: x[idx], nothing, args.calls),
        "gather 1M + sync": (lambda: x.gather(0, idx), sync, 1),
        "gather 1K + .item()": (lambda: x.gather(0, small)[0].item(), nothing, 1),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, (fn, after, calls) in cases.items():

            def step(fn=fn, after=after):
                fn()
                after()

            times[name].append(seconds(step, sync, calls * (20 if calls == 1 else 1)))
    print(f"munet from {munet.__file__}, {args.repeats} repeats")
    print("| case | ms per op, min | median |\n|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {min(values) * 1e3:.3f} | {statistics.median(values) * 1e3:.3f} |")


if __name__ == "__main__":
    main()
