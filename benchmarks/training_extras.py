"""ms/step of an MLP 784-1024-1024-10 AdamW step (batch 256) with and without the training extras
(GradScaler with unscale_, clip_grad_norm_, EMA update), eager and munet.compile, interleaved.

Run: OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/training_extras.py [repeats]
Prints the median of ``repeats`` (default 15) interleaved timed steps per mode after 3 warm-up steps.
"""

from __future__ import annotations

import statistics
import sys
import time

import munet
import munet.nn.functional as F
from munet import nn
from munet.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


def make():
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = munet.optim.AdamW(model.parameters(), lr=1e-3)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    return model, opt, munet.amp.GradScaler(growth_interval=2), ema


def plain(model, opt, scaler, ema, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def extras(model, opt, scaler, ema, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    ema.update_parameters(model)
    return loss


def main(repeats: int) -> None:
    munet.manual_seed(1)
    x, y = munet.randn(256, 784), munet.randint(0, 10, (256,))
    runs = {}
    for name, fn, compiled in (
        ("eager plain", plain, False),
        ("compiled plain", plain, True),
        ("eager extras", extras, False),
        ("compiled extras", extras, True),
    ):
        state = make()
        f = munet.compile(fn) if compiled else fn
        for _ in range(3):
            f(*state, x, y).item()
        runs[name] = (f, state)
    times: dict = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (f, state) in runs.items():
            start = time.perf_counter()
            f(*state, x, y).item()
            times[name].append((time.perf_counter() - start) * 1e3)
    med = {name: statistics.median(v) for name, v in times.items()}
    for name, ms in med.items():
        print(f"{name:16s} {ms:7.1f} ms/step")
    print(
        f"extras cost: eager {med['eager extras'] - med['eager plain']:+.1f} ms, "
        f"compiled {med['compiled extras'] - med['compiled plain']:+.1f} ms; eager/compiled: "
        f"plain {med['eager plain'] / med['compiled plain']:.2f}x, extras {med['eager extras'] / med['compiled extras']:.2f}x"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
