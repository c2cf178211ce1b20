"""Fourier transforms on the cpu: time per call of ``munet.fft`` and ``stft``, beside PyTorch.

Median of 15 batches, in microseconds, forward and forward+backward (a real loss of the result),
for float32 signals: a batch of 64 x 1024 (``rfft``, ``fft``, ``irfft``), a 256 x 256 image
(``rfft2``, ``fft2``) and an ``stft`` of 8 x 16000 samples (n_fft 512, hop 128, Hann window).
MuNet's kernels are NumPy's pocketfft; PyTorch's are its own (pocketfft or MKL). Both libraries run
in one process with one thread each by default. Usage:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/fft.py [--threads 1] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import munet


def median_us(fn, clock, repeat: int = 5) -> float:
    for _ in range(3):
        fn()
    samples = []
    for _ in range(15):
        start = clock()
        for _ in range(repeat):
            fn()
        samples.append((clock() - start) / repeat * 1e6)
    return statistics.median(samples)


def real_loss(lib, y):
    return (lib.view_as_real(y) if y.is_complex() else y).square().sum()


def cases(lib, signal, image, audio):
    window = lib.hann_window(512)
    half = lib.fft.rfft(signal)
    return [
        ("rfft 64x1024", lambda x: lib.fft.rfft(x), signal),
        ("fft 64x1024", lambda x: lib.fft.fft(x), signal),
        ("irfft 64x513", lambda x: lib.fft.irfft(x, n=1024), half),
        ("rfft2 256x256", lambda x: lib.fft.rfft2(x), image),
        ("fft2 256x256", lambda x: lib.fft.fft2(x), image),
        ("stft 8x16000", lambda x: lib.stft(x, 512, 128, window=window, return_complex=True), audio),
    ]


def timings(lib, fn, x, clock) -> tuple:
    """(forward, forward + backward) microseconds of ``fn`` on ``x``."""
    x = x.detach()
    leaf = x.clone().requires_grad_(True)

    def step():
        leaf.grad = None
        real_loss(lib, fn(leaf)).backward()

    return median_us(lambda: fn(x), clock), median_us(step, clock)


def run(lib, arrays, clock):
    inputs = [lib.tensor(a) for a in arrays]
    return {name: timings(lib, fn, x, clock) for name, fn, x in cases(lib, *inputs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    munet.set_num_threads(args.threads)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((64, 1024), (256, 256), (8, 16000))]
    mine, theirs = run(munet, arrays, clock), run(torch, arrays, clock)
    print(f"threads={args.threads} clock={args.clock}; microseconds per call (median of 15)")
    print(f"{'case':<16}{'munet fwd':>12}{'torch fwd':>12}{'munet f+b':>12}{'torch f+b':>12}")
    for name, (forward, both) in mine.items():
        t_forward, t_both = theirs[name]
        print(f"{name:<16}{forward:>12.0f}{t_forward:>12.0f}{both:>12.0f}{t_both:>12.0f}")


if __name__ == "__main__":
    main()
