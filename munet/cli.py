"""The ``munet`` command: ``munet demo`` (what ``make demo`` runs) and ``munet info``."""

from __future__ import annotations

import argparse
import sys


def info() -> None:
    import munet

    print(f"MuNet {munet.__version__}")
    print("devices:")
    for d in munet.devices():
        print(f"  {d}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="munet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="train a CNN on the bundled handwritten digits")
    p_demo.add_argument("--epochs", type=int, default=12)
    p_demo.add_argument("--seed", type=int, default=0)
    p_demo.add_argument("--out", default="demo-output", help="folder for the checkpoint and plot")
    sub.add_parser("info", help="version and devices")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from munet.demo import train

        train(epochs=args.epochs, seed=args.seed, out_dir=args.out)
    elif args.command == "info":
        info()
    return 0


if __name__ == "__main__":
    sys.exit(main())
