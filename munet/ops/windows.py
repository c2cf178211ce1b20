"""Window functions for spectral analysis (PyTorch's ``hann_window``, ``hamming_window``, ...).

Each is written with public ops over ``arange``. ``periodic=True`` (the default) gives the window
of length ``window_length + 1`` without its last sample, the form ``stft`` wants; ``False`` the
symmetric one. A length of 0 is empty, a length of 1 is ``[1.]``.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet.ops import creation, elementwise, elementwise_math, special
from munet.ops._utils import check_factory_options

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


def _window(op: str, window_length: int, periodic: bool, dtype, layout, device, requires_grad: bool, pin_memory: bool,
            shape):  # fmt: skip
    """``shape(n, denominator)`` over ``n = arange(window_length)``, the bookkeeping every window shares."""
    check_factory_options(op, layout=layout, pin_memory=pin_memory)
    dtype = D.get_default_dtype() if dtype is None else dtype
    if not isinstance(dtype, D.dtype) or not dtype.is_floating_point:
        raise RuntimeError(f"{op} expects floating point dtypes, got: {dtype!r}")
    if not isinstance(window_length, int) or window_length < 0:
        raise RuntimeError(f"{op} requires non-negative window length, got window_length={window_length}")
    if window_length <= 1:
        w = creation.ones(window_length, dtype=dtype, device=device, layout=layout)
    else:
        length = window_length + 1 if periodic else window_length
        n = creation.arange(length, dtype=dtype, device=device, layout=layout)
        w = shape(n, length - 1)
        if periodic:
            w = w[:-1]
    return creation.finish_factory(w.contiguous(), requires_grad)


def _cosine_sum(coefficients):
    """``sum_k (-1)^k a_k cos(2 pi k n / (N - 1))``: the Hann, Hamming and Blackman family."""

    def shape(n, denominator):
        w = coefficients[0] + 0 * n
        for k, a in enumerate(coefficients[1:], start=1):
            w = w + (-1) ** k * a * elementwise_math.cos(n * (2 * math.pi * k / denominator))
        return w

    return shape


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                requires_grad: bool = False, pin_memory: bool = False):  # fmt: skip
    """``0.5 - 0.5 cos(2 pi n / (N - 1))``."""
    return _window("hann_window", window_length, periodic, dtype, layout, device, requires_grad, pin_memory,
                   _cosine_sum((0.5, 0.5)))  # fmt: skip


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype=None, layout=None, device=None, requires_grad: bool = False, pin_memory: bool = False):  # fmt: skip
    """``alpha - beta cos(2 pi n / (N - 1))``."""
    return _window("hamming_window", window_length, periodic, dtype, layout, device, requires_grad, pin_memory,
                   _cosine_sum((alpha, beta)))  # fmt: skip


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False, pin_memory: bool = False):  # fmt: skip
    """``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``."""
    return _window("blackman_window", window_length, periodic, dtype, layout, device, requires_grad, pin_memory,
                   _cosine_sum((0.42, 0.5, 0.08)))  # fmt: skip


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False, pin_memory: bool = False):  # fmt: skip
    """The triangle ``1 - |2 n / (N - 1) - 1|``."""

    def shape(n, denominator):
        return 1 - elementwise.abs(n * (2 / denominator) - 1)

    return _window("bartlett_window", window_length, periodic, dtype, layout, device, requires_grad, pin_memory, shape)


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
                  device=None, requires_grad: bool = False, pin_memory: bool = False):  # fmt: skip
    """``I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)``, ``I0`` the modified Bessel function."""

    def shape(n, denominator):
        ratio = n * (2 / denominator) - 1
        argument = elementwise_math.sqrt((1 - ratio * ratio).clamp_min(0.0)) * beta
        return special.i0(argument) / special.i0(creation.full((), beta, dtype=n.dtype, device=n.device))

    return _window("kaiser_window", window_length, periodic, dtype, layout, device, requires_grad, pin_memory, shape)
