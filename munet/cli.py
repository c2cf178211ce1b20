"""The ``munet`` command: ``munet demo`` (what ``make demo`` runs) and ``munet info``."""

from __future__ import annotations

import argparse
import sys


def info() -> None:
    """Version, and each backend with its devices or the reason it has none."""
    import munet
    from munet._device import backend_status

    print(f"MuNet {munet.__version__} (NumPy {_version('numpy')}, ml_dtypes {_version('ml_dtypes')})")
    print("backends:")
    for type_name, lines, reason in backend_status():
        if lines:
            for line in lines:
                print(f"  {line}")
        else:
            print(f"  {type_name}: unavailable: {reason or 'no device found'}")


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="munet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="train a CNN on the bundled handwritten digits")
    p_demo.add_argument("--epochs", type=int, default=12)
    p_demo.add_argument("--seed", type=int, default=0)
    p_demo.add_argument("--out", default="demo-output", help="folder for the checkpoint and plot")
    sub.add_parser("info", help="version, backends and devices (and why an absent one is absent)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from munet.demo import train

        train(epochs=args.epochs, seed=args.seed, out_dir=args.out)
    elif args.command == "info":
        info()
    return 0


if __name__ == "__main__":
    sys.exit(main())
