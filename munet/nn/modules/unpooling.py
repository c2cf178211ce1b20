"""``nn.MaxUnpool1d/2d/3d``: place pooled maxima back at their indices, zeros elsewhere."""

from __future__ import annotations

from munet.nn import functional as F
from munet.nn.module import Module

__all__ = ["MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]


def _tuple(value, n: int) -> tuple:
    return (value,) * n if isinstance(value, int) else tuple(value)


class _MaxUnpoolNd(Module):
    _dims = 0

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        self.kernel_size = _tuple(kernel_size, self._dims)
        self.stride = _tuple(stride if stride is not None else kernel_size, self._dims)
        self.padding = _tuple(padding, self._dims)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input, indices, output_size=None):
        unpool = getattr(F, f"max_unpool{self._dims}d")
        return unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool1d(_MaxUnpoolNd):
    """The inverse of ``MaxPool1d(..., return_indices=True)`` on its maxima."""

    _dims = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The inverse of ``MaxPool2d(..., return_indices=True)`` on its maxima."""

    _dims = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The inverse of ``MaxPool3d(..., return_indices=True)`` on its maxima."""

    _dims = 3
