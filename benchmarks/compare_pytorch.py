"""One training step of MLP, CNN and GPT in MuNet eager, MuNet compiled, PyTorch eager and torch.compile.

Everything runs in one process. Without ``--threads`` each library runs at its default thread count
(one per core: what users run); ``--threads N`` gives both N (OPENBLAS_NUM_THREADS and
``munet.set_num_threads`` for MuNet, ``torch.set_num_threads`` for PyTorch). Prints ms/step (median
of the timed steps after warm-up), ratios against MuNet compiled (the default
``munet.compile``; "munet unfused" is ``munet.compile(fuse=False)``: memory plan, no fusion), and the *GEMM floor*: the
step's GEMMs (forward and backward, counted from the layer shapes below) timed one by one as
NumPy float32 matmuls at those shapes, i.e. what the step would cost if it did nothing but
its matrix products at NumPy's BLAS speed.

    .venv/bin/python benchmarks/compare_pytorch.py [--quick] [--threads 1]
        [--steps 20] [--warmup 5] [--only mlp,cnn,gpt] [--modes "munet eager,torch eager"]

torch.compile needs a working C++ compiler (inductor); when it fails, the error is printed
in its column instead of a time.
"""

from __future__ import annotations

import os
import sys

if "--threads" in sys.argv:  # before NumPy loads OpenBLAS
    os.environ.setdefault("OPENBLAS_NUM_THREADS", sys.argv[sys.argv.index("--threads") + 1])

import argparse
import platform
import statistics
import time

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import munet
import munet.nn.functional as MF
from munet import nn as mnn

# workloads -------------------------------------------------------------------------------------------
GPT = dict(layers=4, heads=4, width=256, context=128, vocab=65, batch=16)


def mlp(nn):
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def cnn(nn):
    return nn.Sequential(
        nn.Conv2d(1, 32, 3),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(9216, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def gpt(nn, functional):
    """A GPT block stack written once for both libraries (same names, same defaults)."""
    layers, heads, width, context, vocab = (GPT[k] for k in ("layers", "heads", "width", "context", "vocab"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
            self.gelu = nn.GELU()

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.reshape(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.out(self.gelu(self.fc(self.ln2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

        def forward(self, idx):
            x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x)).reshape(-1, vocab)

    return Model()


def data(lib, name):
    """Inputs and targets of one step (drawn in NumPy so both libraries see the same numbers)."""
    rng = np.random.default_rng(0)
    if name == "mlp":
        x, y = rng.standard_normal((256, 784), np.float32), rng.integers(0, 10, 256)
    elif name == "cnn":
        x, y = rng.standard_normal((64, 1, 28, 28), np.float32), rng.integers(0, 10, 64)
    else:
        b, t = GPT["batch"], GPT["context"]
        x, y = rng.integers(0, GPT["vocab"], (b, t)), rng.integers(0, GPT["vocab"], b * t)
    return lib.tensor(x), lib.tensor(y)


def gemms(name) -> list[tuple[int, int, int, int]]:
    """(batch, M, K, N) of every GEMM in one training step: forward, input grads, weight grads."""
    out = []

    def linear(rows, fan_in, fan_out, input_grad=True):
        out.append((1, rows, fan_in, fan_out))  # y = x W^T
        if input_grad:
            out.append((1, rows, fan_out, fan_in))  # dx = dy W
        out.append((1, fan_out, rows, fan_in))  # dW = dy^T x

    if name == "mlp":
        linear(256, 784, 1024, input_grad=False)
        linear(256, 1024, 1024)
        linear(256, 1024, 10)
    elif name == "cnn":  # convolutions as im2col GEMMs
        linear(64 * 26 * 26, 1 * 9, 32, input_grad=False)
        linear(64 * 24 * 24, 32 * 9, 64)
        linear(64, 9216, 128)
        linear(64, 128, 10)
    else:
        b, t, c, h = GPT["batch"], GPT["context"], GPT["width"], GPT["heads"]
        rows, d = b * t, c // h
        for _ in range(GPT["layers"]):
            linear(rows, c, 3 * c)
            linear(rows, c, c)
            linear(rows, c, 4 * c)
            linear(rows, 4 * c, c)
            out += [(b * h, t, d, t), (b * h, t, t, d)]  # q k^T, p v
            out += [(b * h, t, t, d), (b * h, d, t, t), (b * h, t, d, t), (b * h, t, t, d)]  # their grads
        linear(rows, c, GPT["vocab"])
    return out


def gemm_floor(name, repeat: int) -> tuple[float, float]:
    """(GFLOP of the step's GEMMs, ms to run them as NumPy float32 matmuls at their shapes)."""
    rng = np.random.default_rng(0)
    flops, ms = 0.0, 0.0
    for batch, m, k, n in gemms(name):
        lead = (batch,) if batch > 1 else ()
        a = rng.standard_normal((*lead, m, k), np.float32)
        b = rng.standard_normal((*lead, k, n), np.float32)
        out = np.empty((*lead, m, n), np.float32)
        np.matmul(a, b, out=out)
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            np.matmul(a, b, out=out)
            samples.append(time.perf_counter() - start)
        ms += statistics.median(samples) * 1e3
        flops += 2.0 * batch * m * k * n
    return flops / 1e9, ms


# steps ------------------------------------------------------------------------------------------------
def munet_step(model, opt, x, y):
    opt.zero_grad()
    loss = MF.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def torch_step(model, opt, x, y):
    opt.zero_grad()
    loss = TF.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def build(name, lib):
    if lib == "munet":
        munet.manual_seed(0)
        model = mlp(mnn) if name == "mlp" else cnn(mnn) if name == "cnn" else gpt(mnn, MF)
        return model, munet.optim.AdamW(model.parameters(), lr=1e-3), *data(munet, name)
    torch.manual_seed(0)
    model = mlp(tnn) if name == "mlp" else cnn(tnn) if name == "cnn" else gpt(tnn, TF)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3), *data(torch, name)


def time_steps(step, args, warmup: int, steps: int) -> tuple[float, float]:
    """(median ms/step, loss after the last step); the loss is read after timing each step."""
    loss = None
    for _ in range(warmup):
        loss = step(*args).item()
    samples = []
    for _ in range(steps):
        start = time.perf_counter()
        out = step(*args)
        samples.append((time.perf_counter() - start) * 1e3)
        loss = out.item()
    return statistics.median(samples), loss


def make_step(name, mode):
    """``(step, args)``: one training step of workload ``name`` in ``mode`` and its arguments."""
    lib = "munet" if mode.startswith("munet") else "torch"
    args = build(name, lib)
    step = munet_step if lib == "munet" else torch_step
    if mode == "munet compiled":
        step = munet.compile(step)
    elif mode == "munet unfused":
        step = munet.compile(step, fuse=False)
    elif mode == "munet no remat":
        step = munet.compile(step, options={"remat": False})
    elif mode == "torch.compile":
        step = torch.compile(step)
    return step, args


def run_mode(name, mode, warmup, steps):
    step, args = make_step(name, mode)
    try:
        ms, loss = time_steps(step, args, warmup, steps)
    except Exception as e:  # torch.compile without a working toolchain, or a MuNet gap: report, go on
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    extra = ""
    if mode in ("munet compiled", "munet unfused"):
        s = step.stats()
        extra = f"kernels={s['kernels']} fused_groups={s.get('fused_groups')} arena={s.get('arena_bytes')}B"
        extra += f" inplace={s.get('memory', {}).get('inplace_updates')}"
    return ms, f"loss={loss:.4f} {extra}".strip()


MODES = ("munet eager", "munet compiled", "munet unfused", "torch eager", "torch.compile")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 timed steps after 2 warm-up steps")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="both libraries' thread count (default: theirs)")
    parser.add_argument("--only", default="mlp,cnn,gpt")
    parser.add_argument("--modes", default=",".join(MODES), help=f"a comma-separated subset of: {', '.join(MODES)}")
    args = parser.parse_args()
    steps, warmup = (5, 2) if args.quick else (args.steps, args.warmup)
    modes = [m.strip() for m in args.modes.split(",")]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)}; expected a subset of: {', '.join(MODES)}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        munet.set_num_threads(args.threads)
    threads = f"munet {munet.get_num_threads()}, torch {torch.get_num_threads()}"
    load = os.getloadavg()
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  {platform.processor() or platform.machine()}"
        f"  cores={os.cpu_count()}  threads: {threads}  load={load[0]:.1f},{load[1]:.1f},{load[2]:.1f}"
    )
    print(f"# torch {torch.__version__}, numpy {np.__version__}, median of {steps} steps after {warmup} warm-up")
    for name in args.only.split(","):
        gflop, floor_ms = gemm_floor(name, repeat=5 if args.quick else 10)
        print(f"\n{name}: GEMM floor {floor_ms:.1f} ms ({gflop:.2f} GFLOP at {gflop / floor_ms * 1e3:.1f} GFLOP/s)")
        results = dict.fromkeys(MODES)
        for mode in modes:
            ms, note = run_mode(name, mode, warmup, steps)
            results[mode] = ms
            shown = f"{ms:9.1f} ms/step" if ms is not None else "   failed      "
            print(f"  {mode:15s}{shown}  {note}", flush=True)
        base = results["munet compiled"]
        if base:
            ratios = [f"{m}/compiled={results[m] / base:.2f}x" for m in MODES if results[m] and m != "munet compiled"]
            print(f"  ratios: {'  '.join(ratios)}  compiled/floor={base / floor_ms:.2f}x")
        if results["munet eager"] and results["torch eager"]:
            print(f"  munet eager / torch eager = {results['munet eager'] / results['torch eager']:.2f}x")


if __name__ == "__main__":
    main()
