"""Pooling layers: max, average, adaptive and power-average pooling in 1, 2 and 3 dims.

Each layer stores its arguments like PyTorch (``stride`` defaults to ``kernel_size``) and
calls the matching ``munet.nn.functional`` op.
"""

from __future__ import annotations

from munet.nn import functional as F
from munet.nn.module import Module

__all__ = [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "FractionalMaxPool2d",
    "FractionalMaxPool3d",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
]


def _single(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class _MaxPoolNd(Module):
    _pool = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return type(self)._pool(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
            f", dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    """Max over sliding windows of ``(N, C, L)`` or ``(C, L)`` inputs."""

    _pool = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """Max over sliding windows of ``(N, C, H, W)`` or ``(C, H, W)`` inputs."""

    _pool = staticmethod(F.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """Max over sliding windows of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs."""

    _pool = staticmethod(F.max_pool3d)


class _AvgPoolNd(Module):
    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """Mean over sliding windows of ``(N, C, L)`` or ``(C, L)`` inputs."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class _AvgPool23(_AvgPoolNd):
    _pool = None

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return type(self)._pool(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class AvgPool2d(_AvgPool23):
    """Mean over sliding windows of ``(N, C, H, W)`` or ``(C, H, W)`` inputs."""

    _pool = staticmethod(F.avg_pool2d)


class AvgPool3d(_AvgPool23):
    """Mean over sliding windows of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs."""

    _pool = staticmethod(F.avg_pool3d)


class _AdaptiveAvgPoolNd(Module):
    _pool = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return type(self)._pool(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Average pooling to a fixed output length."""

    _pool = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Average pooling to a fixed ``(H, W)`` (``None`` keeps the input size)."""

    _pool = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Average pooling to a fixed ``(D, H, W)``."""

    _pool = staticmethod(F.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    _pool = None

    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):
        return type(self)._pool(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max pooling to a fixed output length."""

    _pool = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max pooling to a fixed ``(H, W)``."""

    _pool = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max pooling to a fixed ``(D, H, W)``."""

    _pool = staticmethod(F.adaptive_max_pool3d)


class _LPPoolNd(Module):
    _pool = None

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return type(self)._pool(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool1d(_LPPoolNd):
    """Power-average pooling ``(sum x^p)^(1/p)`` over 1-D windows."""

    _pool = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """Power-average pooling ``(sum x^p)^(1/p)`` over 2-D windows."""

    _pool = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """Power-average pooling ``(sum x^p)^(1/p)`` over 3-D windows."""

    _pool = staticmethod(F.lp_pool3d)


class _FractionalMaxPoolNd(Module):
    _dims = 0

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples=None) -> None:  # fmt: skip
        super().__init__()
        name = type(self).__name__
        n = self._dims
        self.kernel_size = (kernel_size,) * n if isinstance(kernel_size, int) else tuple(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        as_tuple = lambda v: None if v is None else ((v,) * n if isinstance(v, (int, float)) else tuple(v))  # noqa: E731
        self.output_size = as_tuple(output_size)
        self.output_ratio = as_tuple(output_ratio)
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        pool = getattr(F, f"fractional_max_pool{self._dims}d")
        return pool(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                    _random_samples=self._random_samples)  # fmt: skip


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling over (N, C, H, W) or (C, H, W) inputs (see ``F.fractional_max_pool2d``)."""

    _dims = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling over (N, C, T, H, W) or (C, T, H, W) inputs (see ``F.fractional_max_pool3d``)."""

    _dims = 3
