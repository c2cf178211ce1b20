"""The ``munet`` command: ``munet demo`` (what ``make demo`` runs) and ``munet info``."""

from __future__ import annotations

import argparse
import sys
import time


def progress(iterable, total: int, label: str, width: int = 30):
    """Yield from ``iterable`` while drawing a one-line progress bar on stderr."""
    start = time.perf_counter()
    for i, item in enumerate(iterable, 1):
        yield item
        done = int(width * i / total)
        elapsed = time.perf_counter() - start
        bar = "#" * done + "-" * (width - done)
        sys.stderr.write(f"\r{label} [{bar}] {i}/{total} {elapsed:5.1f}s")
        sys.stderr.flush()
    sys.stderr.write("\n")


def demo(epochs: int = 40, batch_size: int = 64, lr: float = 0.1, seed: int = 0) -> float:
    """Train a 64-128-10 MLP on the bundled handwritten digits with hand-written SGD.

    Uses only the tensor API and autograd (the nn/optim stack is not needed): parameters are
    leaf tensors, ``loss.backward()`` fills their ``.grad``, and the update runs under
    ``no_grad``. Returns the test accuracy.
    """
    import munet
    import munet.nn.functional as F
    from munet.datasets import load_digits

    munet.manual_seed(seed)
    images, labels = load_digits()
    x = images.reshape(-1, 64)
    order = munet.randperm(x.shape[0])
    x, y = x[order], labels[order]
    n_test = 360
    x_train, y_train, x_test, y_test = x[n_test:], y[n_test:], x[:n_test], y[:n_test]
    mean, std = x_train.mean(0), x_train.std(0) + 1e-3
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std

    def init(fan_in: int, fan_out: int):
        bound = 1.0 / fan_in**0.5
        w = (munet.rand(fan_in, fan_out) * 2 - 1) * bound
        b = (munet.rand(fan_out) * 2 - 1) * bound
        return w.requires_grad_(), b.requires_grad_()

    w1, b1 = init(64, 128)
    w2, b2 = init(128, 10)
    params = [w1, b1, w2, b2]
    velocity = [munet.zeros_like(p) for p in params]

    def forward(inputs):
        return F.relu(inputs @ w1 + b1) @ w2 + b2

    n = x_train.shape[0]
    steps = (n + batch_size - 1) // batch_size
    print(f"MuNet {munet.__version__} demo: MLP 64-128-10 on {n} handwritten digits (8x8), {n_test} held out")
    loss_value = float("nan")
    for _ in progress(range(epochs), epochs, "training"):
        perm = munet.randperm(n)
        for step in range(steps):
            idx = perm[step * batch_size : (step + 1) * batch_size]
            loss = F.cross_entropy(forward(x_train[idx]), y_train[idx])
            for p in params:
                p.grad = None
            loss.backward()
            with munet.no_grad():
                for p, v in zip(params, velocity):
                    v.mul_(0.9).add_(p.grad)
                    p.sub_(lr * v)
            loss_value = loss.item()
    with munet.no_grad():
        predictions = forward(x_test).argmax(dim=1)
        accuracy = (predictions == y_test).float().mean().item()
        train_acc = (forward(x_train).argmax(dim=1) == y_train).float().mean().item()
    print(f"final training loss {loss_value:.4f}, train accuracy {train_acc:.1%}")
    print(f"test accuracy on {n_test} held-out digits: {accuracy:.1%}")
    return accuracy


def info() -> None:
    import munet

    print(f"MuNet {munet.__version__}")
    print("devices:")
    for d in munet.devices():
        print(f"  {d}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="munet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="train a small model on the bundled digits data")
    p_demo.add_argument("--epochs", type=int, default=40)
    sub.add_parser("info", help="version and devices")
    args = parser.parse_args(argv)
    if args.command == "demo":
        demo(epochs=args.epochs)
    elif args.command == "info":
        info()
    return 0


if __name__ == "__main__":
    sys.exit(main())
