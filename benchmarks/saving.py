"""Saved compiled programs: save and load time, and the loaded step against the compiled one.

    OPENBLAS_NUM_THREADS=1 python benchmarks/saving.py --device vulkan

Trains an AdamW MLP with ``munet.compile`` for three steps, saves it, loads it on the same
device, then times rounds of steps of the compiled and the loaded program interleaved (each
round ends with a host read of the loss) and prints the median ratio loaded / compiled.
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import munet
import munet.nn.functional as F
from munet import nn


def step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5, help="steps per round")
    args = parser.parse_args()
    device = args.device
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    model = model.to(device)
    opt = munet.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = munet.randn(64, 256).to(device), munet.randint(0, 10, (64,)).to(device)
    compiled = munet.compile(step)
    for _ in range(3):
        compiled(model, opt, x, y).item()
    path = Path(tempfile.mkdtemp()) / "step.munet"
    start = time.perf_counter()
    munet.save(compiled, path)
    save_ms = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    program = munet.load(path, device=device)
    load_ms = (time.perf_counter() - start) * 1e3
    program(x, y).item()

    def timed(fn) -> float:
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = fn()
        loss.item()
        return (time.perf_counter() - start) / args.steps

    ratios, compiled_s = [], []
    for _ in range(args.rounds):
        compiled_s.append(timed(lambda: compiled(model, opt, x, y)))
        ratios.append(timed(lambda: program(x, y)) / compiled_s[-1])
    print(
        f"{device}: file {path.stat().st_size / 2**20:.1f} MiB, save {save_ms:.0f} ms, load {load_ms:.0f} ms, "
        f"compiled step {statistics.median(compiled_s) * 1e3:.1f} ms, loaded / compiled median "
        f"{statistics.median(ratios):.3f} (rounds {[round(r, 3) for r in ratios]})"
    )


if __name__ == "__main__":
    main()
