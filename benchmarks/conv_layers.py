"""Single convolution layers on the CPU: MuNet's direct kernel, MuNet's column path, PyTorch.

Each case runs the three in turn, ``--repeat`` rounds, and prints the best time of each in ms of
the calling thread's CPU time (``time.thread_time``: on a shared machine it leaves out the time
the thread waited for a core; one thread, so it is also the whole cost). The column path is
MuNet's kernel with the direct kernel declining (as without a C compiler). Usage:

    PYTHONPATH=. .venv/bin/python benchmarks/conv_layers.py [--repeat 7]

Cases: ResNet-18's convolutions (batch 1 and 16) and the training CNN's 32->64 layer forward,
input gradient and weight gradient (``benchmarks/eager_overhead.py``'s shapes).
"""

from __future__ import annotations

import argparse
import os
import platform
import time

# isort: off
import munet  # before NumPy: OpenBLAS then reads munet's thread settings (munet/_threads.py)
import numpy as np

# isort: on
import torch

from munet.backends.cpu import direct_conv, kernels_conv

# (name, input shape, weight shape, stride, padding, which: forward / input / weight gradient)
CASES = [(f"resnet b{n} {c}->{o} {h}x{h} k{k} s{s}", (n, c, h, h), (o, c, k, k), s, p, "forward")
         for n in (1, 16)
         for c, o, h, k, s, p in [(3, 64, 224, 7, 2, 3), (64, 64, 56, 3, 1, 1), (64, 128, 56, 3, 2, 1),
                                  (64, 128, 56, 1, 2, 0), (128, 128, 28, 3, 1, 1), (128, 256, 28, 3, 2, 1),
                                  (256, 256, 14, 3, 1, 1), (256, 512, 14, 3, 2, 1), (512, 512, 7, 3, 1, 1)]]  # fmt: skip
CASES += [(f"cnn 32->64 26x26 {which}", (64, 32, 26, 26), (64, 32, 3, 3), 1, 0, which)
          for which in ("forward", "input grad", "weight grad")]  # fmt: skip


def munet_call(x, w, stride, padding, which):
    """The kernel call autograd makes for ``which`` (ops/conv.py's gradient rules)."""
    common = dict(dilation=(1, 1), groups=1, output_padding=(0, 0))
    pads = ((padding, padding), (padding, padding))
    if which == "forward":
        return lambda: kernels_conv.convolution_into(
            None, x, w, stride=(stride,) * 2, padding=pads, transposed=False, **common
        )
    size = [(n + 2 * padding - k) // stride + 1 for n, k in zip(x.shape[2:], w.shape[2:])]
    g = np.random.default_rng(1).standard_normal((x.shape[0], w.shape[0], *size)).astype(np.float32)
    if which == "input grad":
        return lambda: kernels_conv.convolution_into(None, g, w, stride=(1, 1), padding=pads, transposed=True, **common)
    xs, gs = x.transpose(1, 0, 2, 3), g.transpose(1, 0, 2, 3)
    return lambda: kernels_conv.convolution_into(None, xs, gs, stride=(1, 1), padding=pads, transposed=False, **common)


def torch_call(x, w, stride, padding, which):
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    if which == "forward":
        return lambda: torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding)
    tx.requires_grad_(which == "input grad")
    tw.requires_grad_(which == "weight grad")
    y = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding)
    g = torch.ones_like(y)
    target = tx if which == "input grad" else tw
    return lambda: torch.autograd.grad(y, target, g, retain_graph=True)


def _declined(*args, **kwargs):
    return None


def on_column_path(fn):
    """``fn`` with the direct kernels declining every call."""

    def run():
        originals = kernels_conv.direct_conv2d, kernels_conv.direct_weight_grad
        kernels_conv.direct_conv2d = kernels_conv.direct_weight_grad = _declined
        try:
            fn()
        finally:
            kernels_conv.direct_conv2d, kernels_conv.direct_weight_grad = originals

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    munet.set_num_threads(1)
    torch.set_num_threads(1)
    load = ",".join(f"{v:.1f}" for v in os.getloadavg())
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {platform.processor() or platform.machine()}  load={load}  {stamp}  one thread, best of {args.repeat}")
    print(f"# direct micro-kernel: {direct_conv.isa()}")
    print(f"{'case':40s} {'direct':>8s} {'columns':>8s} {'torch':>8s}  columns/direct  direct/torch")
    rng = np.random.default_rng(0)
    for name, shape, weight, stride, padding, which in CASES:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal(weight).astype(np.float32)
        mine, ref = munet_call(x, w, stride, padding, which), torch_call(x, w, stride, padding, which)
        best = [float("inf")] * 3
        for _ in range(args.repeat):
            for i, fn in enumerate((mine, on_column_path(mine), ref)):
                start = time.thread_time()
                fn()
                best[i] = min(best[i], (time.thread_time() - start) * 1e3)
        print(
            f"{name:40s} {best[0]:8.2f} {best[1]:8.2f} {best[2]:8.2f}  {best[1] / best[0]:14.2f}  {best[0] / best[2]:12.2f}"
        )


if __name__ == "__main__":
    main()
