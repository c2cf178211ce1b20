"""The vulkan backend against NumPy and PyTorch (CPU) on the same machine, in one run.

Cases: matmul GFLOP/s on n x n float32 squares (256 up to ``--max-size``), elementwise GB/s
on 4M-element tensors, conv2d forward and forward+backward (when the vulkan backend has a
``convolution`` kernel), one training step of an MLP (784-512-512-10, batch 256, SGD), and
(``compiled``) AdamW steps of two MLPs and a small GPT under ``munet.compile`` against the same
steps in eager mode.
Every vulkan figure includes a ``synchronize()``, so it is device time plus host dispatch.
The ``numpy`` column is NumPy itself for matmul and elementwise ops, and MuNet on the cpu
device (whose kernels are NumPy) for conv2d and the MLP step.
Usage:

    .venv/bin/python benchmarks/vulkan.py [--device vulkan:0] [--max-size 4096] [--only compiled] [--json out.json]

On lavapipe (Mesa's CPU Vulkan driver) a 4096 matmul takes minutes: pass ``--max-size 1024``.
"""

from __future__ import annotations

import os
import sys

# BLAS threads must be fixed before NumPy loads; NumPy, PyTorch and lavapipe get the same count.
_THREADS = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else str(os.cpu_count() or 1)
os.environ.setdefault("OPENBLAS_NUM_THREADS", _THREADS)
os.environ.setdefault("LP_NUM_THREADS", _THREADS)

import argparse
import json
import platform
import time

import numpy as np

import munet
import munet.nn.functional as MF

try:
    import torch
except ImportError:  # the figures for PyTorch are left out
    torch = None


def seconds_per_call(fn, sync=lambda: None, min_time: float = 0.5, max_calls: int = 50) -> float:
    """Median-free but robust enough: one warm-up call, then enough calls to fill ``min_time``."""
    fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    once = time.perf_counter() - start
    calls = max(1, min(max_calls, int(min_time / max(once, 1e-9))))
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls


class Bench:
    def __init__(self, device: str):
        self.device = device
        self.sync = lambda: munet.vulkan.synchronize(device)
        self.rows: list[dict] = []

    def row(self, case: str, unit: str, work: float, times: dict) -> None:
        """Record ``times`` (seconds per call by library) as ``work / time`` in ``unit``."""
        figures = {lib: (work / t if unit != "ms" else t * 1e3) for lib, t in times.items() if t is not None}
        self.rows.append({"case": case, "unit": unit, **{lib: round(v, 4) for lib, v in figures.items()}})
        cells = " | ".join(f"{figures[lib]:.2f}" if lib in figures else "-" for lib in ("vulkan", "numpy", "torch"))
        print(f"| {case} | {unit} | {cells} |", flush=True)


def matmul_cases(b: Bench, sizes) -> None:
    rng = np.random.default_rng(0)
    for n in sizes:
        a, c = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        va, vc = munet.tensor(a, device=b.device), munet.tensor(c, device=b.device)
        times = {
            "vulkan": seconds_per_call(lambda va=va, vc=vc: va @ vc, b.sync),
            "numpy": seconds_per_call(lambda a=a, c=c: a @ c),
        }
        if torch is not None:
            ta, tc = torch.from_numpy(a), torch.from_numpy(c)
            times["torch"] = seconds_per_call(lambda ta=ta, tc=tc: ta @ tc)
        b.row(f"matmul {n}x{n}", "GFLOP/s", 2 * n**3 / 1e9, times)


def elementwise_cases(b: Bench, numel: int = 1 << 22) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(numel, dtype=np.float32), rng.standard_normal(numel, dtype=np.float32)
    vx, vy = munet.tensor(x, device=b.device), munet.tensor(y, device=b.device)
    tx, ty = (torch.from_numpy(x), torch.from_numpy(y)) if torch is not None else (None, None)
    mb = numel * 4 / 1e9
    for case, traffic, v_fn, n_fn, t_fn in (
        ("x * 2.0", 2, lambda: vx * 2.0, lambda: x * 2.0, lambda: tx * 2.0),
        ("x + y", 3, lambda: vx + vy, lambda: x + y, lambda: tx + ty),
        ("exp(x)", 2, lambda: vx.exp(), lambda: np.exp(x), lambda: tx.exp()),
        ("x.sum()", 1, lambda: vx.sum(), lambda: x.sum(), lambda: tx.sum()),
    ):
        times = {"vulkan": seconds_per_call(v_fn, b.sync), "numpy": seconds_per_call(n_fn)}
        if torch is not None:
            times["torch"] = seconds_per_call(t_fn)
        b.row(f"{case}, 4M float32", "GB/s", traffic * mb, times)


def conv_cases(b: Bench) -> None:
    from munet.backends.vulkan.registry import KERNELS

    if "convolution" not in KERNELS:
        print("| conv2d | - | no vulkan convolution kernel | | |")
        return
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32, 26, 26), dtype=np.float32)
    w = rng.standard_normal((64, 32, 3, 3), dtype=np.float32) * 0.1
    flops = 2 * 16 * 64 * 24 * 24 * 32 * 9 / 1e9
    vx, vw = munet.tensor(x, device=b.device), munet.tensor(w, device=b.device)
    gx, gw = (munet.tensor(a, device=b.device, requires_grad=True) for a in (x, w))

    def vulkan_step():
        MF.conv2d(gx, gw).sum().backward()

    cx, cw = munet.tensor(x), munet.tensor(w)
    hx, hw = munet.tensor(x, requires_grad=True), munet.tensor(w, requires_grad=True)

    def cpu_step():
        MF.conv2d(hx, hw).sum().backward()

    fwd = {
        "vulkan": seconds_per_call(lambda: MF.conv2d(vx, vw), b.sync),
        "numpy": seconds_per_call(lambda: MF.conv2d(cx, cw)),
    }
    step = {"vulkan": seconds_per_call(vulkan_step, b.sync), "numpy": seconds_per_call(cpu_step)}
    if torch is not None:
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        sx, sw = (torch.from_numpy(a.copy()).requires_grad_() for a in (x, w))
        fwd["torch"] = seconds_per_call(lambda: torch.nn.functional.conv2d(tx, tw))
        step["torch"] = seconds_per_call(lambda: torch.nn.functional.conv2d(sx, sw).sum().backward())
    b.row("conv2d 32->64 3x3, 16x26x26 fwd", "GFLOP/s", flops, fwd)
    b.row("conv2d 32->64 3x3, 16x26x26 fwd+bwd", "GFLOP/s", 3 * flops, step)


def mlp_case(b: Bench) -> None:
    """One SGD step of 784-512-512-10 on a batch of 256: vulkan, munet on cpu (NumPy), torch."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 784), dtype=np.float32)
    y = rng.integers(0, 10, 256)
    times = {}
    for lib, device in (("vulkan", b.device), ("numpy", "cpu")):
        model = munet.nn.Sequential(
            munet.nn.Linear(784, 512), munet.nn.ReLU(), munet.nn.Linear(512, 512), munet.nn.ReLU(),
            munet.nn.Linear(512, 10),
        ).to(device)  # fmt: skip
        opt = munet.optim.SGD(model.parameters(), lr=0.01)
        mx, my = munet.tensor(x, device=device), munet.tensor(y, device=device)

        def step(model=model, opt=opt, mx=mx, my=my):
            opt.zero_grad()
            MF.cross_entropy(model(mx), my).backward()
            opt.step()

        times[lib] = seconds_per_call(step, b.sync if lib == "vulkan" else lambda: None, max_calls=20)
    if torch is not None:
        model = torch.nn.Sequential(
            torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
            torch.nn.Linear(512, 10),
        )  # fmt: skip
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)

        def torch_step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(tx), ty).backward()
            opt.step()

        times["torch"] = seconds_per_call(torch_step, max_calls=20)
    b.row("MLP 784-512-512-10 SGD step, batch 256", "ms", 1.0, times)


def compiled_step_case(b: Bench, case: str, make, x, y, repeats: int = 7, steps: int = 5) -> None:
    """One AdamW training step of ``make()``'s model: ``munet.compile`` on vulkan vs eager vulkan.

    Interleaved: each repeat times ``steps`` compiled steps, then ``steps`` eager ones (each
    followed by ``synchronize()``); medians over repeats. Also prints dispatches and submits per step.
    """

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = MF.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    runtime = munet._device.get_backend(munet.device(b.device)).runtime
    compiled = munet.compile(step)
    runs = {"compiled": (compiled, *make()), "eager": (step, *make())}
    counts = {}
    for name, (fn, model, opt) in runs.items():
        for _ in range(3):  # traces (compiled) and warm caches
            fn(model, opt, x, y)
        b.sync()
        before = dict(runtime.stats())
        fn(model, opt, x, y)
        b.sync()
        after = runtime.stats()
        counts[name] = {k: after[k] - before[k] for k in ("dispatches", "submits")}
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (fn, model, opt) in runs.items():
            start = time.perf_counter()
            for _ in range(steps):
                fn(model, opt, x, y)
                b.sync()
            times[name].append((time.perf_counter() - start) / steps * 1e3)
    med = {name: float(np.median(t)) for name, t in times.items()}
    stats = compiled.stats()
    print(
        f"| {case} | ms | compiled {med['compiled']:.2f} | eager {med['eager']:.2f} "
        f"| eager/compiled {med['eager'] / med['compiled']:.2f}x | dispatches {counts['compiled']['dispatches']} vs "
        f"{counts['eager']['dispatches']} | submits {counts['compiled']['submits']} vs {counts['eager']['submits']} "
        f"| fused groups {stats['fused_groups']} ({stats['generated_kernels']} WGSL) |",
        flush=True,
    )
    b.rows.append({"case": f"compiled {case}", "unit": "ms", **med, "counts": counts, "runs": times})


def compiled_mlp_case(b: Bench, widths=(784, 512, 512, 10), batch: int = 256) -> None:
    rng = np.random.default_rng(0)
    x = munet.tensor(rng.standard_normal((batch, widths[0]), dtype=np.float32), device=b.device)
    y = munet.tensor(rng.integers(0, widths[-1], batch), device=b.device)

    def make():
        munet.manual_seed(0)
        layers = []
        for n_in, n_out in zip(widths[:-1], widths[1:]):
            layers += [munet.nn.Linear(n_in, n_out), munet.nn.ReLU()]
        model = munet.nn.Sequential(*layers[:-1]).to(b.device)
        return model, munet.optim.AdamW(model.parameters(), lr=1e-3)

    compiled_step_case(b, f"MLP {'-'.join(map(str, widths))} AdamW step, batch {batch}", make, x, y)


def compiled_gpt_case(b: Bench, layers=2, heads=4, width=64, context=32, vocab=65, batch=8) -> None:
    """benchmarks/compare_pytorch.py's GPT (LayerNorm, causal attention, GELU MLP), at a size lavapipe runs."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import compare_pytorch

    compare_pytorch.GPT.update(layers=layers, heads=heads, width=width, context=context, vocab=vocab, batch=batch)
    rng = np.random.default_rng(0)
    x = munet.tensor(rng.integers(0, vocab, (batch, context)), device=b.device)
    y = munet.tensor(rng.integers(0, vocab, batch * context), device=b.device)

    def make():
        munet.manual_seed(0)
        model = compare_pytorch.gpt(munet.nn, MF).to(b.device)
        return model, munet.optim.AdamW(model.parameters(), lr=1e-3)

    case = f"GPT {layers} layers, width {width}, context {context}, batch {batch} AdamW step"
    compiled_step_case(b, case, make, x, y, repeats=5, steps=3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="vulkan:0")
    parser.add_argument("--max-size", type=int, default=4096, help="largest matmul size (256, 512, ... up to this)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU threads for NumPy, torch, lavapipe")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--only", help="comma-separated cases to run: matmul, elementwise, conv, mlp, compiled (default: all)"
    )
    args = parser.parse_args()
    if torch is not None:
        torch.set_num_threads(args.threads)
    bench = Bench(args.device)
    name = munet.vulkan.get_device_name(args.device)
    kind = dict(munet._device.get_backend(munet.device(args.device)).runtime.adapter.info).get("adapter_type", "?")
    header = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "device": f"{args.device}: {name} ({kind})",
        "cpu": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}",
        "threads": args.threads,
        "numpy": np.__version__,
        "torch": torch.__version__ if torch is not None else None,
        "munet": getattr(munet, "__version__", "?"),
    }
    for key, value in header.items():
        print(f"# {key}: {value}")
    print("| case | unit | vulkan | numpy | torch |\n|---|---|---|---|---|")
    sizes = [n for n in (256, 512, 1024, 2048, 4096) if n <= args.max_size]
    cases = {
        "matmul": lambda: matmul_cases(bench, sizes),
        "elementwise": lambda: elementwise_cases(bench),
        "conv": lambda: conv_cases(bench),
        "mlp": lambda: mlp_case(bench),
        "compiled": lambda: (
            compiled_mlp_case(bench),
            compiled_mlp_case(bench, (64, 64, 64, 10), batch=32),
            compiled_gpt_case(bench),
        ),
    }
    chosen = args.only.split(",") if args.only else list(cases)
    for name in chosen:
        if name not in cases:
            parser.error(f"--only: unknown case {name!r}; choose from {', '.join(cases)}")
        cases[name]()
    print(f"# load average after: {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**header, "rows": bench.rows}, f, indent=1)


if __name__ == "__main__":
    main()
