"""Quantized ONNX operators with exact integer arithmetic, as onnx's reference defines them.

``MatMulInteger`` multiplies ``a - a_zero_point`` by ``b - b_zero_point`` in int32 (MuNet's integer
matmul). A convolution's integer sums (``ConvInteger``, ``QLinearConv``) are computed in float64,
which holds every partial sum exactly (each product is below 2**16 in magnitude, so a sum is exact
below 2**37 terms), then rounded to int32. ``QuantizeLinear`` divides in the input's float type and
rounds half to even; ``QLinear*`` rescale the int32 sums in float64 as the reference does (NumPy
promotes int32 times float32 to float64) and saturate to the output type. ``DynamicQuantizeLinear``
is ONNX's function of these and is inlined. 8- and 16-bit integer types are supported; float8, 4-bit
and 2-bit types are refused (MuNet has no such dtypes).
"""

from __future__ import annotations

import munet
from munet.onnx import values as held
from munet.onnx.import_ops import convolve, rule

_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}


def _type_name(kind) -> str:
    return kind.name if isinstance(kind, held.Unsigned) else kind.np.name


def _range(call, kind) -> tuple:
    limits = _RANGES.get(_type_name(kind))
    if limits is None:
        raise call.unsupported(f"quantized type {_type_name(kind)}")
    return limits


def _per_axis(call, value, x, axis: int, block_size: int):
    """A scale or zero point broadcast against ``x``: a scalar as it is, a 1-d one along ``axis``, a
    blocked one (``block_size``) repeated over each block of ``axis``."""
    if value.ndim == 0 or value.numel() == 1 and not block_size:
        return value.reshape(())
    axis = axis % x.ndim
    if block_size:
        positions = munet.arange(x.shape[axis], device=value.device) // block_size
        return value.index_select(axis, positions)
    shape = [1] * x.ndim
    shape[axis] = -1
    return value.reshape(shape)


def _saturate(values, kind, call):
    low, high = _range(call, kind)
    return munet.clamp(values, low, high)


def _as_kind(values, kind):
    return kind.held(values.to(munet.int64)) if isinstance(kind, held.Unsigned) else values.to(kind)


def _zero_point_kind(call, i: int):
    """The held type of zero point input ``i`` (uint8 when absent)."""
    kind = call.dtypes.get(call.node.input[i]) if call.has(i) else munet.uint8
    return call.input(i).dtype if kind is None or kind is ... else kind


@rule("QuantizeLinear")
def _quantize_linear(call):
    x, scale = call.input(0), call.input(1)
    axis, block = call.attr("axis", 1), call.attr("block_size", 0)
    kind = call.output_kind() or _zero_point_kind(call, 2)
    precision = call.attr("precision", 0)
    if precision:
        compute = call.dtype_attr("precision")
        x, scale = x.to(compute), scale.to(compute)
    quotient = x / _per_axis(call, scale, x, axis, block)
    q = munet.clamp(munet.round(quotient), -(2.0**31), 2.0**31 - 1).to(munet.int32)
    if call.has(2):
        q = q + _per_axis(call, call.input(2).to(munet.int32), x, axis, block)
    return _as_kind(_saturate(q, kind, call), kind)


@rule("DequantizeLinear")
def _dequantize_linear(call):
    x, scale = call.input(0), call.input(1)
    axis, block = call.attr("axis", 1), call.attr("block_size", 0)
    dx = x.to(munet.float32)
    if call.has(2):
        dx = dx - _per_axis(call, call.input(2).to(munet.float32), x, axis, block)
    y = dx * _per_axis(call, scale, x, axis, block)
    kind = call.output_kind()
    return y.to(kind) if kind is not None else y.to(scale.dtype)


def _centered(call, i: int, zero_point: int, *, per_row: bool = False):
    """Input ``i`` minus zero point input ``zero_point`` (if given), in int32."""
    x = call.input(i).to(munet.int32)
    if not call.has(zero_point):
        return x
    zp = call.input(zero_point).to(munet.int32)
    if per_row and zp.ndim == 1 and zp.numel() > 1:
        zp = zp.reshape(-1, 1)  # a per-row zero point of the left operand
    return x - zp


@rule("MatMulInteger")
def _matmul_integer(call):
    return munet.matmul(_centered(call, 0, 2, per_row=True), _centered(call, 1, 3))


def _integer_conv(call, x, w, bias=None):
    """The exact int32 convolution of int32 ``x`` by int32 ``w`` (summed in float64, exact), plus ``bias``."""
    y = convolve(call, x.to(munet.float64), w.to(munet.float64), None)
    y = munet.round(y).to(munet.int32)
    if bias is not None:
        y = y + bias.to(munet.int32).reshape(1, -1, *([1] * (y.ndim - 2)))
    return y


def _weight_centered(call, w_index: int, zp_index: int):
    w = call.input(w_index).to(munet.int32)
    if not call.has(zp_index):
        return w
    zp = call.input(zp_index).to(munet.int32)
    if zp.ndim == 1 and zp.numel() == w.shape[0] and zp.numel() > 1:  # per output channel
        zp = zp.reshape(-1, *([1] * (w.ndim - 1)))
    return w - zp.reshape(zp.shape if zp.ndim else ())


@rule("ConvInteger")
def _conv_integer(call):
    return _integer_conv(call, _centered(call, 0, 2), _weight_centered(call, 1, 3))


def _requantize(call, sums, factor, zero_point_index: int, fallback_kind):
    """int32 ``sums`` times ``factor`` in float64, plus the zero point, rounded half to even and saturated."""
    kind = call.output_kind() or (_zero_point_kind(call, zero_point_index) if call.has(zero_point_index) else None)
    kind = kind or fallback_kind
    y = sums.to(munet.float64) * factor.to(munet.float64)
    if call.has(zero_point_index):
        y = y + call.input(zero_point_index).to(munet.float64)
    return _as_kind(_saturate(munet.round(y), kind, call), kind)


@rule("QLinearMatMul")
def _qlinear_matmul(call):
    sums = munet.matmul(_centered(call, 0, 2), _centered(call, 3, 5))
    factor = call.input(1) * call.input(4) / call.input(6)
    return _requantize(call, sums, factor, 7, call.dtypes.get(call.node.input[0]) or call.input(0).dtype)


@rule("QLinearConv")
def _qlinear_conv(call):
    x = _centered(call, 0, 2)
    w = _weight_centered(call, 3, 5)
    sums = _integer_conv(call, x, w, call.input(8))
    w_scale = call.input(4)
    if w_scale.numel() > 1:
        w_scale = w_scale.reshape(1, -1, *([1] * (sums.ndim - 2)))
    factor = call.input(1) * w_scale / call.input(6)
    return _requantize(call, sums, factor, 7, call.dtypes.get(call.node.input[0]) or call.input(0).dtype)
