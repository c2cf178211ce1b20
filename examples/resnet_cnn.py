"""A small ResNet on the bundled 8x8 digits: train, evaluate, checkpoint, reload, evaluate again.

BasicBlocks (conv3x3-BatchNorm-ReLU-conv3x3-BatchNorm plus the identity, or a strided 1x1
conv + BatchNorm shortcut when the shape changes), SGD with Nesterov momentum under a
OneCycleLR (or cosine) schedule, ``model.train()`` / ``model.eval()`` switching so BatchNorm
uses batch statistics while training and its running statistics when evaluating. The trained
weights are saved with ``torch.save(model.state_dict(), path)``, loaded into a fresh model with
``load_state_dict(torch.load(path))``, and the reloaded model must give the same accuracy.
Written as the PyTorch script would be, with ``import munet as torch``.

    python examples/resnet_cnn.py --epochs 8 --batch-size 64 --lr 0.1 --seed 0
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import munet as torch
import munet.nn as nn
import munet.nn.functional as F
from munet import optim
from munet.datasets import load_digits
from munet.utils.data import DataLoader, TensorDataset, random_split

DEFAULT_CHECKPOINT = Path(tempfile.gettempdir()) / "munet_resnet_digits.safetensors"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="small ResNet on the bundled 8x8 digits")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1, help="peak learning rate")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--width", type=int, default=16, help="channels of the first stage (doubled per stage)")
    parser.add_argument("--scheduler", choices=("onecycle", "cosine"), default="onecycle")
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )
        else:
            self.downsample = None

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """Three stages of BasicBlocks: 8x8 -> 8x8 -> 4x4 -> 2x2, then global average pooling."""

    def __init__(self, width: int = 16, blocks_per_stage=(1, 1, 1), num_classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, width, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
        )
        stages, in_planes = [], width
        for i, blocks in enumerate(blocks_per_stage):
            planes, stride = width * 2**i, 1 if i == 0 else 2
            layers = [BasicBlock(in_planes, planes, stride)]
            layers += [BasicBlock(planes, planes) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*layers))
            in_planes = planes
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_planes, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        # Zero-init the last BatchNorm of each block, so every block starts as the identity.
        for m in self.modules():
            if isinstance(m, BasicBlock):
                nn.init.zeros_(m.bn2.weight)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def make_loaders(batch_size: int, seed: int):
    """80% train, 20% test; images get a channel axis: (N, 1, 8, 8)."""
    images, labels = load_digits()
    dataset = TensorDataset(images.unsqueeze(1), labels)
    n_test = len(dataset) // 5
    train_set, test_set = random_split(
        dataset, [len(dataset) - n_test, n_test], generator=torch.Generator().manual_seed(seed)
    )
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True)
    test_loader = DataLoader(test_set, batch_size=256)
    return train_loader, test_loader


def make_scheduler(name: str, optimizer, peak_lr: float, total_steps: int):
    if name == "onecycle":
        return optim.lr_scheduler.OneCycleLR(optimizer, max_lr=peak_lr, total_steps=total_steps)
    return optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)


def train_one_epoch(model, loader, optimizer, scheduler) -> tuple[float, float]:
    model.train()
    total_loss, correct, count = 0.0, 0, 0
    for x, y in loader:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        total_loss += loss.item() * len(y)
        correct += (logits.argmax(1) == y).sum().item()
        count += len(y)
    return total_loss / count, correct / count


@torch.no_grad()
def evaluate(model, loader) -> tuple[float, list[int]]:
    """Accuracy and the predicted classes, in loader order."""
    model.eval()
    predictions, correct, count = [], 0, 0
    for x, y in loader:
        predicted = model(x).argmax(1)
        predictions += predicted.tolist()
        correct += (predicted == y).sum().item()
        count += len(y)
    return correct / count, predictions


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    train_loader, test_loader = make_loaders(args.batch_size, args.seed)

    model = ResNet(args.width)
    optimizer = optim.SGD(
        model.parameters(), lr=args.lr, momentum=args.momentum, nesterov=True, weight_decay=args.weight_decay
    )
    scheduler = make_scheduler(args.scheduler, optimizer, args.lr, args.epochs * len(train_loader))
    print(f"{sum(p.numel() for p in model.parameters())} parameters, {len(train_loader.dataset)} training images")

    start = time.perf_counter()
    losses = []
    for epoch in range(1, args.epochs + 1):
        loss, train_accuracy = train_one_epoch(model, train_loader, optimizer, scheduler)
        losses.append(loss)
        test_accuracy, _ = evaluate(model, test_loader)
        print(
            f"epoch {epoch:3d}  train loss {loss:.4f}  train acc {train_accuracy:.4f}  "
            f"test acc {test_accuracy:.4f}  lr {scheduler.get_last_lr()[0]:.2e}"
        )
    seconds = time.perf_counter() - start
    test_accuracy, predictions = evaluate(model, test_loader)
    print(f"test accuracy {test_accuracy:.4f}  ({seconds:.1f} s)")

    torch.save(model.state_dict(), args.checkpoint)
    restored = ResNet(args.width)
    restored.load_state_dict(torch.load(args.checkpoint))
    restored_accuracy, restored_predictions = evaluate(restored, test_loader)
    print(f"reloaded from {args.checkpoint}: test accuracy {restored_accuracy:.4f}")
    if restored_predictions != predictions:
        raise RuntimeError("resnet_cnn: the reloaded model predicts differently from the trained one")
    return {
        "losses": losses,
        "test_accuracy": test_accuracy,
        "restored_accuracy": restored_accuracy,
        "seconds": seconds,
        "checkpoint": args.checkpoint,
    }


if __name__ == "__main__":
    main()
