"""How each ONNX operator runs as MuNet ops: ``RULES[op_type](call) -> output or list of outputs``.

A rule reads its inputs through the :class:`Call` (``call.input(i)``: a MuNet tensor or None for an
absent optional input; ``call.host(i)``: a NumPy array, for inputs that must be known on the host
such as a Reshape's target shape) and attributes with ``call.attr(name, default)``, and returns
MuNet tensors (or NumPy arrays for values computed on the host, such as ``Shape``). Nodes whose
inputs are all host values run on the host (program.py), so shape arithmetic never reaches the
device. Element types are made the declared ONNX types after each node (program.py).
"""

from __future__ import annotations

import math

import numpy as np

import munet
import munet.nn.functional as F
from munet.onnx import values as held

RULES: dict = {}


class UnsupportedError(NotImplementedError):
    """An ONNX operator, attribute or type MuNet does not run; the message names the operator, its domain and opset."""


def rule(*op_types):
    def register(fn):
        for op_type in op_types:
            RULES[op_type] = fn
        return fn

    return register


# elementwise -----------------------------------------------------------------------------------------

_UNARY = {
    "Abs": munet.abs,
    "Acos": munet.acos,
    "Acosh": munet.acosh,
    "Asin": munet.asin,
    "Asinh": munet.asinh,
    "Atan": munet.atan,
    "Atanh": munet.atanh,
    "Ceil": munet.ceil,
    "Cos": munet.cos,
    "Cosh": munet.cosh,
    "Erf": munet.erf,
    "Exp": munet.exp,
    "Floor": munet.floor,
    "Log": munet.log,
    "Neg": munet.neg,
    "Reciprocal": munet.reciprocal,
    "Relu": F.relu,
    "Sigmoid": munet.sigmoid,
    "Sign": munet.sign,
    "Sin": munet.sin,
    "Sinh": munet.sinh,
    "Sqrt": munet.sqrt,
    "Tan": munet.tan,
    "Tanh": munet.tanh,
    "Not": munet.logical_not,
    "IsNaN": munet.isnan,
    "Round": munet.round,
    "Softsign": F.softsign,
    "Mish": F.mish,
    "HardSwish": F.hardswish,
    "BitwiseNot": munet.bitwise_not,
}

_BINARY = {
    "Add": munet.add,
    "Sub": munet.sub,
    "Mul": munet.mul,
    "And": munet.logical_and,
    "Or": munet.logical_or,
    "Xor": munet.logical_xor,
    "BitwiseAnd": munet.bitwise_and,
    "BitwiseOr": munet.bitwise_or,
    "BitwiseXor": munet.bitwise_xor,
}


def _unary(fn):
    return lambda call: fn(call.input(0))


def _binary(fn):
    return lambda call: fn(call.input(0), call.input(1))


# orderings: uint64 (held as its bits in int64) is compared with its sign bit flipped
_ORDER = {"Less": munet.lt, "LessOrEqual": munet.le, "Greater": munet.gt, "GreaterOrEqual": munet.ge}


def _u64(call) -> bool:
    return any(call.unsigned(i) == 64 for i in range(call.n_inputs))


@rule(*_ORDER)
def _order(call):
    a, b = call.input(0), call.input(1)
    if _u64(call):
        a, b = held.flip(a), held.flip(b)
    return _ORDER[call.op_type](a, b)


for _op_type, _fn in _UNARY.items():
    RULES[_op_type] = _unary(_fn)
for _op_type, _fn in _BINARY.items():
    RULES[_op_type] = _binary(_fn)


@rule("Div")
def _div(call):
    a, b = call.input(0), call.input(1)
    if a.dtype.is_floating_point:
        return a / b
    if _u64(call):
        return held.divide(a, b)[0]
    return munet.div(a, b, rounding_mode="trunc")  # ONNX integer division truncates


@rule("Pow")
def _pow(call):
    base, exponent = call.input(0), call.input(1)
    if not base.dtype.is_floating_point:
        return munet.pow(base, exponent)
    if call.unsigned(1) == 64:
        return munet.pow(base, held.to_float(exponent, base.dtype))
    return munet.pow(base, exponent.to(base.dtype))


@rule("Mod")
def _mod(call):
    a, b = call.input(0), call.input(1)
    if _u64(call):
        return held.divide(a, b)[1]
    return munet.fmod(a, b) if call.attr("fmod", 0) else munet.remainder(a, b)


@rule("BitShift")
def _bit_shift(call):
    a, b = call.input(0), call.input(1)
    if call.attr("direction") == "LEFT":
        return munet.bitwise_left_shift(a, b)
    if _u64(call):
        return held.logical_shift_right(a, b)
    return munet.bitwise_right_shift(a, b)


@rule("Max", "Min", "Sum", "Mean")
def _variadic(call):
    combine = {"Max": munet.maximum, "Min": munet.minimum, "Sum": munet.add, "Mean": munet.add}[call.op_type]
    operands = [call.input(i) for i in range(call.n_inputs)]
    ordered = call.op_type in ("Max", "Min") and _u64(call)
    if ordered:
        operands = [held.flip(x) for x in operands]
    out = operands[0]
    for x in operands[1:]:
        out = combine(out, x)
    if ordered:
        return held.flip(out)
    if call.op_type == "Mean":
        out = out / len(operands)
    return out if len(operands) > 1 else out.clone()


@rule("IsInf")
def _isinf(call):
    x = call.input(0)
    positive, negative = call.attr("detect_positive", 1), call.attr("detect_negative", 1)
    if positive and negative:
        return munet.isinf(x)
    if positive:
        return munet.isposinf(x)
    if negative:
        return munet.isneginf(x)
    return munet.zeros_like(x, dtype=munet.bool)


@rule("Where")
def _where(call):
    return munet.where(call.input(0), call.input(1), call.input(2))


@rule("Cast")
def _cast(call):
    return _cast_to(call, call.output_kind() or call.dtype_attr("to"))


@rule("CastLike")
def _cast_like(call):
    return _cast_to(call, call.output_kind() or call.input(1).dtype)


def _cast_to(call, kind):
    """Input 0 as ``kind`` (a MuNet dtype or an unsigned type, values.py); from uint64 to a float type
    values with the top bit set gain 2**64; to an unsigned type the held form wraps modulo 2**bits."""
    x = call.input(0)
    if isinstance(kind, held.Unsigned):
        if x.dtype.is_floating_point:
            x = munet.trunc(x)
        return kind.held(x.to(munet.int64))
    if kind is held.STRING or isinstance(kind, held.HostKind):
        raise call.unsupported(f"a cast to {kind!r}")
    if call.unsigned(0) == 64 and kind.is_floating_point:
        return held.to_float(x, kind)
    return x.to(kind)


@rule("Clip")
def _clip(call):
    x = call.input(0)
    if call.opset < 11:
        lo, hi = call.attr("min", None), call.attr("max", None)
    else:
        lo, hi = call.input(1), call.input(2)
    if lo is None and hi is None:
        return x.clone()
    return munet.clamp(x, lo, hi)


# activations -------------------------------------------------------------------------------------------


@rule("LeakyRelu")
def _leaky_relu(call):
    return F.leaky_relu(call.input(0), call.attr("alpha", 0.01))


@rule("Elu")
def _elu(call):
    return F.elu(call.input(0), call.attr("alpha", 1.0))


@rule("Celu")
def _celu(call):
    return F.celu(call.input(0), call.attr("alpha", 1.0))


@rule("Selu")
def _selu(call):
    x = call.input(0)
    alpha, gamma = call.attr("alpha", 1.67326319217681884765625), call.attr("gamma", 1.05070102214813232421875)
    return gamma * munet.where(x > 0, x, alpha * (munet.exp(x) - 1))


@rule("HardSigmoid")
def _hard_sigmoid(call):
    x = call.input(0)
    return munet.clamp(call.attr("alpha", 0.2) * x + call.attr("beta", 0.5), 0.0, 1.0)


@rule("Softplus")
def _softplus(call):
    x = call.input(0)
    return munet.log1p(munet.exp(-munet.abs(x))) + F.relu(x)  # log(1 + exp(x)) without overflow


@rule("PRelu")
def _prelu(call):
    x, slope = call.input(0), call.input(1)
    return munet.where(x < 0, x * slope, x)


@rule("ThresholdedRelu")
def _thresholded_relu(call):
    x = call.input(0)
    return munet.where(x > call.attr("alpha", 1.0), x, munet.zeros_like(x))


@rule("Shrink")
def _shrink(call):
    x = call.input(0)
    bias, lambd = call.attr("bias", 0.0), call.attr("lambd", 0.5)
    zero = munet.zeros_like(x)
    return munet.where(x < -lambd, x + bias, munet.where(x > lambd, x - bias, zero))


@rule("Gelu")
def _gelu(call):
    return F.gelu(call.input(0), approximate=call.attr("approximate", "none"))


@rule("Softmax", "LogSoftmax")
def _softmax(call):
    x = call.input(0)
    fn = F.softmax if call.op_type == "Softmax" else F.log_softmax
    if call.opset >= 13:
        return fn(x, dim=call.attr("axis", -1))
    axis = call.attr("axis", 1) % max(x.ndim, 1)  # before opset 13: over all axes from `axis` on
    shape = tuple(x.shape)
    flat = x.reshape(math.prod(shape[:axis]), math.prod(shape[axis:]))
    return fn(flat, dim=1).reshape(shape)


@rule("Dropout")
def _dropout(call):
    x = call.input(0)
    ratio = float(call.scalar(1)) if call.has(1) else call.attr("ratio", 0.5)
    training = bool(call.scalar(2)) if call.has(2) else False
    out = F.dropout(x, ratio, training=True) if training and ratio > 0 else x.clone()
    if call.n_outputs > 1:
        mask = (out != 0) if training and ratio > 0 else munet.ones_like(x, dtype=munet.bool)
        return [out, mask]
    return out


# linear algebra, convolution, normalization ------------------------------------------------------------


@rule("MatMul")
def _matmul(call):
    return munet.matmul(call.input(0), call.input(1))


@rule("Gemm")
def _gemm(call):
    a, b, c = call.input(0), call.input(1), call.input(2)
    if call.attr("transA", 0):
        a = a.t()
    if call.attr("transB", 0):
        b = b.t()
    alpha, beta = call.attr("alpha", 1.0), call.attr("beta", 1.0)
    out = a @ b
    if alpha != 1.0:
        out = out * alpha
    if c is not None:
        out = out + (c * beta if beta != 1.0 else c)
    return out


@rule("Einsum")
def _einsum(call):
    return munet.einsum(call.attr("equation"), *(call.input(i) for i in range(call.n_inputs)))


def _spatial_pads(call, x, kernel, strides, dilations) -> list:
    """ONNX ``pads`` (begins then ends) from ``pads`` or ``auto_pad``."""
    n = len(kernel)
    auto = call.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        return list(call.attr("pads", [0] * (2 * n)))
    if auto == "VALID":
        return [0] * (2 * n)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise call.unsupported(f"auto_pad={auto!r}")
    begins, ends = [], []
    for size, k, s, d in zip(x.shape[2:], kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else large)
        ends.append(large if auto == "SAME_UPPER" else small)
    return begins + ends


def _symmetric(x, pads: list, value: float):
    """``x`` padded where begin and end pads differ, and the symmetric padding left to the op."""
    n = len(pads) // 2
    begins, ends = pads[:n], pads[n:]
    if begins == ends:
        return x, begins
    common = [min(b, e) for b, e in zip(begins, ends)]
    extra = []
    for b, e, c in reversed(list(zip(begins, ends, common))):
        extra += [b - c, e - c]
    return F.pad(x, extra, value=value), common


@rule("Conv")
def _conv(call):
    return convolve(call, call.input(0), call.input(1), call.input(2))


def convolve(call, x, w, b):
    """The convolution a Conv-like node (Conv, ConvInteger, QLinearConv) describes, of ``x`` by ``w``."""
    n = x.ndim - 2
    kernel = list(w.shape[2:])
    strides = list(call.attr("strides", [1] * n))
    dilations = list(call.attr("dilations", [1] * n))
    x, padding = _symmetric(x, _spatial_pads(call, x, kernel, strides, dilations), 0.0)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}.get(n)
    if fn is None:
        raise call.unsupported(f"a {n}-d convolution")
    return fn(x, w, b, stride=strides, padding=padding, dilation=dilations, groups=call.attr("group", 1))


@rule("ConvTranspose")
def _conv_transpose(call):
    """Computed without padding, then cropped to the ONNX padding (explicit, from ``output_shape``, or
    ``auto_pad``), which may differ at the two ends; the bias is added last."""
    x, w, b = call.input(0), call.input(1), call.input(2)
    n = x.ndim - 2
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}.get(n)
    if fn is None:
        raise call.unsupported(f"a {n}-d transposed convolution")
    strides = list(call.attr("strides", [1] * n))
    dilations = list(call.attr("dilations", [1] * n))
    output_padding = list(call.attr("output_padding", [0] * n))
    kernel = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dilations)]
    full = [(size - 1) * s + k for size, s, k in zip(x.shape[2:], strides, kernel)]
    begins, ends = _transposed_pads(call, n, full, output_padding, x, strides)
    y = fn(x, w, None, stride=strides, padding=0, output_padding=0, groups=call.attr("group", 1), dilation=dilations)
    sizes = [f + p - bb - e for f, p, bb, e in zip(full, output_padding, begins, ends)]
    # negative pads (an output_shape larger than the full result) add zeros, as output_padding does
    grow = [max(-bb, 0) for bb in begins] + [p + max(-e, 0) for p, e in zip(output_padding, ends)]
    if any(grow):
        y = _pad_spatial(y, grow, 0.0)
    y = y[(slice(None), slice(None), *(slice(max(bb, 0), max(bb, 0) + m) for bb, m in zip(begins, sizes)))]
    if b is not None:
        y = y + b.reshape(1, -1, *([1] * n))
    return y


def _transposed_pads(call, n, full, output_padding, x, strides) -> tuple:
    shape = call.attr("output_shape", None)
    auto = call.attr("auto_pad", "NOTSET")
    if shape is None and auto in ("NOTSET", "", "VALID"):
        pads = list(call.attr("pads", [0] * (2 * n))) if auto != "VALID" else [0] * (2 * n)
        return pads[:n], pads[n:]
    if shape is None:
        shape = [size * s for size, s in zip(x.shape[2:], strides)]
    shape = list(shape)[-n:]
    total = [f + p - m for f, p, m in zip(full, output_padding, shape)]
    if auto == "SAME_LOWER" or auto in ("NOTSET", ""):  # an output_shape without auto_pad: the extra row goes first
        return [t - t // 2 for t in total], [t // 2 for t in total]
    return [t // 2 for t in total], [t - t // 2 for t in total]


@rule("BatchNormalization")
def _batch_norm(call):
    x, scale, bias, mean, var = (call.input(i) for i in range(5))
    eps = call.attr("epsilon", 1e-5)
    if not call.attr("training_mode", 0):
        return F.batch_norm(x, mean, var, scale, bias, False, 0.0, eps)
    # training: the batch's statistics normalize; the running ones move toward them by 1 - momentum
    dims = (0, *range(2, x.ndim))
    shape = (1, -1, *([1] * (x.ndim - 2)))
    batch_mean = x.mean(dims)
    batch_var = ((x - batch_mean.reshape(shape)) ** 2).mean(dims)
    y = (x - batch_mean.reshape(shape)) * munet.rsqrt(batch_var.reshape(shape) + eps) * scale.reshape(
        shape
    ) + bias.reshape(shape)
    momentum = call.attr("momentum", 0.9)
    running_mean = mean * momentum + batch_mean * (1 - momentum)
    running_var = var * momentum + batch_var * (1 - momentum)
    return [y, running_mean, running_var][: call.n_outputs]


@rule("InstanceNormalization")
def _instance_norm(call):
    return F.instance_norm(call.input(0), weight=call.input(1), bias=call.input(2), eps=call.attr("epsilon", 1e-5))


@rule("LayerNormalization")
def _layer_norm(call):
    x, scale, bias = call.input(0), call.input(1), call.input(2)
    axis = call.attr("axis", -1) % x.ndim
    dims = tuple(range(axis, x.ndim))
    eps = call.attr("epsilon", 1e-5)
    mean = x.mean(dims, keepdim=True)
    centered = x - mean
    rstd = munet.rsqrt((centered * centered).mean(dims, keepdim=True) + eps)
    y = centered * rstd * scale
    if bias is not None:
        y = y + bias
    return [y, mean, rstd][: call.n_outputs]


# pooling ---------------------------------------------------------------------------------------------------


def _pool_args(call, x):
    kernel = list(call.attr("kernel_shape"))
    n = len(kernel)
    strides = list(call.attr("strides", [1] * n))
    dilations = list(call.attr("dilations", [1] * n))
    pads = _spatial_pads(call, x, kernel, strides, dilations)
    return kernel, strides, dilations, pads


@rule("MaxPool")
def _max_pool(call):
    x = call.input(0)
    if not x.dtype.is_floating_point:  # integers up to 32 bits are exact in float64; the maximum is one of them
        if x.dtype.itemsize > 4:
            raise call.unsupported(f"a {x.dtype} input")
        result = _max_pool_float(call, x.to(munet.float64))
        return [result[0].to(x.dtype), *result[1:]] if isinstance(result, list) else result.to(x.dtype)
    return _max_pool_float(call, x)


def _max_pool_float(call, x):
    kernel, strides, dilations, pads = _pool_args(call, x)
    x, padding = _symmetric(x, pads, float("-inf"))
    if any(2 * p > (k - 1) * d + 1 for p, k, d in zip(padding, kernel, dilations)):  # more than PyTorch pads
        x, padding = _pad_spatial(x, padding + padding, float("-inf")), [0] * len(kernel)
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}.get(len(kernel))
    if fn is None:
        raise call.unsupported(f"a {len(kernel)}-d pooling")
    ceil_mode = bool(call.attr("ceil_mode", 0))
    if call.n_outputs == 1:
        return fn(x, kernel, strides, padding, dilations, ceil_mode)
    values, indices = fn(x, kernel, strides, padding, dilations, ceil_mode, return_indices=True)
    if pads[: len(kernel)] != padding or tuple(x.shape) != tuple(call.shape(0)):
        raise call.unsupported("the Indices output with asymmetric padding")
    spatial = list(x.shape[2:])
    if call.attr("storage_order", 0):  # column-major positions within the plane
        rest, indices = indices, munet.zeros_like(indices)
        for d in reversed(range(len(spatial))):
            indices = indices + munet.remainder(rest, spatial[d]) * math.prod(spatial[:d])
            rest = munet.div(rest, spatial[d], rounding_mode="floor")
    plane = math.prod(spatial)
    first = munet.arange(x.shape[0] * x.shape[1], device=x.device) * plane
    first = first.reshape(x.shape[0], x.shape[1], *([1] * len(kernel)))
    return [values, indices + first]  # ONNX counts indices over the whole tensor, PyTorch within a plane


@rule("AveragePool")
def _average_pool(call):
    """Padding is explicit (zeros); with count_include_pad=0 the window sums are divided by how many
    elements of the unpadded input each window holds."""
    x = call.input(0)
    kernel, strides, dilations, pads = _pool_args(call, x)
    fn = _average_pool_fn(call, kernel, dilations)
    ceil_mode = bool(call.attr("ceil_mode", 0))
    padded = _pad_spatial(x, pads, 0.0)
    pooled = fn(padded, kernel, strides, 0, ceil_mode, True)
    if call.attr("count_include_pad", 0) or not any(pads):
        if not ceil_mode:
            return pooled
    inside = _pad_spatial(munet.ones((1, 1, *x.shape[2:]), dtype=x.dtype, device=x.device), pads, 0.0)
    if call.attr("count_include_pad", 0):  # windows past the padded input (ceil_mode) count what they cover
        inside = munet.ones_like(padded[:1, :1])
    return _crop_windows(
        pooled / fn(inside, kernel, strides, 0, ceil_mode, True), x, kernel, strides, dilations, pads, ceil_mode
    )


def _crop_windows(pooled, x, kernel, strides, dilations, pads, ceil_mode: bool):
    """Drop ceil-mode windows that start in the end padding (ONNX and PyTorch do not make them; with the
    padding made explicit, the pooling op would)."""
    n = len(kernel)
    sizes = []
    for size, k, s, d, b, e in zip(x.shape[2:], kernel, strides, dilations, pads[:n], pads[n:]):
        span = size + b + e - d * (k - 1) - 1
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= size + b:
            out -= 1
        sizes.append(out)
    if list(pooled.shape[2:]) == sizes:
        return pooled
    return pooled[(slice(None), slice(None), *(slice(0, m) for m in sizes))]


def _average_pool_fn(call, kernel, dilations):
    """F.avg_pool1d/2d/3d for ``kernel`` (called without padding), or for dilated windows, which have
    no pooling op, a depthwise convolution with a constant kernel."""
    n = len(kernel)
    if n not in (1, 2, 3):
        raise call.unsupported(f"a {n}-d pooling")
    if all(d == 1 for d in dilations):
        return {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]

    def dilated(x, kernel, strides, padding, ceil_mode, count_include_pad):
        span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
        if ceil_mode:  # zeros at the end so the last partial window exists (divisors see them as outside)
            extra = [(-(size - k) % s) for size, k, s in zip(x.shape[2:], span, strides)]
            x = _pad_spatial(x, [0] * n + extra, 0.0)
        weight = munet.full((x.shape[1], 1, *kernel), 1.0 / math.prod(kernel), dtype=x.dtype, device=x.device)
        return conv(x, weight, None, stride=strides, dilation=dilations, groups=x.shape[1])

    return dilated


def _pad_spatial(x, pads: list, value: float):
    n = len(pads) // 2
    if not any(pads):
        return x
    torch_pad = []
    for b, e in reversed(list(zip(pads[:n], pads[n:]))):
        torch_pad += [b, e]
    return F.pad(x, torch_pad, value=value)


@rule("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(call):
    x = call.input(0)
    dims = tuple(range(2, x.ndim))
    if call.op_type == "GlobalAveragePool":
        return x.mean(dims, keepdim=True)
    return x.amax(dims, keepdim=True)


# reductions -----------------------------------------------------------------------------------------------


def _reduce_axes(call, x):
    """The axes of a Reduce* node (an input from opset 18, 13 for ReduceSum; an attribute before), or all."""
    since = 13 if call.op_type == "ReduceSum" else 18
    if call.opset >= since:
        axes = call.host(1) if call.has(1) else None
    else:
        axes = call.attr("axes", None)
    if axes is None or len(axes) == 0:
        if call.attr("noop_with_empty_axes", 0):
            return None
        return tuple(range(x.ndim))
    return tuple(sorted(int(a) % max(x.ndim, 1) for a in np.asarray(axes).reshape(-1)))


_REDUCE = {
    "ReduceSum": lambda x, d, k: munet.sum(x, d, keepdim=k),
    "ReduceMean": lambda x, d, k: munet.mean(x, d, keepdim=k),
    "ReduceMax": lambda x, d, k: munet.amax(x, d, keepdim=k),
    "ReduceMin": lambda x, d, k: munet.amin(x, d, keepdim=k),
    "ReduceProd": lambda x, d, k: munet.prod(x, d[0], keepdim=k) if len(d) == 1 else _prod(x, d, k),
    "ReduceL1": lambda x, d, k: munet.sum(munet.abs(x), d, keepdim=k),
    "ReduceL2": lambda x, d, k: munet.sqrt(munet.sum(x * x, d, keepdim=k)),
    "ReduceLogSum": lambda x, d, k: munet.log(munet.sum(x, d, keepdim=k)),
    "ReduceLogSumExp": lambda x, d, k: munet.logsumexp(x, d, keepdim=k),
    "ReduceSumSquare": lambda x, d, k: munet.sum(x * x, d, keepdim=k),
}


def _prod(x, dims, keepdim):
    for d in sorted(dims, reverse=True):
        x = munet.prod(x, d, keepdim=keepdim)
    return x


@rule(*_REDUCE)
def _reduce(call):
    x = call.input(0)
    dims = _reduce_axes(call, x)
    if dims is None:
        return x.clone()
    if x.ndim == 0:
        return x.clone()
    keepdim = bool(call.attr("keepdims", 1))
    if x.dtype is munet.bool:
        x = x.to(munet.int64)
    if call.op_type in ("ReduceMax", "ReduceMin") and any(x.shape[d] == 0 for d in dims):
        return _empty_extremum(call.op_type, x, dims, keepdim)
    return _REDUCE[call.op_type](x, dims, keepdim)


def _empty_extremum(op_type, x, dims, keepdim):
    """ReduceMax/ReduceMin over an empty set: the identity of the reduction (-inf/+inf, or the integer
    type's lowest/highest value), as ONNX defines it."""
    shape = [1 if i in dims else n for i, n in enumerate(x.shape) if keepdim or i not in dims]
    info = np.finfo(x.dtype.np) if x.is_floating_point() else np.iinfo(x.dtype.np)
    if x.is_floating_point():
        value = -np.inf if op_type == "ReduceMax" else np.inf
    else:
        value = info.min if op_type == "ReduceMax" else info.max
    return munet.full(shape, value, dtype=x.dtype, device=x.device)


@rule("ArgMax", "ArgMin")
def _arg_extremum(call):
    x = call.input(0)
    axis = call.attr("axis", 0) % max(x.ndim, 1)
    keepdim = bool(call.attr("keepdims", 1))
    fn = munet.argmax if call.op_type == "ArgMax" else munet.argmin
    if call.attr("select_last_index", 0):
        flipped = fn(munet.flip(x, (axis,)), axis, keepdim)
        return (x.shape[axis] - 1) - flipped
    return fn(x, axis, keepdim)


@rule("CumSum", "CumProd")
def _cumulative(call):
    x = call.input(0)
    axis = int(call.scalar(1)) % max(x.ndim, 1)
    reverse, exclusive = call.attr("reverse", 0), call.attr("exclusive", 0)
    if reverse:
        x = munet.flip(x, (axis,))
    if call.op_type == "CumSum":
        out = munet.cumsum(x, axis)
        out = out - x if exclusive else out
    else:
        out = munet.cumprod(x, axis)
        if exclusive:  # shifted by one, starting from the product of nothing
            ones = munet.ones_like(x.narrow(axis, 0, 1))
            out = munet.cat([ones, out.narrow(axis, 0, x.shape[axis] - 1)], axis)
    if reverse:
        out = munet.flip(out, (axis,))
    return out.to(call.input(0).dtype)


@rule("TopK")
def _topk(call):
    x = call.input(0)
    k = int(call.scalar(1)) if call.opset >= 10 else call.attr("k")
    axis = call.attr("axis", -1)
    values, indices = munet.topk(x, k, dim=axis, largest=bool(call.attr("largest", 1)), sorted=True)
    return [values, indices]


# shapes and movement --------------------------------------------------------------------------------------


@rule("Shape")
def _shape(call):
    shape = np.asarray(call.shape(0), dtype=np.int64)
    start, end = call.attr("start", 0), call.attr("end", None)
    return shape[start:end] if end is not None else shape[start:]


@rule("Size")
def _size(call):
    return np.asarray(math.prod(call.shape(0)), dtype=np.int64)


@rule("Constant")
def _constant(call):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        value = call.attr(key, None)
        if value is not None:
            if key == "value":
                return value
            dtype = np.float32 if "float" in key else np.int64
            return np.asarray(value, dtype=dtype)
    raise call.unsupported("a Constant without value, value_float(s) or value_int(s) (strings, sparse values)")


@rule("ConstantOfShape")
def _constant_of_shape(call):
    shape = tuple(int(s) for s in np.asarray(call.host(0)).reshape(-1))
    value = call.attr("value", None)
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return np.full(shape, value[0], dtype=value.dtype)


@rule("Range")
def _range(call):
    dtype = np.asarray(call.host(0)).dtype
    return np.arange(call.scalar(0), call.scalar(1), call.scalar(2)).astype(dtype)


@rule("Reshape")
def _reshape(call):
    x = call.input(0)
    shape = [int(s) for s in np.asarray(call.host(1)).reshape(-1)]
    if not call.attr("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


@rule("Flatten")
def _flatten(call):
    x = call.input(0)
    axis = call.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@rule("Transpose")
def _transpose(call):
    x = call.input(0)
    perm = call.attr("perm", None)
    perm = list(range(x.ndim))[::-1] if perm is None else list(perm)
    return x.permute(perm) if x.ndim else x.clone()


def _axes_input_or_attr(call, since: int = 13):
    if call.opset >= since:
        return [int(a) for a in np.asarray(call.host(1)).reshape(-1)] if call.has(1) else None
    axes = call.attr("axes", None)
    return None if axes is None else list(axes)


@rule("Squeeze")
def _squeeze(call):
    x = call.input(0)
    axes = _axes_input_or_attr(call)
    if axes is None:
        return x.reshape([s for s in x.shape if s != 1])
    axes = {a % x.ndim for a in axes}
    return x.reshape([s for i, s in enumerate(x.shape) if i not in axes])


@rule("Unsqueeze")
def _unsqueeze(call):
    x = call.input(0)
    axes = _axes_input_or_attr(call)
    rank = x.ndim + len(axes)
    axes = sorted(a % rank for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return x.reshape(shape)


@rule("Concat")
def _concat(call):
    tensors = [call.input(i) for i in range(call.n_inputs)]
    return munet.cat(tensors, call.attr("axis"))


@rule("Split")
def _split(call):
    x = call.input(0)
    axis = call.attr("axis", 0) % x.ndim
    if call.opset >= 13:
        sizes = [int(s) for s in np.asarray(call.host(1)).reshape(-1)] if call.has(1) else None
    else:
        sizes = call.attr("split", None)
    if sizes is None:
        parts = call.attr("num_outputs", call.n_outputs)
        size = -(-x.shape[axis] // parts)
        sizes = [min(size, x.shape[axis] - i * size) for i in range(parts)]
    return list(munet.split(x, list(sizes), axis))


@rule("Slice")
def _slice(call):
    x = call.input(0)
    if call.opset >= 10:
        starts, ends = (np.asarray(call.host(i)).reshape(-1) for i in (1, 2))
        axes = np.asarray(call.host(3)).reshape(-1) if call.has(3) else np.arange(len(starts))
        steps = np.asarray(call.host(4)).reshape(-1) if call.has(4) else np.ones(len(starts), np.int64)
    else:
        starts, ends = np.asarray(call.attr("starts")), np.asarray(call.attr("ends"))
        axes = np.asarray(call.attr("axes", list(range(len(starts)))))
        steps = np.ones(len(starts), np.int64)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        x = _slice_axis(x, int(start), int(end), int(axis) % x.ndim, int(step))
    return x if x is not call.input(0) else x.clone()


def _slice_axis(x, start: int, end: int, axis: int, step: int):
    """ONNX Slice along one axis: negative bounds count from the end, then clamp (to -1 for a negative step's end)."""
    n = x.shape[axis]
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), n), min(max(end, 0), n)
        index = [slice(None)] * axis + [slice(start, end, step)]
        return x[tuple(index)]
    start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
    picked = list(range(start, end, step))
    return x.index_select(axis, munet.tensor(picked, dtype=munet.int64, device=x.device))


def _wrap_indices(indices, n: int):
    return munet.where(indices < 0, indices + n, indices)


@rule("Gather")
def _gather(call):
    x, indices = call.input(0), call.input(1).to(munet.int64)
    axis = call.attr("axis", 0) % x.ndim
    indices = _wrap_indices(indices, x.shape[axis])
    picked = x.index_select(axis, indices.reshape(-1))
    return picked.reshape(tuple(x.shape[:axis]) + tuple(indices.shape) + tuple(x.shape[axis + 1 :]))


@rule("GatherElements")
def _gather_elements(call):
    x, indices = call.input(0), call.input(1).to(munet.int64)
    axis = call.attr("axis", 0) % x.ndim
    return munet.gather(x, axis, _wrap_indices(indices, x.shape[axis]))


@rule("GatherND")
def _gather_nd(call):
    """With ``batch_dims`` b, the first b axes of data and indices pair up: they are flattened into one
    batch axis whose position leads each index tuple."""
    x, indices = call.input(0), call.input(1).to(munet.int64)
    b = call.attr("batch_dims", 0)
    batch = tuple(x.shape[:b])
    flat_x = x.reshape(math.prod(batch), *x.shape[b:])
    flat_indices = indices.reshape(math.prod(batch), *indices.shape[b:])
    k = indices.shape[-1]
    parts = [_wrap_indices(flat_indices[..., i], flat_x.shape[1 + i]) for i in range(k)]
    rows = munet.arange(flat_x.shape[0], device=x.device).reshape(-1, *([1] * (flat_indices.ndim - 2)))
    picked = flat_x[(rows.expand(*flat_indices.shape[:-1]), *parts)]
    return picked.reshape(*batch, *picked.shape[1:])


@rule("Det")
def _det(call):
    return munet.linalg.det(call.input(0))


@rule("Upsample")
def _upsample(call):
    """Resize's forerunner (opsets 7-9): output index i samples input i / scale, rounded down for nearest."""
    if call.opset < 9:
        raise call.unsupported("Upsample before opset 9 (scales as an attribute)")
    mode = call.attr("mode", "nearest")
    attrs = {"mode": mode, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return call.delegate("Resize", [call.value(0), None, call.value(1)], attrs, opset=11)


@rule("ScatterElements", "Scatter")
def _scatter_elements(call):
    x, indices, updates = call.input(0), call.input(1).to(munet.int64), call.input(2)
    axis = call.attr("axis", 0) % x.ndim
    indices = _wrap_indices(indices, x.shape[axis])
    reduction = call.attr("reduction", "none")
    if reduction == "none":
        return x.scatter(axis, indices, updates)
    if reduction == "add":
        return x.scatter_add(axis, indices, updates)
    reduce = {"mul": "prod", "max": "amax", "min": "amin"}.get(reduction)
    if reduce is None:
        raise call.unsupported(f"reduction={reduction!r}")
    return x.scatter_reduce(axis, indices, updates, reduce, include_self=True)


@rule("ScatterND")
def _scatter_nd(call):
    x, indices, updates = call.input(0), call.input(1).to(munet.int64), call.input(2)
    k = indices.shape[-1]
    rows = math.prod(x.shape[:k])
    linear = munet.zeros(indices.shape[:-1], dtype=munet.int64, device=x.device)
    for i in range(k):
        linear = linear * x.shape[i] + _wrap_indices(indices[..., i], x.shape[i])
    flat = x.reshape(rows, -1)
    values = updates.reshape(-1, flat.shape[1])
    index = linear.reshape(-1, 1).expand(values.shape[0], flat.shape[1])
    reduction = call.attr("reduction", "none")
    if reduction == "none":
        return flat.scatter(0, index, values).reshape(x.shape)
    if reduction == "add":
        return flat.scatter_add(0, index, values).reshape(x.shape)
    reduce = {"mul": "prod", "max": "amax", "min": "amin"}.get(reduction)
    if reduce is None:
        raise call.unsupported(f"reduction={reduction!r}")
    return flat.scatter_reduce(0, index, values, reduce, include_self=True).reshape(x.shape)


@rule("Expand")
def _expand(call):
    x = call.input(0)
    shape = [int(s) for s in np.asarray(call.host(1)).reshape(-1)]
    return munet.broadcast_to(x, np.broadcast_shapes(tuple(x.shape), tuple(shape))).clone()


@rule("Tile")
def _tile(call):
    repeats = [int(r) for r in np.asarray(call.host(1)).reshape(-1)]
    return call.input(0).repeat(*repeats)


@rule("Pad")
def _pad(call):
    x = call.input(0)
    mode = call.attr("mode", "constant")
    if call.opset >= 11:
        pads = [int(p) for p in np.asarray(call.host(1)).reshape(-1)]
        value = call.host(2) if call.has(2) else 0.0
        axes = [int(a) % x.ndim for a in np.asarray(call.host(3)).reshape(-1)] if call.has(3) else list(range(x.ndim))
    else:
        pads, value, axes = list(call.attr("pads")), call.attr("value", 0.0), list(range(x.ndim))
    begins, ends = [0] * x.ndim, [0] * x.ndim
    for i, a in enumerate(axes):
        begins[a], ends[a] = pads[i], pads[i + len(axes)]
    last = max([a for a in range(x.ndim) if begins[a] or ends[a]], default=-1)
    first = min([a for a in range(x.ndim) if begins[a] or ends[a]], default=x.ndim)
    if last < 0:
        return x.clone()
    torch_pad = []
    for a in range(x.ndim - 1, first - 1, -1):
        torch_pad += [begins[a], ends[a]]
    modes = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}
    if mode not in modes:
        raise call.unsupported(f"mode={mode!r}")
    if mode == "constant":
        return F.pad(x, torch_pad, value=float(np.asarray(value).reshape(-1)[0]) if np.size(value) else 0.0)
    return F.pad(x, torch_pad, mode=modes[mode])


@rule("Trilu")
def _trilu(call):
    x = call.input(0)
    k = int(call.scalar(1)) if call.has(1) else 0
    return munet.triu(x, k) if call.attr("upper", 1) else munet.tril(x, k)


@rule("OneHot")
def _one_hot(call):
    indices, values = call.input(0), call.input(2)
    depth = int(call.scalar(1))
    axis = call.attr("axis", -1) % (indices.ndim + 1)
    indices = _wrap_indices(indices.to(munet.int64), depth)
    shape = [1] * (indices.ndim + 1)
    shape[axis] = depth
    classes = munet.arange(depth, device=indices.device).reshape(shape)
    hot = indices.unsqueeze(axis) == classes
    return munet.where(hot, values[1], values[0])


@rule("NonZero")
def _nonzero(call):
    return munet.nonzero(call.input(0)).t().contiguous()


@rule("Resize")
def _resize(call):
    """Separable resampling: along each resized axis, every output element is a weighted sum of a few
    input elements (1 for nearest, 2 for linear, 4 for cubic; with ``antialias`` a downsampling linear or
    cubic kernel is widened by 1/scale) whose positions and weights are computed on the host from the
    sizes and the coordinate transformation."""
    x = call.input(0)
    if call.attr("antialias", 0) and call.attr("mode", "nearest") == "nearest":
        raise call.unsupported("antialias=1 with mode='nearest'")
    axes = [int(a) % x.ndim for a in call.attr("axes", list(range(x.ndim)))]
    sizes, scales = _resize_targets(call, x, axes)
    roi = np.asarray(call.host(1), np.float64).reshape(-1) if call.has(1) and np.size(call.host(1)) else None
    out = x
    for k, axis in enumerate(axes):
        n, m, scale = x.shape[axis], sizes[k], scales[k]
        if (
            n == m
            and scale == 1.0
            and call.attr("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize"
        ):
            continue
        roi_k = (roi[k], roi[k + len(axes)]) if roi is not None and len(roi) == 2 * len(axes) else (0.0, 1.0)
        positions = _source_positions(call, n, m, scale, roi_k)
        out = _resample_axis(call, out, axis, n, positions, scale)
    return out if out is not x else x.clone()


def _resize_targets(call, x, axes) -> tuple:
    if call.has(3) and np.size(call.host(3)):
        wanted = [int(v) for v in np.asarray(call.host(3)).reshape(-1)]
        ratios = [w / x.shape[a] for w, a in zip(wanted, axes)]
        policy = call.attr("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            return wanted, ratios
        ratio = min(ratios) if policy == "not_larger" else max(ratios)
        return [int(np.floor(x.shape[a] * ratio + 0.5)) for a in axes], [ratio] * len(axes)
    scales = [float(v) for v in np.asarray(call.host(2), np.float64).reshape(-1)]
    return [int(np.floor(x.shape[a] * sc)) for a, sc in zip(axes, scales)], scales


def _source_positions(call, n: int, m: int, scale: float, roi) -> np.ndarray:
    """Where each output index samples the input, in input coordinates."""
    i = np.arange(m, dtype=np.float64)
    mode = call.attr("coordinate_transformation_mode", "half_pixel")
    if mode == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if m > 1 else np.zeros(m)
    if mode == "align_corners":
        return i * (n - 1) / (m - 1) if m > 1 else np.zeros(m)
    if mode == "asymmetric":
        return i / scale
    if mode == "half_pixel_symmetric":
        adjustment = m / (scale * n)
        return n / 2 * (1 - adjustment) + (i + 0.5) / scale - 0.5
    if mode == "tf_crop_and_resize":
        start, end = roi
        if m > 1:
            return start * (n - 1) + i * (end - start) * (n - 1) / (m - 1)
        return np.full(m, 0.5 * (start + end) * (n - 1))
    raise call.unsupported(f"coordinate_transformation_mode={mode!r}")


def _taps(call, n: int, positions: np.ndarray, scale: float) -> tuple:
    """``(indices, weights)``, each of shape (taps, m)."""
    mode = call.attr("mode", "nearest")
    if call.attr("antialias", 0):
        return _antialias_taps(call, n, positions, min(scale, 1.0))
    if mode == "nearest":
        rounding = call.attr("nearest_mode", "round_prefer_floor")
        pick = {
            "round_prefer_floor": lambda p: np.ceil(p - 0.5),
            "round_prefer_ceil": lambda p: np.floor(p + 0.5),
            "floor": np.floor,
            "ceil": np.ceil,
        }.get(rounding)
        if pick is None:
            raise call.unsupported(f"nearest_mode={rounding!r}")
        index = np.clip(pick(positions), 0, n - 1)
        return index[None].astype(np.int64), np.ones((1, len(positions)))
    if mode == "linear":
        clamped = np.clip(positions, 0, n - 1)
        low = np.floor(clamped)
        frac = clamped - low
        index = np.stack([low, np.minimum(low + 1, n - 1)])
        return index.astype(np.int64), np.stack([1 - frac, frac])
    if mode == "cubic":
        a = call.attr("cubic_coeff_a", -0.75)
        low = np.floor(positions)
        frac = positions - low
        offsets = np.arange(-1, 3)[:, None]
        distance = np.abs(frac[None] - offsets)
        weights = np.where(
            distance <= 1,
            ((a + 2) * distance - (a + 3)) * distance**2 + 1,
            np.where(distance < 2, ((a * distance - 5 * a) * distance + 8 * a) * distance - 4 * a, 0.0),
        )
        index = low[None] + offsets
        if call.attr("exclude_outside", 0):
            weights = np.where((index >= 0) & (index <= n - 1), weights, 0.0)
            weights = weights / weights.sum(0, keepdims=True)
        return np.clip(index, 0, n - 1).astype(np.int64), weights
    raise call.unsupported(f"mode={mode!r}")


def _antialias_taps(call, n: int, positions: np.ndarray, scale: float) -> tuple:
    """onnx's antialiased linear or cubic taps: the kernel stretched by 1/scale (``scale`` <= 1), its
    weights normalized to sum to 1; the taps nearest each position, ties to the left (the left tap of
    an integer position is the one before it), at edge-clamped indices."""
    left = np.ceil(positions) - 1
    ratio = positions - left
    if call.attr("mode") == "linear":
        first = int(np.floor(-1 / scale) + 1)
    else:
        first = int(np.floor(-2 / scale) + 1)
    offsets = np.arange(first, 2 - first)[:, None]
    x = np.abs(scale * (offsets - ratio[None]))
    if call.attr("mode") == "linear":
        weights = np.clip(1 - x, 0, 1)
    else:
        a = call.attr("cubic_coeff_a", -0.75)
        weights = np.where(
            x <= 1,
            (a + 2) * x**3 - (a + 3) * x**2 + 1,
            np.where(x < 2, a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a, 0.0),
        )
    weights = weights / weights.sum(0, keepdims=True)
    index = left[None] + offsets
    if call.attr("exclude_outside", 0):
        weights = np.where((index >= 0) & (index <= n - 1), weights, 0.0)
        weights = weights / weights.sum(0, keepdims=True)
    return np.clip(index, 0, n - 1).astype(np.int64), weights


def _resample_axis(call, x, axis: int, n: int, positions: np.ndarray, scale: float):
    indices, weights = _taps(call, n, positions, scale)
    shape = [1] * x.ndim
    shape[axis] = len(positions)
    out = None
    for index, weight in zip(indices, weights):
        picked = x.index_select(axis, munet.from_numpy(index).to(x.device))
        if call.attr("mode", "nearest") != "nearest":
            picked = picked * munet.from_numpy(weight.reshape(shape)).to(x.dtype).to(x.device)
        out = picked if out is None else out + picked
    if call.attr("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize":
        outside = (positions < 0) | (positions > n - 1)
        if outside.any():
            mask = munet.from_numpy(outside.reshape(shape)).to(x.device)
            out = munet.where(
                mask, munet.full((), call.attr("extrapolation_value", 0.0), dtype=out.dtype, device=x.device), out
            )
    return out


# Inputs a rule reads on the host (call.host): an initializer feeding only these is a constant, not a Parameter
HOST_INPUTS = {
    "Reshape": {1},
    "Expand": {1},
    "Tile": {1},
    "Slice": {1, 2, 3, 4},
    "Squeeze": {1},
    "Unsqueeze": {1},
    "Split": {1},
    "TopK": {1},
    "CumSum": {1},
    "Trilu": {1},
    "OneHot": {1},
    "Pad": {1, 2, 3},
    "Col2Im": {1, 2},
    "MaxUnpool": {2},
    "Resize": {1, 2, 3},
    "Upsample": {1},
    "Dropout": {1, 2},
    "ConstantOfShape": {0},
    "Range": {0, 1, 2},
    **{op_type: {1} for op_type in _REDUCE},
}


@rule("Hardmax")
def _hardmax(call):
    x = call.input(0)
    axis = call.attr("axis", -1 if call.opset >= 13 else 1) % x.ndim
    if call.opset < 13:
        raise call.unsupported("opset < 13 (Hardmax over flattened axes)")
    first = munet.argmax(x, axis, keepdim=True)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    positions = munet.arange(x.shape[axis], device=x.device).reshape(shape)
    return (positions == first).to(x.dtype)


@rule("LpNormalization")
def _lp_normalization(call):
    x = call.input(0)
    p, axis = call.attr("p", 2), call.attr("axis", -1)
    if p not in (1, 2):
        raise call.unsupported(f"p={p}")
    norm = munet.abs(x).sum(axis, keepdim=True) if p == 1 else munet.sqrt((x * x).sum(axis, keepdim=True))
    return x / (norm + (norm == 0).to(norm.dtype))  # a zero vector stays zero (onnx's reference), not 0/0


@rule("EyeLike")
def _eye_like(call):
    rows, cols = call.shape(0)
    dtype = call.dtype_attr("dtype") if "dtype" in call.node.attrs else None
    array = np.eye(rows, cols, call.attr("k", 0))
    if dtype is None:
        return munet.from_numpy(array).to(call.input(0).dtype).to(call.device)
    return array.astype(dtype.np)


@rule("Compress")
def _compress(call):
    x = call.input(0)
    keep = np.flatnonzero(np.asarray(call.host(1)).astype(bool))
    axis = call.attr("axis", None)
    if axis is None:
        x, axis = x.reshape(-1), 0
    index = munet.from_numpy(keep.astype(np.int64)).to(x.device)
    return x.index_select(axis % x.ndim, index)


@rule("LRN")
def _lrn(call):
    x = call.input(0)
    return F.local_response_norm(
        x, call.attr("size"), call.attr("alpha", 1e-4), call.attr("beta", 0.75), call.attr("bias", 1.0)
    )


@rule("If")
def _if(call):
    """The branch the condition selects runs; a condition computed from tensor data is read on the
    host (under munet.compile that ends the graph)."""
    condition = bool(call.scalar(0))
    return call.run_subgraph(call.attr("then_branch" if condition else "else_branch"))


@rule("LpPool")
def _lp_pool(call):
    """``(sum over the window of |x|^p)^(1/p)``: an average pool of ``|x|^p`` times the window size."""
    x = call.input(0)
    kernel, strides, dilations, pads = _pool_args(call, x)
    fn = _average_pool_fn(call, kernel, dilations)
    p = float(call.attr("p", 2))
    ceil_mode = bool(call.attr("ceil_mode", 0))
    powered = _pad_spatial(munet.abs(x) ** p, pads, 0.0)
    summed = fn(powered, kernel, strides, 0, ceil_mode, True) * math.prod(kernel)
    return _crop_windows(summed ** (1.0 / p), x, kernel, strides, dilations, pads, ceil_mode)


@rule("ReverseSequence")
def _reverse_sequence(call):
    x = call.input(0)
    lengths = [int(v) for v in np.asarray(call.host(1)).reshape(-1)]
    batch_axis, time_axis = call.attr("batch_axis", 1), call.attr("time_axis", 0)
    steps = x.shape[time_axis]
    index = np.tile(np.arange(steps), (len(lengths), 1))
    for b, length in enumerate(lengths):
        index[b, :length] = index[b, :length][::-1]
    shape = [1] * x.ndim
    shape[batch_axis], shape[time_axis] = len(lengths), steps
    order = index if batch_axis < time_axis else index.T
    positions = munet.from_numpy(np.ascontiguousarray(order).reshape(shape)).to(x.device).expand(*x.shape)
    return munet.gather(x, time_axis, positions)


@rule("Scan")
def _scan(call):
    """The body runs once per step of the scan inputs' axis (a host loop: the trip count is a shape)."""
    if call.opset < 9:
        return _scan_batched(call)
    body = call.attr("body")
    m = call.attr("num_scan_inputs")
    n = call.n_inputs - m
    states = [call.input(i) for i in range(n)]
    scans = [call.input(i) for i in range(n, call.n_inputs)]
    in_axes = [a % x.ndim for a, x in zip(call.attr("scan_input_axes", [0] * m), scans)]
    in_reverse = call.attr("scan_input_directions", [0] * m)
    k = len(body.outputs) - n
    steps = scans[0].shape[in_axes[0]]
    collected = [[] for _ in range(k)]
    for t in range(steps):
        elements = [x.select(a, steps - 1 - t if r else t) for x, a, r in zip(scans, in_axes, in_reverse)]
        outputs = call.run_subgraph(body, [*states, *elements])
        states = [_tensor_of(o, call) for o in outputs[:n]]
        for j, o in enumerate(outputs[n:]):
            collected[j].append(_tensor_of(o, call))
    out_axes = call.attr("scan_output_axes", [0] * k)
    out_reverse = call.attr("scan_output_directions", [0] * k)
    stacked = []
    for parts, axis, reverse in zip(collected, out_axes, out_reverse):
        parts = parts[::-1] if reverse else parts
        stacked.append(munet.stack(parts, axis % (parts[0].ndim + 1)))
    return [*states, *stacked]


def _scan_batched(call):
    """Scan of opset 8: axis 0 of every input is a batch, each entry scanned on its own along axis 1 for
    its ``sequence_lens`` steps (all when absent); scan outputs are zero past an entry's length."""
    body = call.attr("body")
    m = call.attr("num_scan_inputs")
    n = call.n_inputs - 1 - m
    states = [call.input(i) for i in range(1, 1 + n)]
    scans = [call.input(i) for i in range(1 + n, call.n_inputs)]
    reverse = call.attr("directions", [0] * m)
    batch, steps = scans[0].shape[0], scans[0].shape[1]
    lengths = np.asarray(call.host(0)).reshape(-1) if call.has(0) else np.full(batch, steps)
    finals, outputs = [[] for _ in states], None
    for b in range(batch):
        state = [s[b] for s in states]
        length = int(lengths[b])
        collected = [[] for _ in range(len(body.outputs) - n)]
        for t in range(length):
            elements = [x[b, length - 1 - t if r else t] for x, r in zip(scans, reverse)]
            result = call.run_subgraph(body, [*state, *elements])
            state = [_tensor_of(o, call) for o in result[:n]]
            for parts, o in zip(collected, result[n:]):
                parts.append(_tensor_of(o, call))
        for j, s in enumerate(state):
            finals[j].append(s)
        if outputs is None:
            outputs = [[] for _ in collected]
        for j, parts in enumerate(collected):
            if not parts:
                raise call.unsupported("a batch entry of sequence length 0")
            stacked = munet.stack(parts, 0)
            if length < steps:
                stacked = munet.cat(
                    [
                        stacked,
                        munet.zeros(steps - length, *stacked.shape[1:], dtype=stacked.dtype, device=stacked.device),
                    ]
                )
            outputs[j].append(stacked)
    return [*(munet.stack(f, 0) for f in finals), *(munet.stack(o, 0) for o in outputs or [])]


@rule("Loop")
def _loop(call):
    """A host loop: the trip count and the condition are read on the host at every step."""
    body = call.attr("body")
    trip = int(call.scalar(0)) if call.has(0) else None
    condition = bool(call.scalar(1)) if call.has(1) else True
    carried = [call.value(i) for i in range(2, call.n_inputs)]  # tensors, sequences or optionals
    n = len(carried)
    collected = None
    i = 0
    while (trip is None or i < trip) and condition:
        iteration = munet.tensor(i, dtype=munet.int64, device=call.device)
        cond_in = munet.tensor(condition, dtype=munet.bool, device=call.device)
        outputs = call.run_subgraph(body, [iteration, cond_in, *carried])
        condition = bool(np.asarray(_host(outputs[0])).reshape(-1)[0])
        carried = [_tensor_of(o, call) for o in outputs[1 : 1 + n]]
        scans = [_tensor_of(o, call) for o in outputs[1 + n :]]
        collected = [[] for _ in scans] if collected is None else collected
        for parts, value in zip(collected, scans):
            parts.append(value)
        i += 1
    if collected is None:
        if len(body.outputs) > 1 + n:
            raise call.unsupported("a Loop that runs zero times with scan outputs")
        collected = []
    return [*carried, *(munet.stack(parts, 0) for parts in collected)]


def _tensor_of(value, call):
    if isinstance(value, np.ndarray) and not held.is_string(value):
        return munet.from_numpy(np.array(value)).to(call.device)
    return value


def _host(value):
    return value if isinstance(value, np.ndarray) else value.detach().cpu().numpy()


# recurrent layers ------------------------------------------------------------------------------------------

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_ACTIVATIONS = {
    "Sigmoid": lambda x, a, b: munet.sigmoid(x),
    "Tanh": lambda x, a, b: munet.tanh(x),
    "Relu": lambda x, a, b: F.relu(x),
    "Softsign": lambda x, a, b: F.softsign(x),
    "Softplus": lambda x, a, b: munet.log1p(munet.exp(-munet.abs(x))) + F.relu(x),
    "HardSigmoid": lambda x, a, b: munet.clamp(x * (0.2 if a is None else a) + (0.5 if b is None else b), 0.0, 1.0),
    "LeakyRelu": lambda x, a, b: F.leaky_relu(x, 0.01 if a is None else a),
    "ThresholdedRelu": lambda x, a, b: munet.where(x > (1.0 if a is None else a), x, munet.zeros_like(x)),
    "Elu": lambda x, a, b: F.elu(x, 1.0 if a is None else a),
    "Affine": lambda x, a, b: x * (1.0 if a is None else a) + (0.0 if b is None else b),
    "ScaledTanh": lambda x, a, b: munet.tanh(x * (1.0 if b is None else b)) * (1.0 if a is None else a),
}


@rule("RNN", "GRU", "LSTM")
def _recurrent(call):
    """One time step at a time over the sequence (a host loop), each direction with its own weights;
    ``sequence_lens`` freezes a batch entry's state past its length and zeroes its outputs there."""
    kind = call.op_type
    if call.attr("input_forget", 0):
        raise call.unsupported("input_forget=1")
    x = call.input(0)
    layout = call.attr("layout", 0)
    if layout:
        x = x.transpose(0, 1)  # to (sequence, batch, input)
    w, r, bias = call.input(1), call.input(2), call.input(3)
    hidden = call.attr("hidden_size", r.shape[-1])
    direction = call.attr("direction", "forward")
    directions = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}.get(direction)
    if directions is None:
        raise call.unsupported(f"direction={direction!r}")
    steps, batch = x.shape[0], x.shape[1]
    lengths = np.asarray(call.host(4)).reshape(-1) if call.has(4) else np.full(batch, steps)
    h0 = call.input(5)
    c0 = call.input(6) if kind == "LSTM" else None
    peephole = call.input(7) if kind == "LSTM" else None
    names = call.attr("activations", None)
    per_direction = len(_DEFAULT_ACTIVATIONS[kind])
    names = names or _DEFAULT_ACTIVATIONS[kind] * len(directions)
    alphas, betas = call.attr("activation_alpha", None), call.attr("activation_beta", None)
    outputs, finals, cells = [], [], []
    for d, reverse in enumerate(directions):
        acts = []
        for j in range(per_direction):
            k = d * per_direction + j
            if names[k] not in _ACTIVATIONS:
                raise call.unsupported(f"activation {names[k]!r}")
            a = alphas[k] if alphas is not None and k < len(alphas) else None
            b = betas[k] if betas is not None and k < len(betas) else None
            acts.append(lambda v, fn=_ACTIVATIONS[names[k]], a=a, b=b: fn(v, a, b))
        state = {
            "h": h0[d] if h0 is not None else munet.zeros(batch, hidden, dtype=x.dtype, device=x.device),
            "c": c0[d] if c0 is not None else munet.zeros(batch, hidden, dtype=x.dtype, device=x.device),
        }
        wb, rb = bias[d].reshape(2, -1).unbind(0) if bias is not None else (None, None)
        p = peephole[d] if peephole is not None else None
        ys = [None] * steps
        for t in range(steps):
            step = steps - 1 - t if reverse else t
            active = munet.from_numpy((step < lengths).reshape(-1, 1)).to(x.device)
            h, c = _recurrent_step(call, kind, x[step], state, w[d], r[d], wb, rb, p, acts, hidden)
            state["h"] = munet.where(active, h, state["h"])
            state["c"] = munet.where(active, c, state["c"]) if c is not None else state["c"]
            ys[step] = munet.where(active, h, munet.zeros_like(h))
        outputs.append(munet.stack(ys, 0))
        finals.append(state["h"])
        cells.append(state["c"])
    y = munet.stack(outputs, 1)  # (sequence, directions, batch, hidden)
    y_h, y_c = munet.stack(finals, 0), munet.stack(cells, 0)
    if layout:
        y, y_h, y_c = y.permute(2, 0, 1, 3), y_h.transpose(0, 1), y_c.transpose(0, 1)
    return [y, y_h, y_c][: call.n_outputs]


def _recurrent_step(call, kind, xt, state, w, r, wb, rb, p, acts, hidden):
    clip = call.attr("clip", None)

    def gate(pre):
        return munet.clamp(pre, -clip, clip) if clip is not None else pre

    xw = xt @ w.t() + (wb if wb is not None else 0)
    h_prev, c_prev = state["h"], state["c"]
    if kind == "RNN":
        return acts[0](gate(xw + h_prev @ r.t() + (rb if rb is not None else 0))), None
    hr = h_prev @ r.t() + (rb if rb is not None else 0)
    if kind == "GRU":
        xz, xr, xh = xw.split(hidden, -1)
        hz, hr_, hh = hr.split(hidden, -1)
        z = acts[0](gate(xz + hz))
        reset = acts[0](gate(xr + hr_))
        if call.attr("linear_before_reset", 0):
            candidate = acts[1](gate(xh + reset * hh))
        else:
            r_h = r.split(hidden, 0)[2]
            rbh = rb.split(hidden, -1)[2] if rb is not None else 0
            candidate = acts[1](gate(xh + (reset * h_prev) @ r_h.t() + rbh))
        return (1 - z) * candidate + z * h_prev, None
    pre = xw + hr
    pi, po, pf = p.split(hidden, -1) if p is not None else (0, 0, 0)
    xi, xo, xf, xc = pre.split(hidden, -1)
    i = acts[0](gate(xi + pi * c_prev))
    f = acts[0](gate(xf + pf * c_prev))
    c = f * c_prev + i * acts[1](gate(xc))
    o = acts[0](gate(xo + po * c))
    return o * acts[2](c), c


@rule("Unique")
def _unique(call):
    """``(values, first index, inverse, counts)``; ``sorted=0`` orders the values by first occurrence.
    The output sizes depend on the data, so this runs eagerly."""
    x = call.input(0)
    axis = call.attr("axis", None)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = axis % x.ndim
    values, inverse, counts = munet.unique(x, return_inverse=True, return_counts=True, dim=axis)
    positions = munet.arange(x.shape[axis], device=x.device)
    big = munet.full((values.shape[axis],), x.shape[axis], dtype=munet.int64, device=x.device)
    first = big.scatter_reduce(0, inverse, positions, "amin", include_self=True)
    if not call.attr("sorted", 1):
        order = munet.argsort(first)
        rank = munet.argsort(order)
        values, first, counts, inverse = values.index_select(axis, order), first[order], counts[order], rank[inverse]
    return [values, first, inverse, counts][: call.n_outputs]


# rules for host values (strings, sequences, optionals) and quantized operators live beside this table
from munet.onnx import (  # noqa: E402, F401 - they register into RULES
    import_host_ops,
    import_quantized,
    import_sampling,
    import_scatter_ops,
    import_spectral,
)
