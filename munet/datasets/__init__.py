"""Small real datasets that ship with MuNet, so examples and the demo need no download."""

from munet.datasets.digits import load_digits

__all__ = ["load_digits"]
