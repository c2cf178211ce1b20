"""The binary parts of floating-point numbers: ``frexp`` (mantissa and exponent) and ``nextafter``
(the adjacent representable number), computed arithmetically from ``log2``, ``exp2`` and
``where``, with the exact power-of-two scalings IEEE arithmetic guarantees (no bit casts), so every
device runs them and the gradients are PyTorch's (``mantissa / x`` for ``frexp``; 1 for
``nextafter``'s ``input``, none for ``other``)."""

from __future__ import annotations

import math
from collections import namedtuple

from munet import _dtype as D
from munet.ops.creation import scalar_tensor
from munet.ops.elementwise import _out, where
from munet.ops.elementwise_math import exp2

__all__ = ["frexp", "nextafter"]
__tensor_methods__ = ["frexp", "nextafter", "nextafter_"]

FrexpResult = namedtuple("frexp", "mantissa exponent")


def _check_float(name: str, x):
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{name}: expected a floating-point tensor, got {x.dtype.name}")


def _scale(x, exponent):
    """``x * 2**exponent`` in two exact steps, so neither power of two overflows or underflows alone."""
    half = (exponent / 2).floor()
    return x * exp2(half) * exp2(exponent - half)


def _exponent(magnitude):
    """``e`` with ``magnitude = m * 2**e``, ``m`` in [0.5, 1), for finite positive ``magnitude`` (as float)."""
    e = magnitude.log2().floor() + 1
    m = _scale(magnitude, -e)
    return where(m >= 1, e + 1, where(m < 0.5, e - 1, e))


def frexp(input, *, out=None):
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent``, ``|mantissa|`` in [0.5, 1) and
    an int32 exponent; zeros, infinities and NaN give themselves and exponent 0."""
    _check_float("frexp", input)
    regular = input.isfinite() & (input != 0)
    e = _exponent(where(regular, input.abs().detach(), 1.0)).detach()
    e = where(regular, e, 0.0)
    mantissa = _scale(input, -e)
    result = FrexpResult(mantissa, e.to(D.int32))
    if out is not None:
        out[0].copy_(result.mantissa)
        out[1].copy_(result.exponent)
        return FrexpResult(*out)
    return result


def nextafter(input, other, *, out=None):
    """The representable number of ``input``'s dtype next to ``input`` in the direction of ``other``
    (``other`` where they are equal; NaN if either is NaN)."""
    _check_float("nextafter", input)
    other = other.to(input.dtype) if hasattr(other, "dtype") else other
    info = D.finfo(input.dtype)
    digits, lowest = round(-math.log2(info.eps)) + 1, round(math.log2(info.tiny)) + 1
    x, y = input.detach(), other.detach() if hasattr(other, "detach") else other
    magnitude = x.abs()
    finite = magnitude.isfinite() & (x != 0)
    e = _exponent(where(finite, magnitude, 1.0)).clamp_min(lowest)
    ulp = exp2(e - digits)
    toward_zero = (y > x) == (x < 0)
    exact_power = _scale(where(finite, magnitude, 1.0), -e) == 0.5
    step = where(toward_zero & exact_power & (e > lowest), ulp / 2, ulp)
    moved = x + where(y > x, step, -step)
    largest = scalar_tensor(info.max, dtype=input.dtype, device=input.device)  # a Python float would be float32
    moved = where(x.isinf(), where(x > 0, largest, -largest), moved)
    smallest = scalar_tensor(2.0 ** (lowest - digits), dtype=input.dtype, device=input.device)
    moved = where(x == 0, where(y > 0, smallest, -smallest), moved)
    moved = where(x == y, y, where(x.isnan() | (y != y), x + y, moved))
    return _out(where(x.isfinite(), moved + (input - x), moved), out)  # the gradient 1 to input


def nextafter_(self, other):
    return self.copy_(nextafter(self.clone(), other))  # the graph keeps the old values, not self
