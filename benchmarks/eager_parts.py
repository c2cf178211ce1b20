"""Where an eager training step's time goes: each part of the GPT step alone, MuNet beside PyTorch.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/eager_parts.py [--parts all] [--rounds 9]
        [--clock cpu|wall]

Each part of ``compare_pytorch.py``'s GPT step (batch 16, context 128, width 256, 4 heads) runs its
forward and its backward (``sum()`` of the output as the loss; ``adamw`` is ``optimizer.step()`` over
the GPT's parameters) in MuNet eager and PyTorch eager, written once for both libraries. Every round
runs each part once in each library back to back, so load drift on a shared machine hits both alike.
Printed per part: median ms per call, ``--clock cpu`` (the default: process CPU time, which leaves
out time spent descheduled but adds up all threads) or ``wall``, and MuNet / PyTorch. Both libraries
run ``OPENBLAS_NUM_THREADS`` threads (one unless set).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as TF
from compare_pytorch import GPT, build

import munet
import munet.nn.functional as MF

B, T, C, H = GPT["batch"], GPT["context"], GPT["width"], GPT["heads"]


_LEAVES: list = []  # every part's leaves: their gradients are dropped before each call, as zero_grad does


def _leaf(lib, array):
    leaf = lib.tensor(array).requires_grad_(True)
    _LEAVES.append(leaf)
    return leaf


def _backward(out):
    out.sum().backward()


def part_layer_norm(lib, functional, rng):
    x, w, b = (_leaf(lib, rng.standard_normal(s, np.float32)) for s in ((B, T, C), (C,), (C,)))
    return lambda: _backward(functional.layer_norm(x, (C,), w, b))


def part_linear_qkv(lib, functional, rng):
    x = _leaf(lib, rng.standard_normal((B, T, C), np.float32))
    w, b = _leaf(lib, rng.standard_normal((3 * C, C), np.float32) * 0.05), _leaf(lib, np.zeros(3 * C, np.float32))
    return lambda: _backward(functional.linear(x, w, b))


def part_linear_fc(lib, functional, rng):
    x = _leaf(lib, rng.standard_normal((B, T, C), np.float32))
    w, b = _leaf(lib, rng.standard_normal((4 * C, C), np.float32) * 0.05), _leaf(lib, np.zeros(4 * C, np.float32))
    return lambda: _backward(functional.linear(x, w, b))


def part_gelu(lib, functional, rng):
    x = _leaf(lib, rng.standard_normal((B, T, 4 * C), np.float32))
    return lambda: _backward(functional.gelu(x))


def part_attention(lib, functional, rng):
    """The block's attention between its two linears: split, head views, causal SDPA, merge."""
    qkv = _leaf(lib, rng.standard_normal((B, T, 3 * C), np.float32))

    def run():
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (z.reshape(B, T, H, C // H).transpose(1, 2) for z in (q, k, v))
        y = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        _backward(y.transpose(1, 2).reshape(B, T, C))

    return run


def part_sdpa(lib, functional, rng):
    q, k, v = (_leaf(lib, rng.standard_normal((B, H, T, C // H), np.float32)) for _ in range(3))
    return lambda: _backward(functional.scaled_dot_product_attention(q, k, v, is_causal=True))


def part_residual(lib, functional, rng):
    x, y = (_leaf(lib, rng.standard_normal((B, T, C), np.float32)) for _ in range(2))
    return lambda: _backward(x + y)


def part_embedding(lib, functional, rng):
    tok = _leaf(lib, rng.standard_normal((GPT["vocab"], C), np.float32))
    pos = _leaf(lib, rng.standard_normal((GPT["context"], C), np.float32))
    idx = lib.tensor(rng.integers(0, GPT["vocab"], (B, T)))
    return lambda: _backward(functional.embedding(idx, tok) + pos[:T])


def part_cross_entropy(lib, functional, rng):
    logits = _leaf(lib, rng.standard_normal((B * T, GPT["vocab"]), np.float32))
    target = lib.tensor(rng.integers(0, GPT["vocab"], B * T))
    return lambda: functional.cross_entropy(logits, target).backward()


def part_adamw(lib, functional, rng):
    model, opt, _, _ = build("gpt", "munet" if lib is munet else "torch")
    for p in model.parameters():
        p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
    return opt.step


def part_zero_grad(lib, functional, rng):
    model, opt, _, _ = build("gpt", "munet" if lib is munet else "torch")

    def run():
        for p in model.parameters():
            p.grad = lib.tensor(np.ones(tuple(p.shape), np.float32))
        opt.zero_grad()

    return run


PARTS = {name[5:]: fn for name, fn in globals().items() if name.startswith("part_")}
LIBS = {"munet": (munet, MF), "torch": (torch, TF)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="all", help=f"comma-separated, or all: {', '.join(PARTS)}")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args()
    names = list(PARTS) if args.parts == "all" else [p.strip() for p in args.parts.split(",")]
    unknown = sorted(set(names) - set(PARTS))
    if unknown:
        parser.error(f"--parts: unknown {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    threads = int(os.environ["OPENBLAS_NUM_THREADS"])
    torch.set_num_threads(threads)
    munet.set_num_threads(threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    load = os.getloadavg()
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')} GPT parts, forward + backward, {threads} thread(s), "
        f"{args.clock} clock, median of {args.rounds} interleaved rounds, load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}"
    )
    print(f"  {'part':16s} {'munet ms':>9s} {'torch ms':>9s} {'ratio':>6s}")
    for name in names:
        runs = {lib: PARTS[name](*LIBS[lib], np.random.default_rng(0)) for lib in LIBS}
        for _ in range(args.warmup):
            for run in runs.values():
                run()
        times = {lib: [] for lib in runs}
        for r in range(args.rounds):
            for lib in list(runs)[r % 2 :] + list(runs)[: r % 2]:
                for leaf in _LEAVES:
                    leaf.grad = None
                start = clock()
                runs[lib]()
                times[lib].append((clock() - start) * 1e3)
        m, t = statistics.median(times["munet"]), statistics.median(times["torch"])
        print(f"  {name:16s} {m:9.2f} {t:9.2f} {m / t:5.2f}x", flush=True)


if __name__ == "__main__":
    main()
