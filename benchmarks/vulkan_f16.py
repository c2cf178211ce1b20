"""float16 against float32 on the vulkan backend, side by side in one process.

Each case runs the same work in float32 and in float16 on the vulkan device (and, for context,
on PyTorch's CPU), alternating the two dtypes for ``--repeats`` rounds and reporting medians,
so machine load affects both alike. float16 storage halves memory traffic; compute stays f32
(kernels load f16, compute in f32, round once when storing). Every vulkan figure includes a
``synchronize()``.

Usage:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/vulkan_f16.py [--device vulkan:0] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import munet
import munet.nn.functional as F

try:
    import torch
except ImportError:  # the PyTorch column is left out
    torch = None


def seconds(fn, sync, calls: int) -> float:
    fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls


def cases(device: str, dtype):
    rng = np.random.default_rng(0)

    def t(*shape):
        return munet.tensor(rng.standard_normal(shape).astype(np.float32)).to(device).to(dtype)

    a, b = t(1 << 22), t(1 << 22)
    m1, m2 = t(512, 512), t(512, 512)
    rows = t(4096, 1024)
    x, w = t(8, 32, 32, 32), t(32, 32, 3, 3)
    return {
        "add 4M": lambda: a + b,
        "gelu 4M": lambda: F.gelu(a),
        "sum 4M": lambda: a.sum(),
        "softmax 4096x1024": lambda: F.softmax(rows, -1),
        "matmul 512": lambda: m1 @ m2,
        "conv2d 8x32x32x32 k3": lambda: F.conv2d(x, w, padding=1),
    }


def torch_cases(dtype):
    rng = np.random.default_rng(0)

    def t(*shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)

    a, b = t(1 << 22), t(1 << 22)
    m1, m2 = t(512, 512), t(512, 512)
    rows = t(4096, 1024)
    x, w = t(8, 32, 32, 32), t(32, 32, 3, 3)
    tf = torch.nn.functional
    return {
        "add 4M": lambda: a + b,
        "gelu 4M": lambda: tf.gelu(a),
        "sum 4M": lambda: a.sum(),
        "softmax 4096x1024": lambda: tf.softmax(rows, -1),
        "matmul 512": lambda: m1 @ m2,
        "conv2d 8x32x32x32 k3": lambda: tf.conv2d(x, w, padding=1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="vulkan:0")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    sync = munet.vulkan.synchronize
    print(f"device: {args.device} ({munet.vulkan.get_device_name(munet.device(args.device).index or 0)})")
    runs = {
        "vulkan f32": (cases(args.device, munet.float32), sync),
        "vulkan f16": (cases(args.device, munet.float16), sync),
    }
    if torch is not None:
        runs["torch f32"] = (torch_cases(torch.float32), lambda: None)
        runs["torch f16"] = (torch_cases(torch.float16), lambda: None)
    times: dict = {(name, case): [] for name in runs for case in runs[name][0]}
    for _ in range(args.repeats):
        for case in runs["vulkan f32"][0]:
            for name, (fns, sync_fn) in runs.items():
                times[(name, case)].append(seconds(fns[case], sync_fn, args.calls))
    header = "case".ljust(24) + "".join(f"{name:>13}" for name in runs) + "  f16/f32 vulkan  f16/f32 torch"
    print(header + "\n" + "-" * len(header))
    for case in runs["vulkan f32"][0]:
        med = {name: statistics.median(times[(name, case)]) * 1e3 for name in runs}
        line = case.ljust(24) + "".join(f"{med[name]:>11.2f}ms" for name in runs)
        line += f"  {med['vulkan f16'] / med['vulkan f32']:>14.2f}"
        if torch is not None:
            line += f"  {med['torch f16'] / med['torch f32']:>13.2f}"
        print(line)


if __name__ == "__main__":
    main()
