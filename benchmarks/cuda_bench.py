"""The cuda backend against PyTorch with CUDA on the same GPU, in one run (issue 12's targets).

Cases, each with PyTorch's figure beside MuNet's and their ratio:

- matmul at 4096^3 (``--size``): float32, TF32 (``munet.backends.cuda.matmul.allow_tf32`` and
  ``torch.backends.cuda.matmul.allow_tf32`` set) and bfloat16, in TFLOP/s; target >= 90% of torch.
- bandwidth on 64M float32 elements (``--numel``): device-to-device copy (``y.copy_(x)``, the
  roofline), and the elementwise ops ``x + y``, ``x * 2`` and ``relu(x)`` when MuNet has cuda kernels
  for them, in GB/s of bytes read plus written; target >= 80% of the copy's bandwidth.
- eager per-op launch overhead: microseconds per call of small ops (1024 elements) issued back to
  back, the host cost of dispatch plus launch; target <= 2x torch.
- host transfers of 256 MiB: ``.cuda()`` and ``.cpu()`` in GB/s (pageable host memory, both).
- a compiled MLP training step (AdamW, ``--width``, batch 256): ``munet.compile`` replayed as one
  CUDA graph and with ``options={"cuda_graphs": False}``, against PyTorch eager, in ms per step
  (host wall clock, synchronized).
- conv2d, float32, batch 32 at 56 x 56: ResNet's 3x3 convolution (64 -> 64 channels, padding 1) and
  its 1x1 bottleneck reduction (256 -> 64), each forward (under no_grad) and forward plus backward
  (the input and weight gradients of a given output gradient), in ms; MuNet's kernel (the implicit
  GEMM or the direct one, ``kernels_conv.choose_kernel``) against PyTorch's (cuDNN), the note
  giving MuNet's TFLOP/s.

Device times come from CUDA events around ``--repeat`` calls after a warm-up (MuNet's events for
MuNet, PyTorch's for PyTorch); launch overhead and transfers are host wall clock with a
synchronize at the end. Without a CUDA device the script exits with status 2 and says why.

    python benchmarks/cuda_bench.py [--device cuda:0] [--markdown OUT.md] [--json OUT.json]

``--markdown`` writes the page docs/perf/cuda.md holds (command, machine, date, the table).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time

import numpy as np

import munet

try:
    import torch
except ImportError:
    torch = None


def fail(message: str) -> None:
    print(f"benchmarks/cuda_bench.py: {message}", file=sys.stderr)
    raise SystemExit(2)


class Timer:
    """Device milliseconds per call of ``fn`` on the current stream of one library's device."""

    def __init__(self, event_class, synchronize):
        self.event_class, self.synchronize = event_class, synchronize

    def ms(self, fn, repeat: int) -> float:
        for _ in range(3):
            fn()
        self.synchronize()
        start, end = self.event_class(enable_timing=True), self.event_class(enable_timing=True)
        start.record()
        for _ in range(repeat):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / repeat


def host_us(fn, synchronize, repeat: int) -> float:
    for _ in range(10):
        fn()
    synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    synchronize()
    return (time.perf_counter() - start) / repeat * 1e6


class Table:
    def __init__(self):
        self.rows: list[dict] = []

    def add(self, case: str, unit: str, ours, theirs, note: str = "") -> None:
        """A row; the ratio is MuNet's figure over PyTorch's (for us/op, lower is better)."""
        ratio = ours / theirs if ours is not None and theirs else None
        row = {"case": case, "unit": unit, "munet": ours, "torch": theirs, "ratio": ratio, "note": note}
        self.rows.append(row)
        print(self.render_row(row), flush=True)

    @staticmethod
    def render_row(row) -> str:
        def cell(v):
            return "-" if v is None else f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"

        return f"| {row['case']} | {row['unit']} | {cell(row['munet'])} | {cell(row['torch'])} | {cell(row['ratio'])} | {row['note']} |"

    def markdown(self) -> list[str]:
        lines = ["| case | unit | MuNet | PyTorch | MuNet / PyTorch | note |", "|---|---|---|---|---|---|"]
        return lines + [self.render_row(r) for r in self.rows]


def _no_kernel(exc: Exception) -> str:
    return f"MuNet: {exc}" if isinstance(exc, munet.DeviceError) else f"MuNet failed: {type(exc).__name__}: {exc}"


def matmul_cases(table: Table, device: str, size: int, repeat: int, mt: Timer, tt: Timer | None) -> None:
    rng = np.random.default_rng(0)
    host_a = rng.standard_normal((size, size), dtype=np.float32)
    host_b = rng.standard_normal((size, size), dtype=np.float32)
    flop = 2.0 * size**3
    for label, dtype, tf32 in (
        ("float32", "float32", False),
        ("TF32", "float32", True),
        ("bfloat16", "bfloat16", False),
    ):
        a = munet.tensor(host_a, device=device).to(getattr(munet, dtype))
        b = munet.tensor(host_b, device=device).to(getattr(munet, dtype))
        munet.backends.cuda.matmul.allow_tf32 = tf32
        ours = flop / mt.ms(lambda a=a, b=b: a @ b, repeat) / 1e9
        munet.backends.cuda.matmul.allow_tf32 = False
        theirs = None
        if tt is not None:
            ta = torch.from_numpy(host_a).to(device).to(getattr(torch, dtype))
            tb = torch.from_numpy(host_b).to(device).to(getattr(torch, dtype))
            torch.backends.cuda.matmul.allow_tf32 = tf32
            theirs = flop / tt.ms(lambda ta=ta, tb=tb: ta @ tb, repeat) / 1e9
            torch.backends.cuda.matmul.allow_tf32 = False
        table.add(f"matmul {size}^3 {label}", "TFLOP/s", ours, theirs, "target: ratio >= 0.9")


def bandwidth_cases(table: Table, device: str, numel: int, repeat: int, mt: Timer, tt: Timer | None) -> None:
    x = munet.ones(numel, device=device)
    y = munet.ones(numel, device=device)
    tx = ty = None
    if tt is not None:
        tx, ty = torch.ones(numel, device=device), torch.ones(numel, device=device)
    copy_bytes = 2 * 4 * numel
    ours_copy = copy_bytes / mt.ms(lambda: y.copy_(x), repeat) / 1e6
    theirs_copy = copy_bytes / tt.ms(lambda: ty.copy_(tx), repeat) / 1e6 if tt is not None else None
    table.add(f"copy_ {numel} float32 (device to device)", "GB/s", ours_copy, theirs_copy, "the roofline")
    cases = (
        ("x + y", lambda: x + y, lambda: tx + ty, 3),
        ("x * 2", lambda: x * 2, lambda: tx * 2, 2),
        ("relu(x)", lambda: munet.relu(x), lambda: torch.relu(tx), 2),
    )
    for name, ours_fn, theirs_fn, words in cases:
        nbytes = words * 4 * numel
        theirs = nbytes / tt.ms(theirs_fn, repeat) / 1e6 if tt is not None else None
        try:
            ours = nbytes / mt.ms(ours_fn, repeat) / 1e6
        except Exception as exc:  # noqa: BLE001 - a missing kernel is a row, not the end of the run
            table.add(f"{name} {numel} float32", "GB/s", None, theirs, _no_kernel(exc))
            continue
        table.add(
            f"{name} {numel} float32",
            "GB/s",
            ours,
            theirs,
            f"{ours / ours_copy:.0%} of MuNet's copy_ (target >= 80%)",
        )


def overhead_cases(table: Table, device: str, repeat: int) -> None:
    x = munet.ones(1024, device=device)
    w = munet.ones(8, 8, device=device)
    msync = munet.cuda.synchronize
    tx = tw = None
    if torch is not None and torch.cuda.is_available():
        tx, tw = torch.ones(1024, device=device), torch.ones(8, 8, device=device)
    cases = (
        ("x + x", lambda: x + x, lambda: tx + tx),
        ("x.clone()", lambda: x.clone(), lambda: tx.clone()),
        ("w @ w (8x8, cuBLAS)", lambda: w @ w, lambda: tw @ tw),
        ("x.sum()", lambda: x.sum(), lambda: tx.sum()),
    )
    for name, ours_fn, theirs_fn in cases:
        theirs = host_us(theirs_fn, torch.cuda.synchronize, repeat) if tx is not None else None
        try:
            ours = host_us(ours_fn, msync, repeat)
        except Exception as exc:  # noqa: BLE001
            table.add(f"launch overhead {name}", "us/op", None, theirs, _no_kernel(exc))
            continue
        table.add(f"launch overhead {name}", "us/op", ours, theirs, "target: ratio <= 2")


def transfer_cases(table: Table, device: str) -> None:
    host = np.ones(64 << 20, np.float32)  # 256 MiB
    mh = munet.from_numpy(host)
    nbytes = host.nbytes
    ours_up = nbytes / host_us(lambda: mh.to(device), munet.cuda.synchronize, 5) / 1e3
    md = mh.to(device)
    ours_down = nbytes / host_us(lambda: md.cpu(), munet.cuda.synchronize, 5) / 1e3
    theirs_up = theirs_down = None
    if torch is not None and torch.cuda.is_available():
        th = torch.from_numpy(host)
        theirs_up = nbytes / host_us(lambda: th.to(device), torch.cuda.synchronize, 5) / 1e3
        td = th.to(device)
        theirs_down = nbytes / host_us(lambda: td.cpu(), torch.cuda.synchronize, 5) / 1e3
    table.add("host to device 256 MiB", "GB/s", ours_up, theirs_up, "pageable host memory")
    table.add("device to host 256 MiB", "GB/s", ours_down, theirs_down, "pageable host memory")


def compiled_step_cases(table: Table, device: str, width: int, repeat: int, mt: Timer, tt: Timer | None) -> None:
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((256, width)).astype(np.float32)
    y_host = rng.standard_normal((256, width)).astype(np.float32)

    def munet_step(cuda_graphs: bool):
        munet.manual_seed(0)
        nn = munet.nn
        model = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width)).to(device)
        opt = munet.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = munet.tensor(x_host).to(device), munet.tensor(y_host).to(device)

        def step(a, b):
            opt.zero_grad()
            loss = munet.nn.functional.mse_loss(model(a), b)
            loss.backward()
            opt.step()
            return loss

        compiled = munet.compile(step, options={"cuda_graphs": cuda_graphs})
        for _ in range(3):
            compiled(x, y)
        ms = host_us(lambda: compiled(x, y), munet.cuda.synchronize, repeat) / 1e3
        return ms, compiled.stats()["cuda_graph"]

    theirs = None
    if tt is not None:
        tn = torch.nn
        model = tn.Sequential(tn.Linear(width, width), tn.GELU(), tn.Linear(width, width)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        tx, ty = torch.tensor(x_host, device=device), torch.tensor(y_host, device=device)

        def torch_step():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(tx), ty)
            loss.backward()
            opt.step()
            return loss

        theirs = host_us(torch_step, torch.cuda.synchronize, repeat) / 1e3
    for graphs in (True, False):
        name = f"compiled MLP step {width} AdamW ({'CUDA graph' if graphs else 'no graph'})"
        try:
            ours, how = munet_step(graphs)
        except Exception as exc:  # noqa: BLE001
            table.add(name, "ms/step", None, theirs, _no_kernel(exc))
            continue
        table.add(name, "ms/step", ours, theirs, f"vs PyTorch eager; {how}")


CONV_CASES = (  # label, input shape, weight shape, padding
    ("3x3 64->64", (32, 64, 56, 56), (64, 64, 3, 3), 1),
    ("1x1 256->64", (32, 256, 56, 56), (64, 256, 1, 1), 0),
)


def conv_cases(table: Table, device: str, repeat: int, mt: Timer, tt: Timer | None) -> None:
    from munet.backends.cuda import kernels_conv

    rng = np.random.default_rng(0)
    for label, x_shape, w_shape, padding in CONV_CASES:
        out_shape = (x_shape[0], w_shape[0], *x_shape[2:])  # stride 1, "same" padding
        hosts = [rng.standard_normal(s).astype(np.float32) for s in (x_shape, w_shape, out_shape)]
        flop = 2.0 * np.prod(out_shape) * np.prod(w_shape[1:])
        kernel = kernels_conv.plan("float32", x_shape, w_shape, out_shape, 1, False)[0].name
        for passes, name in ((1, "forward"), (3, "forward+backward")):
            case = f"conv2d {label}, {'x'.join(map(str, x_shape))}, {name}"
            try:
                x, w = (munet.tensor(h).to(device).requires_grad_() for h in hosts[:2])
                g = munet.tensor(hosts[2]).to(device)
                ours = mt.ms(_conv_call(munet, x, w, g, padding, passes), repeat)
            except Exception as exc:  # noqa: BLE001
                table.add(case, "ms", None, None, _no_kernel(exc))
                continue
            theirs = None
            if tt is not None:
                tx, tw = (torch.tensor(h, device=device, requires_grad=True) for h in hosts[:2])
                theirs = tt.ms(
                    _conv_call(torch, tx, tw, torch.tensor(hosts[2], device=device), padding, passes), repeat
                )
            note = f"MuNet: {kernel} (forward), {passes * flop / ours / 1e9:.1f} TFLOP/s; PyTorch: cuDNN"
            table.add(case, "ms", ours, theirs, note)


def _conv_call(lib, x, w, g, padding: int, passes: int):
    """One convolution (``passes == 1``, without autograd) or one with its backward, in ``lib``."""

    def forward():
        with lib.no_grad():
            return lib.nn.functional.conv2d(x, w, padding=padding)

    def forward_backward():
        x.grad = w.grad = None
        lib.nn.functional.conv2d(x, w, padding=padding).backward(g)

    return forward if passes == 1 else forward_backward


def machine_lines(device: str) -> list[str]:
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:  # no nvidia-smi on this machine
        smi = ""
    import cupy

    lines = [
        f"- GPU: {munet.cuda.get_device_name(device)} (compute capability "
        f"{'.'.join(map(str, munet.cuda.get_device_capability(device)))}); nvidia-smi: {smi or 'n/a'}",
        f"- host: {platform.processor() or platform.machine()}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}",
        f"- CuPy {cupy.__version__} (CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}), NumPy {np.__version__}, "
        f"PyTorch {torch.__version__ if torch is not None else 'not installed'}"
        f"{' (CUDA ' + str(torch.version.cuda) + ')' if torch is not None and torch.cuda.is_available() else ''}",
    ]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--size", type=int, default=4096, help="matmul size n (n x n times n x n)")
    parser.add_argument("--numel", type=int, default=64 << 20, help="elements of the bandwidth cases")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--width", type=int, default=1024, help="width of the compiled MLP step")
    parser.add_argument("--markdown", help="write the docs/perf/cuda.md page here")
    parser.add_argument("--json", help="write the rows as JSON here")
    args = parser.parse_args(argv)

    if not munet.cuda.is_available():
        from munet.backends.cuda import discovery

        fail(f"no CUDA GPU to benchmark: {discovery.explain_unavailable(0)}")
    torch_cuda = torch is not None and torch.cuda.is_available()
    if not torch_cuda:
        print("benchmarks/cuda_bench.py: PyTorch has no CUDA here; its column stays empty", file=sys.stderr)
    index = munet.device(args.device).index or 0
    munet.cuda.set_device(index)
    if torch_cuda:
        torch.cuda.set_device(index)
    mt = Timer(munet.cuda.Event, munet.cuda.synchronize)
    tt = Timer(torch.cuda.Event, torch.cuda.synchronize) if torch_cuda else None

    table = Table()
    print("| case | unit | MuNet | PyTorch | MuNet / PyTorch | note |\n|---|---|---|---|---|---|")
    matmul_cases(table, args.device, args.size, args.repeat, mt, tt)
    bandwidth_cases(table, args.device, args.numel, args.repeat, mt, tt)
    overhead_cases(table, args.device, 2000)
    transfer_cases(table, args.device)
    compiled_step_cases(table, args.device, args.width, args.repeat, mt, tt)
    conv_cases(table, args.device, args.repeat, mt, tt)

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "rows": table.rows}, f, indent=1)
    if args.markdown:
        command = "python benchmarks/cuda_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
        page = [
            "# CUDA backend performance",
            "",
            f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by `{command}`",
            "(scripts/gpu_check.sh), MuNet and PyTorch in one process on the same GPU:",
            "",
            *machine_lines(args.device),
            "",
            "Device times are CUDA events around the calls; launch overhead and transfers are host wall",
            "clock. A missing figure says why in its note (a MuNet op without a cuda kernel yet).",
            "",
            *table.markdown(),
            "",
        ]
        with open(args.markdown, "w") as f:
            f.write("\n".join(page))
    return 0


if __name__ == "__main__":
    sys.exit(main())
