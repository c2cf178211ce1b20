"""Train an MLP on the bundled 8x8 handwritten digits, written as a plain PyTorch script.

The only MuNet-specific lines are the imports: ``import munet as torch`` and friends. Everything
else (Sequential, DataLoader, AdamW, a cosine learning-rate schedule, train/eval modes,
``no_grad`` evaluation) is what the same PyTorch script would say.

    python examples/train_mlp.py --epochs 20 --batch-size 64 --lr 3e-3 --seed 0
"""

from __future__ import annotations

import argparse
import time

import munet as torch
import munet.nn as nn
import munet.nn.functional as F
from munet import optim
from munet.datasets import load_digits
from munet.utils.data import DataLoader, TensorDataset, random_split


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="MLP on the bundled 8x8 digits")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--weight-decay", type=float, default=1e-2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def make_model(hidden: int) -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, hidden),
        nn.ReLU(),
        nn.Dropout(0.1),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, 10),
    )


def make_loaders(batch_size: int, seed: int):
    """70% train, 15% validation, 15% test, split with a seeded generator."""
    images, labels = load_digits()
    dataset = TensorDataset(images, labels)
    n_val = n_test = len(dataset) * 15 // 100
    n_train = len(dataset) - n_val - n_test
    train_set, val_set, test_set = random_split(
        dataset, [n_train, n_val, n_test], generator=torch.Generator().manual_seed(seed)
    )
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=256)
    test_loader = DataLoader(test_set, batch_size=256)
    return train_loader, val_loader, test_loader


def train_one_epoch(model, loader, optimizer, scheduler) -> float:
    model.train()
    total, count = 0.0, 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        total += loss.item() * len(y)
        count += len(y)
    return total / count


@torch.no_grad()
def evaluate(model, loader) -> float:
    model.eval()
    correct, count = 0, 0
    for x, y in loader:
        correct += (model(x).argmax(dim=1) == y).sum().item()
        count += len(y)
    return correct / count


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    train_loader, val_loader, test_loader = make_loaders(args.batch_size, args.seed)

    model = make_model(args.hidden)
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * len(train_loader))
    print(model)
    print(f"{sum(p.numel() for p in model.parameters())} parameters, {len(train_loader.dataset)} training images")

    start = time.perf_counter()
    losses, val_accuracies = [], []
    for epoch in range(1, args.epochs + 1):
        losses.append(train_one_epoch(model, train_loader, optimizer, scheduler))
        val_accuracies.append(evaluate(model, val_loader))
        print(
            f"epoch {epoch:3d}  train loss {losses[-1]:.4f}  val acc {val_accuracies[-1]:.4f}  "
            f"lr {scheduler.get_last_lr()[0]:.2e}"
        )
    test_accuracy = evaluate(model, test_loader)
    seconds = time.perf_counter() - start
    print(f"test accuracy {test_accuracy:.4f}  ({seconds:.1f} s)")
    return {"losses": losses, "val_accuracies": val_accuracies, "test_accuracy": test_accuracy, "seconds": seconds}


if __name__ == "__main__":
    main()
