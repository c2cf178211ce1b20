"""The binary parts of floating-point numbers: ``frexp`` (mantissa and exponent) and ``nextafter``
(the adjacent representable number), exact for every value, subnormals included.

Three elementwise primitives defined by the scalar ops of the same names (``munet/ops/_scalar.py``):
``frexp_mantissa``, ``frexp_exponent`` (the exponent as a float of the input's dtype, which
``frexp`` casts to int32) and ``nextafter``. Each renderer computes them with the C library's
functions or on the bits, never by float arithmetic on a value that may be subnormal (a Vulkan
driver may flush subnormals) or by inexact builtins (docs/vulkan.md, "Float accuracy"). float16
and bfloat16 compute in float32 on every backend, where ``frexp`` stays exact but float32's
``nextafter`` is not the 16-bit neighbour, so ``nextafter`` of a 16-bit tensor steps by the 16-bit
ulp from ``frexp``'s exponent in float32 arithmetic: exact, as the sum has at most 12 significant
bits (bfloat16 subnormals are float32 subnormals, exact wherever float32 keeps subnormals; vulkan
holds no bfloat16). The gradients are PyTorch's: ``grad / 2**e`` for ``frexp``'s mantissa, 1 for
``nextafter``'s ``input``, none for ``other``.
"""

from __future__ import annotations

import math
from collections import namedtuple

from munet import _dtype as D
from munet.ops._registry import apply, define
from munet.ops._scalar import binary, unary
from munet.ops._utils import reduce_grad
from munet.ops.creation import scalar_tensor
from munet.ops.elementwise import _binary_meta, _out, _unary_meta, where
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


def _mantissa_backward(ctx, grad):
    return _scale(grad, -apply(frexp_exponent_op, ctx.saved_tensor("self")))


frexp_mantissa_op = define("frexp_mantissa", meta=_unary_meta, backward=_mantissa_backward, saves=("self",),
                           formula=unary("frexp_mantissa"))  # fmt: skip
frexp_exponent_op = define("frexp_exponent", meta=_unary_meta, formula=unary("frexp_exponent"))
nextafter_op = define(
    "nextafter",
    inputs=("self", "other"),
    meta=_binary_meta,
    backward=lambda ctx, grad: (reduce_grad(grad, ctx.input_shapes[0]), None),
    formula=binary("nextafter"),
)


def frexp(input, *, out=None):
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent``, ``|mantissa|`` in [0.5, 1) and
    an int32 exponent; zeros, infinities and NaN give themselves and exponent 0."""
    _check_float("frexp", input)
    result = FrexpResult(apply(frexp_mantissa_op, input), apply(frexp_exponent_op, input.detach()).to(D.int32))
    if out is not None:
        out[0].copy_(result.mantissa)
        out[1].copy_(result.exponent)
        return FrexpResult(*out)
    return result


def _narrow_nextafter(x, y, dtype):
    """``nextafter`` of float16/bfloat16 values ``x``, ``y`` (float32 tensors) in ``dtype``, as float32."""
    info = D.finfo(dtype)
    digits, lowest = round(-math.log2(info.eps)) + 1, round(math.log2(info.tiny)) + 1
    e = apply(frexp_exponent_op, x).clamp_min(lowest)
    ulp = exp2(e - digits)
    toward_zero = (y > x) == (x < 0)
    exact_power = apply(frexp_mantissa_op, x).abs() == 0.5
    step = where(toward_zero & exact_power & (e > lowest), ulp / 2, ulp)
    moved = x + where(y > x, step, -step)
    moved = where(x.isinf(), where(x > 0, float(info.max), -float(info.max)), moved)
    smallest = 2.0 ** (lowest - digits)
    moved = where(x == 0, where(y > 0, smallest, -smallest), moved)
    return where(x == y, y, where(x.isnan() | y.isnan(), x + y, moved))


def nextafter(input, other, *, out=None):
    """The representable number of ``input``'s dtype next to ``input`` in the direction of ``other``
    (``other`` where they are equal; NaN if either is NaN)."""
    _check_float("nextafter", input)
    other = other.to(input.dtype) if hasattr(other, "dtype") else scalar_tensor(other, dtype=input.dtype,
                                                                                device=input.device)  # fmt: skip
    if input.dtype not in (D.float16, D.bfloat16):
        return _out(apply(nextafter_op, input, other), out)
    x = input.detach()
    moved = _narrow_nextafter(x.float(), other.detach().float(), input.dtype).to(input.dtype)
    return _out(where(x.isfinite(), moved - (x - input), moved), out)  # gradient 1 to input; keeps -0.0


def nextafter_(self, other):
    return self.copy_(nextafter(self.clone(), other))  # the graph keeps the old values, not self
