"""Padding layers: constant/zero, reflection, replication and circular padding via ``F.pad``.

``padding`` is an int (same on every side) or a tuple listed last dim first, like ``F.pad``.
"""

from __future__ import annotations

from munet.nn import functional as F
from munet.nn.module import Module

__all__ = [
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
]


def _padding_tuple(padding, n: int, layer: str) -> tuple:
    if isinstance(padding, (tuple, list)):
        if len(padding) != 2 * n:
            raise ValueError(f"{layer}: expected padding of {2 * n} values, got {len(padding)} ({tuple(padding)})")
        return tuple(padding)
    return (padding,) * (2 * n)


class _ConstantPadNd(Module):
    _n = 0

    def __init__(self, padding, value: float):
        super().__init__()
        self.padding = _padding_tuple(padding, self._n, type(self).__name__)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value``."""

    _n = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dims with ``value``."""

    _n = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dims with ``value``."""

    _n = 3


class _ZeroPad:
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPad, ConstantPad1d):
    """Pad the last dim with zeros."""


class ZeroPad2d(_ZeroPad, ConstantPad2d):
    """Pad the last 2 dims with zeros."""


class ZeroPad3d(_ZeroPad, ConstantPad3d):
    """Pad the last 3 dims with zeros."""


class _ModePadNd(Module):
    _n = 0
    _mode = ""

    def __init__(self, padding):
        super().__init__()
        self.padding = _padding_tuple(padding, self._n, type(self).__name__)

    def forward(self, input):
        n = self._n
        if input.ndim not in (n + 1, n + 2):
            raise ValueError(
                f"{type(self).__name__}: expected {n + 1}D or {n + 2}D input (got {input.ndim}D input of shape "
                f"{list(input.shape)})"
            )
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_ModePadNd):
    """Pad the last dim with its reflection (edge not repeated)."""

    _n, _mode = 1, "reflect"


class ReflectionPad2d(_ModePadNd):
    """Pad the last 2 dims with their reflection."""

    _n, _mode = 2, "reflect"


class ReflectionPad3d(_ModePadNd):
    """Pad the last 3 dims with their reflection."""

    _n, _mode = 3, "reflect"


class ReplicationPad1d(_ModePadNd):
    """Pad the last dim by repeating its edge values."""

    _n, _mode = 1, "replicate"


class ReplicationPad2d(_ModePadNd):
    """Pad the last 2 dims by repeating their edge values."""

    _n, _mode = 2, "replicate"


class ReplicationPad3d(_ModePadNd):
    """Pad the last 3 dims by repeating their edge values."""

    _n, _mode = 3, "replicate"


class CircularPad1d(_ModePadNd):
    """Pad the last dim by wrapping around."""

    _n, _mode = 1, "circular"


class CircularPad2d(_ModePadNd):
    """Pad the last 2 dims by wrapping around."""

    _n, _mode = 2, "circular"


class CircularPad3d(_ModePadNd):
    """Pad the last 3 dims by wrapping around."""

    _n, _mode = 3, "circular"
