"""How each MuNet op is written as ONNX nodes: ``RULES[op name](e, node) -> [output names]``.

A rule reads the node's arguments (``Value`` s and Python constants) and attributes, appends
ONNX nodes through the :class:`~munet.onnx.emitter.Emitter` and returns one ONNX name per node
output (``None`` for an output it cannot produce; the exporter raises if that output is used).
Ops without a rule raise :class:`~munet.onnx.emitter.ExportError` naming the op. A rule whose
attributes may depend on a dynamic axis (``view``'s target shape, slicing) is listed in
``SHAPE_RULES`` and reads the second trace's attributes from ``e.twin(node)``.
"""

from __future__ import annotations

import math

import numpy as np

from munet import _dtype as D
from munet.compiler.ir import Value
from munet.onnx._deps import tensor_type
from munet.onnx.emitter import ExportError

RULES: dict = {}
SHAPE_RULES: set = set()  # ops whose shape attributes may differ between the two traces of a dynamic export


def rule(*names, shape: bool = False):
    def register(fn):
        for name in names:
            RULES[name] = fn
            if shape:
                SHAPE_RULES.add(name)
        return fn

    return register


def _out_dtype(node, i: int = 0):
    return node.outputs[i].dtype


def _operand_dtype(args):
    """The dtype tensor operands are compared in: NumPy promotion of the tensors; a float number
    with integer tensors promotes to float32 (PyTorch's default dtype)."""
    tensors = [a for a in args if isinstance(a, Value)]
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype is not dtype:
            dtype = D.from_numpy_dtype(np.result_type(dtype.np, t.dtype.np))
    if not dtype.is_floating_point and any(isinstance(a, float) for a in args):
        dtype = D.float32
    return dtype


# elementwise ---------------------------------------------------------------------------------------

_UNARY = {
    "abs": "Abs",
    "acos": "Acos",
    "acosh": "Acosh",
    "asin": "Asin",
    "asinh": "Asinh",
    "atan": "Atan",
    "atanh": "Atanh",
    "ceil": "Ceil",
    "cos": "Cos",
    "cosh": "Cosh",
    "erf": "Erf",
    "exp": "Exp",
    "floor": "Floor",
    "log": "Log",
    "neg": "Neg",
    "reciprocal": "Reciprocal",
    "relu": "Relu",
    "sigmoid": "Sigmoid",
    "sign": "Sign",
    "sin": "Sin",
    "sinh": "Sinh",
    "sqrt": "Sqrt",
    "tan": "Tan",
    "tanh": "Tanh",
    "clone": "Identity",
}

_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max", "minimum": "Min"}

_COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}

_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}

_BITWISE = {
    "bitwise_and": ("BitwiseAnd", "And"),
    "bitwise_or": ("BitwiseOr", "Or"),
    "bitwise_xor": ("BitwiseXor", "Xor"),
}


def _unary_rule(onnx_op):
    def emit(e, node):
        return [e.op(onnx_op, e.input(node.args[0], _out_dtype(node)))]

    return emit


for _name, _onnx_op in _UNARY.items():
    RULES[_name] = _unary_rule(_onnx_op)


def _binary_rule(onnx_op):
    def emit(e, node):
        dtype = _out_dtype(node)
        a, b = node.args
        if onnx_op == "Pow" and not isinstance(b, Value):  # Pow takes an exponent of any numeric type
            return [e.op("Pow", e.input(a, dtype), e.input(b, dtype))]
        return [e.op(onnx_op, e.input(a, dtype), e.input(b, dtype))]

    return emit


for _name, _onnx_op in _BINARY.items():
    RULES[_name] = _binary_rule(_onnx_op)


def _compare_rule(onnx_op, negate=False):
    def emit(e, node):
        dtype = _operand_dtype(node.args)
        out = e.op(onnx_op, *(e.input(a, dtype) for a in node.args))
        return [e.op("Not", out) if negate else out]

    return emit


for _name, _onnx_op in _COMPARE.items():
    RULES[_name] = _compare_rule(_onnx_op)
RULES["ne"] = _compare_rule("Equal", negate=True)


def _logical_rule(onnx_op):
    def emit(e, node):
        return [e.op(onnx_op, *(_as_bool(e, a) for a in node.args))]

    return emit


for _name, _onnx_op in _LOGICAL.items():
    RULES[_name] = _logical_rule(_onnx_op)


def _as_bool(e, v) -> str:
    if isinstance(v, Value) and v.dtype is D.bool_:
        return e.input(v)
    if not isinstance(v, Value):
        return e.const(np.asarray(bool(v)))
    return e.op("Not", e.op("Equal", e.input(v), e.input(0, v.dtype)))


def _bitwise_rule(integer_op, bool_op):
    def emit(e, node):
        dtype = _out_dtype(node)
        onnx_op = bool_op if dtype is D.bool_ else integer_op
        if onnx_op == integer_op and e.opset < 18:
            raise ExportError(f"{node.name} needs opset 18 (ONNX {integer_op}), got opset {e.opset}")
        return [e.op(onnx_op, *(e.input(a, dtype) for a in node.args))]

    return emit


for _name, (_int_op, _bool_op) in _BITWISE.items():
    RULES[_name] = _bitwise_rule(_int_op, _bool_op)


@rule("bitwise_not")
def _bitwise_not(e, node):
    x = e.input(node.args[0])
    if node.args[0].dtype is D.bool_:
        return [e.op("Not", x)]
    if e.opset < 18:
        raise ExportError(f"bitwise_not needs opset 18 (ONNX BitwiseNot), got opset {e.opset}")
    return [e.op("BitwiseNot", x)]


@rule("logical_not")
def _logical_not(e, node):
    return [e.op("Not", _as_bool(e, node.args[0]))]


@rule("isnan")
def _isnan(e, node):
    return [e.op("IsNaN", e.input(node.args[0]))]


@rule("isinf", "isposinf", "isneginf")
def _isinf(e, node):
    positive, negative = {"isinf": (1, 1), "isposinf": (1, 0), "isneginf": (0, 1)}[node.name]
    x = node.args[0]
    if not x.dtype.is_floating_point:
        return [e.op("Expand", e.const(np.asarray(False)), e.op("Shape", e.input(x)))]
    return [e.op("IsInf", e.input(x), detect_positive=positive, detect_negative=negative)]


@rule("isfinite")
def _isfinite(e, node):
    x = e.input(node.args[0])
    return [e.op("Not", e.op("Or", e.op("IsNaN", x), e.op("IsInf", x)))]


@rule("rsqrt")
def _rsqrt(e, node):
    return [e.op("Reciprocal", e.op("Sqrt", e.input(node.args[0], _out_dtype(node))))]


@rule("safe_sqrt")
def _safe_sqrt(e, node):
    return [e.op("Sqrt", e.input(node.args[0], _out_dtype(node)))]


@rule("safe_reciprocal")
def _safe_reciprocal(e, node):
    return [e.op("Reciprocal", e.input(node.args[0], _out_dtype(node)))]


@rule("expm1")
def _expm1(e, node):
    dtype = _out_dtype(node)
    return [e.op("Sub", e.op("Exp", e.input(node.args[0], dtype)), e.input(1, dtype))]


@rule("log1p")
def _log1p(e, node):
    dtype = _out_dtype(node)
    return [e.op("Log", e.op("Add", e.input(node.args[0], dtype), e.input(1, dtype)))]


@rule("log2", "log10")
def _log_base(e, node):
    dtype = _out_dtype(node)
    base = 2.0 if node.name == "log2" else 10.0
    return [e.op("Div", e.op("Log", e.input(node.args[0], dtype)), e.input(math.log(base), dtype))]


@rule("exp2")
def _exp2(e, node):
    dtype = _out_dtype(node)
    return [e.op("Pow", e.input(2.0, dtype), e.input(node.args[0], dtype))]


@rule("erfc")
def _erfc(e, node):
    dtype = _out_dtype(node)
    return [e.op("Sub", e.input(1, dtype), e.op("Erf", e.input(node.args[0], dtype)))]


@rule("gelu")
def _gelu(e, node):
    """ONNX Gelu (opset 20); before it, the decomposition's ops (Erf, or Tanh for the approximation)."""
    dtype = _out_dtype(node)
    x = e.input(node.args[0], dtype)
    approximate = node.attrs["approximate"]
    if e.opset >= 20:
        return [e.op("Gelu", x, approximate=approximate)]
    if approximate == "none":
        phi = e.op("Erf", e.op("Mul", x, e.input(1.0 / math.sqrt(2.0), dtype)))
    else:
        cube = e.op("Mul", e.op("Mul", e.op("Mul", x, x), x), e.input(0.044715, dtype))
        phi = e.op("Tanh", e.op("Mul", e.op("Add", x, cube), e.input(math.sqrt(2.0 / math.pi), dtype)))
    return [e.op("Mul", e.op("Mul", x, e.input(0.5, dtype)), e.op("Add", phi, e.input(1.0, dtype)))]


@rule("deg2rad", "rad2deg")
def _angle(e, node):
    dtype = _out_dtype(node)
    factor = math.pi / 180 if node.name == "deg2rad" else 180 / math.pi
    return [e.op("Mul", e.input(node.args[0], dtype), e.input(factor, dtype))]


def _trunc(e, x: str, dtype) -> str:
    negative = e.op("Less", x, e.input(0, dtype))
    return e.op("Where", negative, e.op("Ceil", x), e.op("Floor", x))


@rule("trunc")
def _trunc_rule(e, node):
    x = node.args[0]
    if not x.dtype.is_floating_point:
        return [e.op("Identity", e.input(x))]
    return [_trunc(e, e.input(x), x.dtype)]


@rule("frac")
def _frac(e, node):
    x = node.args[0]
    name = e.input(x)
    return [e.op("Sub", name, _trunc(e, name, x.dtype))]


@rule("round")
def _round(e, node):
    x, decimals = node.args[0], node.attrs.get("decimals", 0)
    if not x.dtype.is_floating_point:
        return [e.op("Identity", e.input(x))]
    if decimals == 0:
        return [e.op("Round", e.input(x))]
    scale = e.input(10.0**decimals, x.dtype)
    return [e.op("Div", e.op("Round", e.op("Mul", e.input(x), scale)), scale)]


@rule("relu")
def _relu(e, node):
    return [e.op("Relu", e.input(node.args[0]))]


@rule("leaky_relu")
def _leaky_relu(e, node):
    return [e.op("LeakyRelu", e.input(node.args[0]), alpha=float(node.attrs["negative_slope"]))]


@rule("elu")
def _elu(e, node):
    a = node.attrs
    x, dtype = e.input(node.args[0]), node.args[0].dtype
    if a["scale"] == 1.0 and a["input_scale"] == 1.0:
        return [e.op("Elu", x, alpha=float(a["alpha"]))]
    negative = e.op(
        "Mul",
        e.input(a["scale"] * a["alpha"], dtype),
        e.op("Sub", e.op("Exp", e.op("Mul", x, e.input(a["input_scale"], dtype))), e.input(1, dtype)),
    )
    positive = e.op("Mul", x, e.input(a["scale"], dtype))
    return [e.op("Where", e.op("Greater", x, e.input(0, dtype)), positive, negative)]


@rule("softplus")
def _softplus(e, node):
    beta, threshold = float(node.attrs["beta"]), float(node.attrs["threshold"])
    x, dtype = e.input(node.args[0]), node.args[0].dtype
    scaled = e.op("Mul", x, e.input(beta, dtype))
    soft = e.op("Div", e.op("Softplus", scaled), e.input(beta, dtype))
    return [e.op("Where", e.op("Greater", scaled, e.input(threshold, dtype)), x, soft)]


@rule("hardtanh")
def _hardtanh(e, node):
    x, dtype = node.args[0], node.args[0].dtype
    lo, hi = node.attrs.get("min_val"), node.attrs.get("max_val")
    return [e.op("Clip", e.input(x), e.input(lo, dtype), e.input(hi, dtype))]


@rule("threshold")
def _threshold(e, node):
    x, dtype = node.args[0], node.args[0].dtype
    above = e.op("Greater", e.input(x), e.input(node.attrs["threshold"], dtype))
    return [e.op("Where", above, e.input(x), e.input(node.attrs["value"], dtype))]


@rule("clamp")
def _clamp(e, node):
    x, lo, hi = node.args
    dtype = _out_dtype(node)
    out = e.input(x, dtype)
    if lo is not None:
        out = e.op("Max", out, e.input(lo, dtype))
    if hi is not None:
        out = e.op("Min", out, e.input(hi, dtype))
    return [out]


@rule("where")
def _where(e, node):
    cond, a, b = node.args
    dtype = _out_dtype(node)
    return [e.op("Where", _as_bool(e, cond), e.input(a, dtype), e.input(b, dtype))]


@rule("masked_fill")
def _masked_fill(e, node):
    x, mask, value = node.args
    dtype = _out_dtype(node)
    return [e.op("Where", _as_bool(e, mask), e.input(value, dtype), e.input(x, dtype))]


@rule("lerp")
def _lerp(e, node):
    # MuNet's formula: w < 0.5 ? a + w*(b-a) : b - (b-a)*(1-w), exact at both ends
    dtype = _out_dtype(node)
    a, b, w = (e.input(v, dtype) for v in node.args)
    diff = e.op("Sub", b, a)
    low = e.op("Add", a, e.op("Mul", w, diff))
    high = e.op("Sub", b, e.op("Mul", diff, e.op("Sub", e.input(1, dtype), w)))
    return [e.op("Where", e.op("Less", w, e.input(0.5, dtype)), low, high)]


@rule("fmod")
def _fmod(e, node):
    dtype = _out_dtype(node)
    return [e.op("Mod", *(e.input(v, dtype) for v in node.args), fmod=1)]


@rule("remainder")
def _remainder(e, node):
    dtype = _out_dtype(node)
    a, b = (e.input(v, dtype) for v in node.args)
    if not dtype.is_floating_point:
        return [e.op("Mod", a, b, fmod=0)]
    return [e.op("Sub", a, e.op("Mul", e.op("Floor", e.op("Div", a, b)), b))]


@rule("div_floor")
def _div_floor(e, node):
    dtype = _out_dtype(node)
    a, b = (e.input(v, dtype) for v in node.args)
    if dtype.is_floating_point:
        return [e.op("Floor", e.op("Div", a, b))]
    return [e.op("Div", e.op("Sub", a, e.op("Mod", a, b, fmod=0)), b)]


@rule("div_trunc")
def _div_trunc(e, node):
    dtype = _out_dtype(node)
    a, b = (e.input(v, dtype) for v in node.args)
    quotient = e.op("Div", a, b)
    return [_trunc(e, quotient, dtype) if dtype.is_floating_point else quotient]


@rule("fmax", "fmin")
def _fmax(e, node):
    dtype = _out_dtype(node)
    a, b = (e.input(v, dtype) for v in node.args)
    best = e.op("Max" if node.name == "fmax" else "Min", a, b)
    if not dtype.is_floating_point:
        return [best]
    return [e.op("Where", e.op("IsNaN", a), b, e.op("Where", e.op("IsNaN", b), a, best))]


@rule("hypot")
def _hypot(e, node):
    dtype = _out_dtype(node)
    a, b = (e.input(v, dtype) for v in node.args)
    return [e.op("Sqrt", e.op("Add", e.op("Mul", a, a), e.op("Mul", b, b)))]


@rule("xlogy")
def _xlogy(e, node):
    dtype = _out_dtype(node)
    x, y = (e.input(v, dtype) for v in node.args)
    product = e.op("Mul", x, e.op("Log", y))
    keep = e.op("Or", e.op("Not", e.op("Equal", x, e.input(0, dtype))), e.op("IsNaN", y))
    return [e.op("Where", keep, product, e.input(0, dtype))]


@rule("heaviside")
def _heaviside(e, node):
    dtype = _out_dtype(node)
    x, values = (e.input(v, dtype) for v in node.args)
    step = e.op("Cast", e.op("Greater", x, e.input(0, dtype)), to=tensor_type(dtype))
    return [e.op("Where", e.op("Equal", x, e.input(0, dtype)), values, step)]


@rule("nan_to_num")
def _nan_to_num(e, node):
    x = node.args[0]
    if not x.dtype.is_floating_point:
        return [e.op("Identity", e.input(x))]
    info = np.finfo(x.dtype.np)
    a = node.attrs
    nan = a.get("nan") or 0.0
    posinf = info.max if a.get("posinf") is None else a["posinf"]
    neginf = info.min if a.get("neginf") is None else a["neginf"]
    name = e.input(x)
    out = e.op("Where", e.op("IsNaN", name), e.input(nan, x.dtype), name)
    out = e.op("Where", e.op("IsInf", name, detect_negative=0), e.input(posinf, x.dtype), out)
    return [e.op("Where", e.op("IsInf", name, detect_positive=0), e.input(neginf, x.dtype), out)]


@rule("cast")
def _cast(e, node):
    return [e.op("Cast", e.input(node.args[0]), to=tensor_type(node.attrs["dtype"]))]


@rule("copy")
def _copy(e, node):
    target, src = node.args
    return [e.op("Expand", e.input(src, target.dtype), e.ints(target.shape))]


@rule("fill")
def _fill(e, node):
    target, value = node.args
    return [e.op("Expand", e.input(value, target.dtype), e.ints(target.shape))]


# reductions ----------------------------------------------------------------------------------------

_REDUCE = {
    "sum": "ReduceSum",
    "prod": "ReduceProd",
    "amax": "ReduceMax",
    "amin": "ReduceMin",
    "logsumexp": "ReduceLogSumExp",
}


def _reduce_rule(onnx_op):
    def emit(e, node):
        x, dims, keepdim = node.args[0], node.attrs["dims"], node.attrs["keepdim"]
        name = e.input(x, _out_dtype(node))
        if not dims:
            return [e.op("Identity", name)]
        return [e.reduce(onnx_op, name, dims, keepdim)]

    return emit


for _name, _onnx_op in _REDUCE.items():
    RULES[_name] = _reduce_rule(_onnx_op)


@rule("all", "any")
def _all_any(e, node):
    x, dims, keepdim = node.args[0], node.attrs["dims"], node.attrs["keepdim"]
    as_int = e.op("Cast", _as_bool(e, x), to=tensor_type(D.int32))
    if not dims:
        return [e.op("Cast", as_int, to=tensor_type(D.bool_))]
    reduced = e.reduce("ReduceMin" if node.name == "all" else "ReduceMax", as_int, dims, keepdim)
    return [e.op("Cast", reduced, to=tensor_type(D.bool_))]


@rule("argmax", "argmin")
def _arg_extremum(e, node):
    x, dim, keepdim = node.args[0], node.attrs["dim"], node.attrs["keepdim"]
    onnx_op = "ArgMax" if node.name == "argmax" else "ArgMin"
    name = e.input(x)
    if dim is None:
        name = e.op("Reshape", name, e.ints([-1]))
        out = e.op(onnx_op, name, axis=0, keepdims=0)
        return [e.op("Reshape", out, e.ints([1] * len(x.shape) if keepdim else []))] if keepdim else [out]
    if not x.shape:
        return [e.op("Expand", e.const(np.asarray(0, np.int64)), e.ints(node.outputs[0].shape))]
    return [e.op(onnx_op, name, axis=dim, keepdims=int(keepdim))]


@rule("max_dim", "min_dim")
def _extremum_dim(e, node):
    x, dim, keepdim = node.args[0], node.attrs["dim"], node.attrs["keepdim"]
    name = e.input(x)
    if not x.shape:
        return [e.op("Identity", name), e.op("Expand", e.const(np.asarray(0, np.int64)), e.ints(()))]
    maximum = node.name == "max_dim"
    values = e.reduce("ReduceMax" if maximum else "ReduceMin", name, [dim], keepdim)
    indices = e.op("ArgMax" if maximum else "ArgMin", name, axis=dim, keepdims=int(keepdim))
    return [values, indices]


@rule("cumsum")
def _cumsum(e, node):
    x = node.args[0]
    return [
        e.op(
            "CumSum",
            e.input(x, _out_dtype(node)),
            e.ints([node.attrs["dim"]]),
            reverse=int(node.attrs.get("reverse", False)),
        )
    ]


# matmul, convolution, pooling, normalization ---------------------------------------------------------


@rule("matmul")
def _matmul(e, node):
    dtype = _out_dtype(node)
    return [e.op("MatMul", *(e.input(v, dtype) for v in node.args))]


@rule("convolution")
def _convolution(e, node):
    x, w = node.args
    a = node.attrs
    pads = [p[0] for p in a["padding"]] + [p[1] for p in a["padding"]]
    common = dict(strides=list(a["stride"]), dilations=list(a["dilation"]), group=int(a["groups"]), pads=pads)
    if a["transposed"]:
        return [e.op("ConvTranspose", e.input(x), e.input(w), output_padding=list(a["output_padding"]), **common)]
    return [e.op("Conv", e.input(x), e.input(w), **common)]


@rule("max_pool", shape=True)
def _max_pool(e, node):
    x = node.args[0]
    a = node.attrs
    kernel, stride, padding, dilation = (list(a[k]) for k in ("kernel_size", "stride", "padding", "dilation"))
    floor_size = [
        (n + 2 * p - d * (k - 1) - 1) // s + 1 for n, p, d, k, s in zip(x.shape[2:], padding, dilation, kernel, stride)
    ]
    ceil_mode = int(list(a["output_size"]) != floor_size)
    values = e.op(
        "MaxPool",
        e.input(x),
        kernel_shape=kernel,
        strides=stride,
        pads=padding + padding,
        dilations=dilation,
        ceil_mode=ceil_mode,
    )
    return [values, None]  # ONNX MaxPool indices count over the whole tensor, PyTorch's within one plane


@rule("adaptive_max_pool")
def _adaptive_max_pool(e, node):
    x = node.args[0]
    sizes = list(node.attrs["output_size"])
    spatial = list(x.shape[2:])
    if any(n % s for n, s in zip(spatial, sizes)):
        raise ExportError(
            f"adaptive_max_pool: input size {spatial} is not a multiple of output size {sizes}; ONNX has no adaptive pooling"
        )
    kernel = [n // s for n, s in zip(spatial, sizes)]
    return [e.op("MaxPool", e.input(x), kernel_shape=kernel, strides=kernel), None]


@rule("softmax", "log_softmax")
def _softmax(e, node):
    onnx_op = "Softmax" if node.name == "softmax" else "LogSoftmax"
    x = node.args[0]
    if not x.shape:
        return [e.op("Identity", e.input(x))] if onnx_op == "Softmax" else [e.op("Sub", e.input(x), e.input(x))]
    return [e.op(onnx_op, e.input(x, _out_dtype(node)), axis=int(node.attrs["dim"]))]


@rule("standardize")
def _standardize(e, node):
    """``((x - mean) * rstd, rstd)`` over ``dims``; LayerNormalization (opset 17) when the dims trail."""
    x = node.args[0]
    dims, eps, center = tuple(node.attrs["dims"]), float(node.attrs["eps"]), bool(node.attrs["center"])
    name = e.input(x)
    trailing = dims == tuple(range(len(x.shape) - len(dims), len(x.shape)))
    if center and trailing and e.opset >= 17 and dims and x.dtype.is_floating_point:
        scale = e.const(np.ones(x.shape[dims[0] :], dtype=x.dtype.np), "ones")
        y, _, rstd = e.op("LayerNormalization", name, scale, outputs=3, axis=dims[0], epsilon=eps)
        return [y, rstd]
    centered = e.op("Sub", name, e.reduce("ReduceMean", name, dims, True)) if center else name
    variance = e.reduce("ReduceMean", e.op("Mul", centered, centered), dims, True)
    rstd = e.op("Reciprocal", e.op("Sqrt", e.op("Add", variance, e.input(eps, x.dtype))))
    return [e.op("Mul", centered, rstd), rstd]


# indexing -------------------------------------------------------------------------------------------


@rule("embedding")
def _embedding(e, node):
    weight, indices = node.args
    return [e.op("Gather", e.input(weight), e.input(indices), axis=0)]


@rule("gather")
def _gather(e, node):
    x, index = node.args
    return [e.op("GatherElements", e.input(x), e.input(index, D.int64), axis=int(node.attrs["dim"]))]


@rule("scatter")
def _scatter(e, node):
    x, index, src = node.args
    reduce = node.attrs.get("reduce")
    reduction = {None: None, "add": "add", "multiply": "mul"}.get(reduce, "unsupported")
    if reduction == "unsupported":
        raise ExportError(f"scatter: reduce={reduce!r} has no ONNX ScatterElements reduction")
    dtype = _out_dtype(node)
    if not isinstance(src, Value):
        src = e.op("Expand", e.input(src, dtype), e.op("Shape", e.input(index)))
    else:
        src = e.input(src, dtype)
    return [
        e.op(
            "ScatterElements",
            e.input(x, dtype),
            e.input(index, D.int64),
            src,
            axis=int(node.attrs["dim"]),
            reduction=reduction,
        )
    ]


@rule("index")
def _index(e, node):
    """Advanced indexing by one index tensor at one position: ``Gather`` along that axis."""
    x, indices = node.args
    positions = tuple(node.attrs["positions"])
    if len(indices) != 1 or len(positions) != 1:
        raise ExportError(
            f"index: only one index tensor exports (ONNX Gather); got {len(indices)} at positions {positions}"
        )
    index = indices[0]
    if index.dtype is D.bool_:
        raise ExportError("index: a boolean mask selects a data-dependent number of elements; it does not export")
    return [e.op("Gather", e.input(x), e.input(index, D.int64), axis=positions[0])]


@rule("linalg_det")
def _det(e, node):
    return [e.op("Det", e.input(node.args[0]))]


@rule("check")
def _check(e, node):
    """A value check (``ops/checks.py``: class indices in range, probabilities in [0, 1]) has no ONNX
    form (ONNX has no assert operator): the exported graph leaves it out; its token is a constant."""
    return [e.const(np.asarray(True))]


@rule("topk")
def _topk(e, node):
    x = node.args[0]
    a = node.attrs
    if not x.shape:
        return [e.op("Identity", e.input(x)), e.op("Expand", e.const(np.asarray(0, np.int64)), e.ints(()))]
    values, indices = e.op(
        "TopK", e.input(x), e.ints([a["k"]]), outputs=2, axis=a["dim"], largest=int(a["largest"]), sorted=1
    )
    return [values, indices]


@rule("tril", "triu")
def _triangle(e, node):
    if e.opset < 14:
        raise ExportError(f"{node.name} needs opset 14 (ONNX Trilu), got opset {e.opset}")
    diagonal = e.const(np.asarray(node.attrs["diagonal"], np.int64))
    return [e.op("Trilu", e.input(node.args[0]), diagonal, upper=int(node.name == "triu"))]


# movement and views --------------------------------------------------------------------------------


def _dynamic_entries(e, node, key) -> list:
    """Positions where attribute ``key`` (a tuple of sizes) differs between the two traces."""
    twin = e.twin(node)
    if twin is None:
        return []
    return [i for i, (a, b) in enumerate(zip(node.attrs[key], twin.attrs[key])) if a != b]


@rule("view", shape=True)
def _view(e, node):
    shape = list(node.attrs["shape_out"])
    dynamic = _dynamic_entries(e, node, "shape_out")
    if len(dynamic) > 1:
        raise ExportError(
            f"view: target shape {tuple(shape)} has {len(dynamic)} dimensions that depend on the dynamic axes; "
            "ONNX Reshape can infer one (-1)"
        )
    for i in dynamic:
        shape[i] = -1
    allowzero = 1 if 0 in shape else None
    return [e.op("Reshape", e.input(node.args[0]), e.ints(shape), allowzero=allowzero)]


@rule("permute")
def _permute(e, node):
    return [e.op("Transpose", e.input(node.args[0]), perm=list(node.attrs["dims"]))]


@rule("expand", shape=True)
def _expand(e, node):
    x = node.args[0]
    size = list(node.attrs["size"])
    lead = len(size) - len(x.shape)
    for i in _dynamic_entries(e, node, "size"):
        if i < lead or x.shape[i - lead] == 1:
            raise ExportError(f"expand: size {tuple(size)} broadcasts a dimension that depends on the dynamic axes")
        size[i] = 1  # the dimension passes through: ONNX Expand broadcasts 1 against it
    return [e.op("Expand", e.input(x), e.ints(size))]


@rule("index_view", shape=True)
def _index_view(e, node):
    """Basic indexing: Slice the sliced axes, Squeeze the integer-indexed ones, Unsqueeze the Nones."""
    x = node.args[0]
    spec = node.attrs["spec"]
    twin = e.twin(node)
    starts, ends, axes, steps, squeezed, inserted = [], [], [], [], [], []
    d, out_d = 0, 0
    for k, item in enumerate(spec):
        if item[0] == "n":
            inserted.append(out_d)
            out_d += 1
            continue
        changed = twin is not None and twin.attrs["spec"][k] != item
        full = item[0] == "s" and item[1] == 0 and item[2] == x.shape[d] and item[3] == 1
        if changed and not full:
            raise ExportError(f"index_view: the slice {item} of dimension {d} depends on the dynamic axes")
        if item[0] == "i":
            starts.append(item[1])
            ends.append(item[1] + 1)
            axes.append(d)
            steps.append(1)
            squeezed.append(d)
        elif not full:
            _, start, length, step = item
            starts.append(start)
            ends.append(start + (length - 1) * step + 1 if length else start)
            axes.append(d)
            steps.append(step)
            out_d += 1
        else:
            out_d += 1
        d += 1
    name = e.input(x)
    if axes:
        name = e.op("Slice", name, e.ints(starts), e.ints(ends), e.ints(axes), e.ints(steps))
    if squeezed:
        name = e.squeeze(name, squeezed)
    if inserted:
        name = e.unsqueeze(name, inserted)
    if not (axes or squeezed or inserted):
        name = e.op("Identity", name)
    return [name]


def _flat_gather(e, x, indices: np.ndarray) -> str:
    flat = e.op("Reshape", e.input(x), e.ints([-1]))
    return e.op("Gather", flat, e.const(indices.astype(np.int64), "indices"), axis=0)


@rule("as_strided")
def _as_strided(e, node):
    """Elements at ``offset + sum(i_k * stride_k)`` of the flattened input: one Gather."""
    a = node.attrs
    index = _strided_index(a["size"], a["stride_out"], a["storage_offset"])
    return [_flat_gather(e, node.args[0], index)]


def _strided_index(size, stride, offset) -> np.ndarray:
    """Flat positions ``offset + sum(i_k * stride_k)`` for every index ``i`` of ``size``."""
    index = np.full(tuple(size), int(offset), dtype=np.int64)
    for k, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = n
        index = index + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return index


@rule("unfold")
def _unfold(e, node):
    x = node.args[0]
    a = node.attrs
    dim, size, step = int(a["dimension"]), int(a["size"]), int(a["step"])
    if not x.shape:
        return [e.op("Reshape", e.input(x), e.ints([1]))]
    count = (x.shape[dim] - size) // step + 1
    windows = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    gathered = e.op("Gather", e.input(x), e.const(windows.astype(np.int64), "windows"), axis=dim)
    # gathered: shape[:dim] + (count, size) + shape[dim+1:]; the window axis goes last
    rank = len(x.shape) + 1
    perm = [i for i in range(rank) if i != dim + 1] + [dim + 1]
    return [e.op("Transpose", gathered, perm=perm)]


@rule("diagonal")
def _diagonal(e, node):
    x = node.args[0]
    base = np.arange(math.prod(x.shape), dtype=np.int64).reshape(x.shape)
    a = node.attrs
    picked = np.diagonal(base, offset=a["offset_diag"], axis1=a["dim1"], axis2=a["dim2"])
    return [_flat_gather(e, x, np.ascontiguousarray(picked))]


@rule("cat", shape=True)
def _cat(e, node):
    tensors = [t for t, s in zip(node.args[0], node.attrs["sizes"]) if s is not None]
    dtype = _out_dtype(node)
    if len(tensors) == 1:
        return [e.op("Identity", e.input(tensors[0], dtype))]
    return [e.op("Concat", *(e.input(t, dtype) for t in tensors), axis=int(node.attrs["dim"]))]


@rule("flip")
def _flip(e, node):
    x = node.args[0]
    dims = list(node.attrs["dims"])
    if not dims:
        return [e.op("Identity", e.input(x))]
    big = np.iinfo(np.int64)
    starts, ends = [-1] * len(dims), [big.min] * len(dims)
    return [e.op("Slice", e.input(x), e.ints(starts), e.ints(ends), e.ints(dims), e.ints([-1] * len(dims)))]


@rule("roll")
def _roll(e, node):
    x = node.args[0]
    shifts, dims = list(node.attrs["shifts"]), node.attrs["dims"]
    name = e.input(x)
    if dims is None:
        flat = e.op("Reshape", name, e.ints([-1]))
        rolled = _roll_axis(e, flat, math.prod(x.shape), shifts[0], 0)
        return [e.op("Reshape", rolled, e.ints(x.shape))]
    for shift, d in zip(shifts, dims):
        name = _roll_axis(e, name, x.shape[d], shift, d)
    return [name]


def _roll_axis(e, name: str, n: int, shift: int, axis: int) -> str:
    if n == 0 or shift % n == 0:
        return name
    cut = n - shift % n
    head = e.op("Slice", name, e.ints([cut]), e.ints([n]), e.ints([axis]))
    tail = e.op("Slice", name, e.ints([0]), e.ints([cut]), e.ints([axis]))
    return e.op("Concat", head, tail, axis=axis)


@rule("constant_pad_nd")
def _constant_pad(e, node):
    x = node.args[0]
    pairs = node.attrs["pad"]
    pads = [p[0] for p in pairs] + [p[1] for p in pairs]
    return [e.op("Pad", e.input(x), e.ints(pads), e.input(node.attrs["value"], x.dtype), mode="constant")]


@rule("as_strided_scatter")
def _as_strided_scatter(e, node):
    """``src`` written at ``offset + sum(i_k * stride_k)`` of the flattened input: one ScatterND."""
    x, src = node.args
    a = node.attrs
    index = _strided_index(a["size"], a["stride"], a["storage_offset"])
    flat = e.op("Reshape", e.input(x), e.ints([-1]))
    updates = e.op("Reshape", e.input(src, x.dtype), e.ints([-1]))
    written = e.op("ScatterND", flat, e.const(index.reshape(-1, 1), "indices"), updates)
    return [e.op("Reshape", written, e.ints(x.shape))]


@rule("sort")
def _sort(e, node):
    """TopK over the whole dimension; among equal values ONNX does not fix the order of the indices."""
    x = node.args[0]
    a = node.attrs
    if not x.shape:
        return [e.op("Identity", e.input(x)), e.op("Expand", e.const(np.asarray(0, np.int64)), e.ints(()))]
    k = e.ints([x.shape[a["dim"]]])
    values, indices = e.op("TopK", e.input(x), k, outputs=2, axis=a["dim"], largest=int(a["descending"]), sorted=1)
    return [values, indices]


@rule("signbit")
def _signbit(e, node):
    return [_negative_sign(e, node.args[0])]


def _negative_sign(e, x: Value) -> str:
    name = e.input(x)
    negative = e.op("Less", name, e.input(0, x.dtype))
    if not x.dtype.is_floating_point:
        return negative
    # -0.0 compares equal to 0: its reciprocal is -inf
    zero = e.input(0, x.dtype)
    negative_zero = e.op("And", e.op("Equal", name, zero), e.op("Less", e.op("Reciprocal", name), zero))
    return e.op("Or", negative, negative_zero)


@rule("copysign")
def _copysign(e, node):
    dtype = _out_dtype(node)
    a, b = node.args
    magnitude = e.op("Abs", e.input(a, dtype))
    negative = _negative_sign(e, b) if isinstance(b, Value) else e.const(np.asarray(math.copysign(1, b) < 0))
    return [e.op("Where", negative, e.op("Neg", magnitude), magnitude)]


@rule("nansum")
def _nansum(e, node):
    x, dims, keepdim = node.args[0], node.attrs["dims"], node.attrs["keepdim"]
    dtype = _out_dtype(node)
    name = e.input(x, dtype)
    if dtype.is_floating_point:
        name = e.op("Where", e.op("IsNaN", name), e.input(0, dtype), name)
    return [e.reduce("ReduceSum", name, dims, keepdim) if dims else name]


# Creation ops without a generator take no tensor input: export.py writes their values as constants
CREATION = {"arange", "empty", "eye", "full", "linspace"}

# Ops with no export rule, and why
NOT_EXPORTED = {
    **dict.fromkeys(
        ["adam_param_update", "adam_second_moment"], "updates an optimizer's state (a training step, not a model)"
    ),
    **dict.fromkeys(
        ["angle", "complex", "complex_abs", "conj", "fft_c2c", "fft_c2r", "fft_r2c", "view_as_complex", "view_as_real"],
        "works on complex tensors (the exporter writes real-valued graphs only)",
    ),
    **dict.fromkeys(
        ["erfcx", "geqrf", "igamma", "igammac"], "has no ONNX operator or exact composition in ONNX's operators yet"
    ),
    **dict.fromkeys(
        ["frexp_exponent", "frexp_mantissa", "nextafter"],
        "reads a float's bits (exact on subnormals); ONNX has no operator for them",
    ),
    **dict.fromkeys(
        ["bernoulli", "exponential", "multinomial", "normal", "normal_tensor", "randint", "randperm", "uniform"],
        "draws random numbers (ONNX's random ops do not reproduce MuNet's generator)",
    ),
    **dict.fromkeys(
        [
            "cumprod_backward",
            "embedding_backward",
            "grid_sampler_2d_backward",
            "grid_sampler_2d_bicubic_backward",
            "grid_sampler_3d_backward",
            "hardtanh_backward",
            "leaky_relu_backward",
            "max_pool_backward",
            "prod_others_backward",
            "strided_scatter_add",
            "threshold_backward",
            "prod_others",
        ],
        "is part of a gradient; export traces the forward only",
    ),
    **dict.fromkeys(["nonzero", "unique"], "has a data-dependent output shape"),
    "all_reduce": "is a collective of munet.distributed; an ONNX graph runs in one process",
    "rtc_launch": "is a user kernel compiled at run time (munet.rtc); ONNX has no operator that runs its source",
    **dict.fromkeys(
        [
            "linalg_cholesky_ex",
            "linalg_eig",
            "linalg_eigh",
            "linalg_lu_factor_ex",
            "linalg_lu_permutation",
            "linalg_matrix_exp",
            "linalg_qr",
            "linalg_solve_triangular",
            "linalg_svd",
        ],
        "is a matrix factorization or solve, which no default-domain ONNX operator computes",
    ),
    **dict.fromkeys(
        [
            "atan2",
            "bitwise_left_shift",
            "bitwise_right_shift",
            "cummax",
            "cummin",
            "cumprod",
            "erfinv",
            "grid_sampler_2d",
            "grid_sampler_2d_bicubic",
            "grid_sampler_3d",
            "index_put",
            "kthvalue",
            "median",
            "median_dim",
            "mode",
            "nanmedian",
            "nanmedian_dim",
            "scatter_reduce",
            "scatter_reduce_values",
        ],
        "has no export rule yet (no single ONNX operator computes it)",
    ),
}
