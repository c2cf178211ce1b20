"""Eager-mode cost: per-op overhead on small tensors and the conv layers of an MNIST CNN.

Runs MuNet and PyTorch (CPU) side by side in one process and prints the median time per
call and the ratio MuNet / PyTorch, at each thread count of ``--threads`` in turn (default:
each library's default thread count, then one thread). Usage:

    .venv/bin/python benchmarks/eager_overhead.py [--repeat 2000] [--threads default,1]

``default`` leaves both libraries at the count they start with (PyTorch: one per core;
NumPy's OpenBLAS: one per core unless ``OPENBLAS_NUM_THREADS`` is set); a number sets both
(``torch.set_num_threads`` and ``munet.set_num_threads``).

Small-op figures are dispatch overhead (4x4 inputs); the conv figures are forward+backward
of conv(1->32, 3x3) on 64x1x28x28 and conv(32->64, 3x3) on 64x32x26x26.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import torch

import munet
import munet.nn.functional as MF


def median_us(fn, repeat: int, warmup: int = 20) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    batch = max(1, repeat // 50)
    for _ in range(50):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - start) / batch * 1e6)
    return statistics.median(samples)


def small_op_cases():
    a = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    ma, mb = munet.tensor(a), munet.tensor(a.T.copy())
    ta, tb = torch.tensor(a), torch.tensor(a.T.copy())
    mg = munet.tensor(a, requires_grad=True)
    tg = torch.tensor(a, requires_grad=True)
    return [
        ("add", lambda: ma + mb, lambda: ta + tb),
        ("mul scalar", lambda: ma * 2.0, lambda: ta * 2.0),
        ("exp", lambda: ma.exp(), lambda: ta.exp()),
        ("sum(dim=1)", lambda: ma.sum(1), lambda: ta.sum(1)),
        ("matmul 4x4", lambda: ma @ mb, lambda: ta @ tb),
        ("relu", lambda: MF.relu(ma), lambda: torch.relu(ta)),
        ("transpose view", lambda: ma.t(), lambda: ta.t()),
        ("slice view", lambda: ma[1:, ::2], lambda: ta[1:, ::2]),
        ("add_ in place", lambda: ma.add_(0.0), lambda: ta.add_(0.0)),
        ("mul with grad", lambda: mg * mb, lambda: tg * tb),
        ("fwd+bwd (x*x).sum()", lambda: (mg * mg).sum().backward(), lambda: (tg * tg).sum().backward()),
    ]


def conv_cases():
    rng = np.random.default_rng(0)
    cases = []
    for name, x_shape, w_shape in (
        ("conv 1->32 3x3, 64x28x28", (64, 1, 28, 28), (32, 1, 3, 3)),
        ("conv 32->64 3x3, 64x26x26", (64, 32, 26, 26), (64, 32, 3, 3)),
    ):
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32) * 0.1
        b = np.zeros(w_shape[0], np.float32)
        mx, mw, mb = (
            munet.tensor(x, requires_grad=True),
            munet.tensor(w, requires_grad=True),
            munet.tensor(b, requires_grad=True),
        )
        tx, tw, tb = (
            torch.tensor(x, requires_grad=True),
            torch.tensor(w, requires_grad=True),
            torch.tensor(b, requires_grad=True),
        )

        def m_step(mx=mx, mw=mw, mb=mb):
            MF.conv2d(mx, mw, mb).sum().backward()

        def t_step(tx=tx, tw=tw, tb=tb):
            torch.nn.functional.conv2d(tx, tw, tb).sum().backward()

        cases.append((name + " fwd+bwd", m_step, t_step))
    return cases


def thread_counts(spec: str) -> list:
    """``--threads`` as a list of ``(label, munet threads, torch threads)``."""
    defaults = munet.get_num_threads(), torch.get_num_threads()
    counts = []
    for item in spec.split(","):
        if item == "default":
            counts.append((f"default (munet {defaults[0]}, torch {defaults[1]})", *defaults))
        else:
            counts.append((f"{int(item)} thread(s)", int(item), int(item)))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--threads", default="default,1", help="comma-separated: 'default' or a thread count")
    args = parser.parse_args()
    load = os.getloadavg()
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M %Z')} | {platform.processor() or platform.machine()} | "
        f"{os.cpu_count()} cores | load {load[0]:.1f} | torch {torch.__version__} | numpy {np.__version__}"
    )
    for label, munet_threads, torch_threads in thread_counts(args.threads):
        munet.set_num_threads(munet_threads)
        torch.set_num_threads(torch_threads)
        print(f"\n## {label}\n")
        print("| case | MuNet (us) | PyTorch (us) | ratio |")
        print("|---|---|---|---|")
        for name, m_fn, t_fn in small_op_cases():
            m, t = median_us(m_fn, args.repeat), median_us(t_fn, args.repeat)
            print(f"| {name} | {m:.1f} | {t:.1f} | {m / t:.2f}x |", flush=True)
        for name, m_fn, t_fn in conv_cases():
            m, t = median_us(m_fn, 40, warmup=3), median_us(t_fn, 40, warmup=3)
            print(f"| {name} | {m / 1000:.2f} ms | {t / 1000:.2f} ms | {m / t:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
