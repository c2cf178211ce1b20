"""Imported ResNet-18 inference: MuNet (``munet.onnx.load`` + ``munet.compile``) against onnxruntime.

The model is ``tests/onnx/real_models.py``'s ResNet-18 (torchvision's layout) exported by
``torch.onnx.export`` at opset 18 with a symbolic batch dim, 224x224 inputs. Both runtimes run in
this one process, at each library's default thread count and then at one thread (``--threads default,1``): MuNet through
``munet.set_num_threads``, onnxruntime through ``intra_op_num_threads`` (0 is its default, one
thread per core). The two run in turn, a block of ``--block`` timed calls of each per round (after
one untimed call), so both see the same load of a shared machine while each timed call follows one
of its own library's: onnxruntime's intra-op threads spin after a run (its default
``allow_spinning``), holding the core the next call needs, which slowed MuNet's call after it by
35-60% at two threads (docs/perf/onnx.md, 2026-12-04; ``--block 1`` times one call of each per round,
the earlier method). Prints the median ms per batch of each and the median of the per-round ratios
MuNet / onnxruntime (of the blocks' medians), for batch 1 and 16, and (``--vulkan``) MuNet on
``vulkan:0``. Usage:

    .venv/bin/python benchmarks/onnx_resnet.py [--batches 1,16] [--threads default,1] [--vulkan] [--repeat 10] [--block 4]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

# isort: off
import munet  # before NumPy: OpenBLAS then reads munet's thread settings (munet/_threads.py)
import numpy as np

# isort: on

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def median_ms(fn, repeat: int, sync=lambda: None, clock=time.perf_counter) -> float:
    fn()
    sync()  # warm-up: compilation and first-touch allocation are not inference
    samples = []
    for _ in range(repeat):
        start = clock()
        fn()
        sync()
        samples.append((clock() - start) * 1e3)
    return statistics.median(samples)


def interleaved_ms(ours, theirs, repeat: int, block: int = 1) -> tuple[float, float, float]:
    """Median ms of ``ours`` and of ``theirs``, called in turn (a block of each per round, so both see
    the same machine load), and the median of the per-round ratios ours / theirs. With ``block`` above
    one, each block starts with an untimed call, so every timed call follows one of its own."""
    ours(), theirs()  # warm-up: compilation and first-touch allocation are not inference
    a, b, ratios = [], [], []
    for _ in range(repeat):
        medians = []
        for fn, samples in ((ours, a), (theirs, b)):
            if block > 1:
                fn()
            times = []
            for _ in range(block):
                start = time.perf_counter()
                fn()
                times.append((time.perf_counter() - start) * 1e3)
            samples.extend(times)
            medians.append(statistics.median(times))
        ratios.append(medians[0] / medians[1])
    return statistics.median(a), statistics.median(b), statistics.median(ratios)


def ort_session(model_bytes: bytes, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads  # 0: onnxruntime's default
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def resnet_model_bytes(size: int) -> bytes:
    """The benchmark's ResNet-18 (random BatchNorm statistics, seed 0) as ONNX bytes, batch dim symbolic."""
    import torch

    from tests.onnx.real_models import ResNet18, export, randomize_batch_norm

    torch.manual_seed(0)
    model = randomize_batch_norm(ResNet18(), torch.Generator().manual_seed(0)).eval()
    return export(model, (torch.randn(1, 3, size, size),), dynamic_axes={"input_0": {0: "batch"}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--threads", default="default,1")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--block", type=int, default=4, help="timed calls of each library per round (1: one call each)")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--vulkan", action="store_true", help="also time MuNet on vulkan:0")
    args = parser.parse_args()

    model_bytes = resnet_model_bytes(args.size)
    load = os.getloadavg()
    print(
        f"# {cpu_model()}  cores={os.cpu_count()}  load={load[0]:.1f},{load[1]:.1f},{load[2]:.1f}"
        f"  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  ResNet-18 {args.size}x{args.size}, median of {args.repeat} rounds of {args.block} calls"
    )
    default_threads = munet.get_num_threads()
    print(f"{'threads':>8} {'batch':>5} {'munet ms':>10} {'ort ms':>10} {'ratio':>6}")
    program = munet.onnx.load(model_bytes)
    compiled = munet.compile(program)
    for threads in args.threads.split(","):
        count = default_threads if threads == "default" else int(threads)
        munet.set_num_threads(count)
        session = ort_session(model_bytes, 0 if threads == "default" else count)
        for batch in (int(b) for b in args.batches.split(",")):
            x = np.random.default_rng(0).standard_normal((batch, 3, args.size, args.size), dtype=np.float32)
            mx = munet.from_numpy(x)
            with munet.no_grad():
                ours, theirs, ratio = interleaved_ms(
                    lambda mx=mx: compiled(mx),
                    lambda s=session, x=x: s.run(None, {"input_0": x}),
                    args.repeat,
                    args.block,
                )
            print(f"{threads:>8} {batch:>5} {ours:10.1f} {theirs:10.1f} {ratio:6.2f}")
    munet.set_num_threads(default_threads)
    if args.vulkan:
        device = munet.device("vulkan:0")
        on_device = munet.compile(munet.onnx.load(model_bytes, device=device))
        for batch in (int(b) for b in args.batches.split(",")):
            x = munet.randn(batch, 3, args.size, args.size).to(device)
            with munet.no_grad():
                ms = median_ms(lambda x=x: on_device(x), args.repeat, sync=munet.vulkan.synchronize)
            print(f"{'vulkan':>8} {batch:>5} {ms:10.1f}")


if __name__ == "__main__":
    main()
