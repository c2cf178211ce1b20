"""The CPU matmul kernel against NumPy's ``np.matmul`` and PyTorch, on the products of the MLP, CNN and GPT steps.

    OPENBLAS_NUM_THREADS=2 .venv/bin/python benchmarks/matmul_threads.py [--rounds 21]

At a thread budget above one, MuNet's kernel (``kernels_linalg.matmul_into``) runs a big enough
product as tasks on the OpenMP team (``backends/cpu/gemm_tasks.py``); ``np.matmul`` leaves it to
OpenBLAS's threads. Each round runs every product once in each of the three, back to back, into a
preallocated output (PyTorch allocates its own). Printed per product: median wall / process CPU ms.
Both libraries run ``OPENBLAS_NUM_THREADS`` threads (one unless set).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import time

import numpy as np
import torch

import munet
from munet.backends.cpu.kernels_linalg import matmul_into

# (batch, m, k, n, a stored transposed, b stored transposed): a linear layer's x @ W.T, its input and
# weight gradients, the CNN's first linear layer, attention's products over (batch, heads)
PRODUCTS = [
    ((), 256, 784, 1024, False, True),
    ((), 256, 1024, 1024, False, True),
    ((), 1024, 256, 784, True, False),
    ((), 2048, 256, 768, False, True),
    ((), 256, 2048, 1024, True, False),
    ((), 2048, 1024, 256, False, False),
    ((), 64, 9216, 128, False, True),
    ((), 128, 64, 9216, True, False),
    ((16, 4), 128, 64, 128, False, True),
    ((16, 4), 128, 128, 64, False, False),
]


def operand(rng, batch, rows, cols, transposed):
    if transposed:
        return np.swapaxes(rng.standard_normal((*batch, cols, rows), np.float32), -1, -2)
    return rng.standard_normal((*batch, rows, cols), np.float32)


def time_product(a, b, out, rounds: int) -> list:
    """``"wall / CPU"`` median ms of ``a @ b`` through np.matmul, MuNet's kernel and PyTorch, interleaved."""
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    runs = {
        "np": lambda: np.matmul(a, b, out=out),
        "munet": lambda: matmul_into(out, a, b),
        "torch": lambda: torch.matmul(ta, tb),
    }
    wall: dict = {name: [] for name in runs}
    cpu: dict = {name: [] for name in runs}
    for _ in range(3):
        for run in runs.values():
            run()
    for _ in range(rounds):
        for name, run in runs.items():
            c0, w0 = time.process_time(), time.perf_counter()
            run()
            wall[name].append((time.perf_counter() - w0) * 1e3)
            cpu[name].append((time.process_time() - c0) * 1e3)
    return [f"{statistics.median(wall[x]):6.2f} / {statistics.median(cpu[x]):6.2f}" for x in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    threads = int(os.environ["OPENBLAS_NUM_THREADS"])
    torch.set_num_threads(threads)
    munet.set_num_threads(threads)
    munet.randn(1 << 17).exp()  # a first generated kernel: OpenBLAS's jobs join the OpenMP team from here on
    rng = np.random.default_rng(0)
    load = os.getloadavg()
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')} {threads} thread(s), median of {args.rounds} rounds, "
        f"wall / CPU ms, load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}"
    )
    print(f"  {'(batch, m, k, n, a.T, b.T)':40s} {'np.matmul':>15s} {'munet kernel':>15s} {'torch':>15s}")
    for batch, m, k, n, ta, tb in PRODUCTS:
        a, b = operand(rng, batch, m, k, ta), operand(rng, batch, k, n, tb)
        cells = time_product(a, b, np.empty((*batch, m, n), np.float32), args.rounds)
        print(f"  {str((batch, m, k, n, ta, tb)):40s} " + " ".join(f"{c:>15s}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
