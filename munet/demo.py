"""The demo that ``make demo`` runs: a small CNN on the bundled handwritten digits.

Trains with the ordinary PyTorch-style stack (``nn`` layers, ``DataLoader``, ``AdamW``,
``OneCycleLR``), reports per-epoch validation accuracy with a progress bar (tqdm when it is
installed), then checks the held-out test accuracy, saves a checkpoint, reloads it into a
fresh model and confirms the reloaded model scores the same. Writes a loss/accuracy plot when
matplotlib is installed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import munet
import munet.nn as nn
import munet.nn.functional as F
from munet.datasets import load_digits
from munet.utils.data import DataLoader, TensorDataset


def build_model() -> nn.Module:
    """conv-BN-ReLU x2, max-pool, conv-BN-ReLU, then a linear classifier over 4x4 features."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.Flatten(),
        nn.Dropout(0.25),
        nn.Linear(64 * 4 * 4, 10),
    )


def split_digits(seed: int):
    """Shuffle once with ``seed`` and split 1797 digits into train (1257), val (180), test (360)."""
    images, labels = load_digits()
    images = (images.unsqueeze(1) - 0.5) / 0.5
    order = munet.randperm(images.shape[0], generator=munet.Generator().manual_seed(seed))
    images, labels = images[order], labels[order]
    return (images[:1257], labels[:1257]), (images[1257:1437], labels[1257:1437]), (images[1437:], labels[1437:])


@munet.no_grad()
def accuracy(model: nn.Module, images, labels) -> float:
    model.eval()
    predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


class _Bar:
    """tqdm when available, else a minimal one-line bar on stderr with the same postfix."""

    def __init__(self, total: int, desc: str):
        try:
            from tqdm import tqdm

            self._tqdm = tqdm(total=total, desc=desc, unit="batch", dynamic_ncols=True)
        except ImportError:
            self._tqdm = None
        self.total, self.desc, self.n, self.postfix = total, desc, 0, ""
        self.start = time.perf_counter()

    def update(self, postfix: str) -> None:
        self.n += 1
        if self._tqdm is not None:
            self._tqdm.set_postfix_str(postfix, refresh=False)
            self._tqdm.update(1)
            return
        done = int(30 * self.n / self.total)
        sys.stderr.write(f"\r{self.desc} [{'#' * done}{'-' * (30 - done)}] {self.n}/{self.total} {postfix}")
        sys.stderr.flush()

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        else:
            sys.stderr.write("\n")


def train(
    epochs: int = 12, batch_size: int = 64, lr: float = 4e-3, seed: int = 0, out_dir: str = "demo-output"
) -> dict:
    """Train, evaluate, checkpoint and reload; returns the measured figures."""
    munet.manual_seed(seed)
    (x_train, y_train), (x_val, y_val), (x_test, y_test) = split_digits(seed)
    loader = DataLoader(
        TensorDataset(x_train, y_train),
        batch_size=batch_size,
        shuffle=True,
        generator=munet.Generator().manual_seed(seed),
    )
    model = build_model()
    optimizer = munet.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    scheduler = munet.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=epochs * len(loader))
    n_params = sum(p.numel() for p in model.parameters())
    print(f"MuNet {munet.__version__} demo: CNN ({n_params:,} parameters) on handwritten digits, 8x8 pixels")
    print(f"train {len(x_train)}, validation {len(x_val)}, test {len(x_test)} images; {epochs} epochs")
    history = {"loss": [], "val_acc": []}
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        model.train()
        bar = _Bar(len(loader), f"epoch {epoch:2d}/{epochs}")
        seen, epoch_start, total_loss = 0, time.perf_counter(), 0.0
        for images, labels in loader:
            loss = F.cross_entropy(model(images), labels, label_smoothing=0.05)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            seen += len(labels)
            total_loss += loss.item() * len(labels)
            rate = seen / (time.perf_counter() - epoch_start)
            bar.update(f"loss={loss.item():.3f}, {rate:.0f} img/s")
        bar.close()
        val_acc = accuracy(model, x_val, y_val)
        history["loss"].append(total_loss / seen)
        history["val_acc"].append(val_acc)
        print(f"epoch {epoch:2d}: train loss {total_loss / seen:.4f}, validation accuracy {val_acc:.1%}")
    train_seconds = time.perf_counter() - start
    test_acc = accuracy(model, x_test, y_test)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = out / "digits_cnn.safetensors"
    munet.save(model.state_dict(), checkpoint)
    reloaded = build_model()
    reloaded.load_state_dict(munet.load(checkpoint))
    reloaded_acc = accuracy(reloaded, x_test, y_test)
    print(f"test accuracy {test_acc:.2%} on {len(x_test)} held-out digits after {train_seconds:.1f} s of training")
    print(
        f"checkpoint {checkpoint}: reloaded model scores {reloaded_acc:.2%} ({'same' if reloaded_acc == test_acc else 'DIFFERENT'})"
    )
    plot = _plot(history, out / "digits_cnn.png")
    if plot:
        print(f"plot of loss and validation accuracy: {plot}")
    if reloaded_acc != test_acc:
        raise RuntimeError("the reloaded checkpoint does not reproduce the trained model's accuracy")
    return {"test_acc": test_acc, "reloaded_acc": reloaded_acc, "seconds": train_seconds, "history": history}


def _plot(history: dict, path: Path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    epochs = range(1, len(history["loss"]) + 1)
    left.plot(epochs, history["loss"], marker="o")
    left.set(title="training loss", xlabel="epoch")
    right.plot(epochs, [100 * a for a in history["val_acc"]], marker="o", color="tab:green")
    right.set(title="validation accuracy (%)", xlabel="epoch")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
