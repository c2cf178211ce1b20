"""Activations, softmax family and dropout (``munet.nn.functional``).

Composites (decompositions in public ops, fast kernels on cpu and vulkan, analytic gradients):
``softmax`` and ``log_softmax``. Composites whose gradient comes from their decomposition's ops:
``gelu``, ``silu``, ``mish``, ``hardsigmoid``, ``hardswish``, ``hardshrink``, ``softshrink``,
``softsign``, ``logsigmoid``, ``tanhshrink``, ``glu`` and ``prelu``. Primitives (analytic gradients written with public ops):
``relu``, ``threshold``, ``hardtanh``, ``leaky_relu``, ``elu`` (also
selu/celu), ``softplus``, and the mask-gradient ops ``threshold_backward``,
``hardtanh_backward``, ``leaky_relu_backward`` (linear in the gradient, so they are their own
double backward, as in PyTorch). The rest (relu6, rrelu, softmin, dropout) are functions of those
and of the elementwise math ops (``sigmoid``, ``tanh``, ``erf``, ...).
"""

from __future__ import annotations

import math
import warnings

from munet import _dtype as D
from munet.ops._registry import Meta, apply, apply_inplace, define
from munet.ops._scalar import Const, scalar
from munet.ops._utils import wrap_dim

__all__ = [
    "relu",
    "relu_",
    "selu",
    "selu_",
    "celu",
    "celu_",
    "prelu",
    "rrelu",
    "rrelu_",
    "threshold",
    "threshold_",
    "hardshrink",
    "softmax",
    "log_softmax",
    "dropout",
    "dropout_",
    "alpha_dropout",
    "alpha_dropout_",
    "feature_alpha_dropout",
    "feature_alpha_dropout_",
    "feature_dropout",
    "feature_dropout_",
]
__functional__ = [
    "relu",
    "relu_",
    "relu6",
    "gelu",
    "silu",
    "mish",
    "sigmoid",
    "tanh",
    "softplus",
    "softsign",
    "leaky_relu",
    "leaky_relu_",
    "elu",
    "elu_",
    "selu",
    "selu_",
    "celu",
    "celu_",
    "hardtanh",
    "hardtanh_",
    "hardsigmoid",
    "hardswish",
    "prelu",
    "rrelu",
    "rrelu_",
    "glu",
    "softmax",
    "log_softmax",
    "softmin",
    "logsigmoid",
    "threshold",
    "threshold_",
    "tanhshrink",
    "softshrink",
    "hardshrink",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alpha_dropout",
    "feature_alpha_dropout",
]
__tensor_methods__ = ["relu", "relu_", "prelu", "softmax", "log_softmax", "hardshrink"]


def _munet():
    import munet

    return munet


def _same_meta(x, *_, **__):
    return Meta(tuple(x.shape), x.dtype)


def _float_meta(name: str):
    def meta(x, *_, **__):
        if not x._dtype.is_floating_point:
            raise RuntimeError(f"{name}: expected a floating point input, got {x.dtype.name}")
        return Meta(x._shape, x._dtype)

    return meta


def _numeric_meta(name: str):
    def meta(x, *_, **__):
        if x._dtype is D.bool_:
            raise RuntimeError(f"{name}: not implemented for bool tensors")
        return Meta(x._shape, x._dtype)

    return meta


def _composite_inplace(input, fn):
    """``input.copy_(fn(input))``; ``fn`` reads a copy, so its saved tensors survive the write."""
    source = input.clone() if input.requires_grad else input
    return input.copy_(fn(source))


def _check_float(input, name: str) -> None:
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name}: expected a floating point input, got {input.dtype.name}")


# mask gradients: linear in the gradient, so each is its own double backward ------------------------


def _grad_meta(grad, x, **_):
    return Meta(tuple(grad.shape), grad.dtype)


def _threshold_backward(args, t, *, threshold):
    grad, x = args
    return scalar.where(scalar.gt(x, threshold), grad, 0)


def _hardtanh_backward(args, t, *, min_val, max_val):
    grad, x = args
    return scalar.where(scalar.logical_and(scalar.gt(x, min_val), scalar.lt(x, max_val)), grad, 0)


def _leaky_relu_backward(args, t, *, negative_slope):
    grad, x = args
    return scalar.where(scalar.gt(x, 0), grad, scalar.mul(grad, negative_slope))


def _mask_gradient(name: str, formula):
    """A mask gradient op ``name(grad, self)``, linear in ``grad``: its own double backward."""
    op = define(
        name,
        inputs=("grad", "self"),
        meta=_grad_meta,
        backward=lambda ctx, gg: (apply(op, gg, ctx.saved_tensor("self"), **ctx.attrs), None),
        saves=("self",),
        formula=formula,
    )
    return op


threshold_backward_op = _mask_gradient("threshold_backward", _threshold_backward)
hardtanh_backward_op = _mask_gradient("hardtanh_backward", _hardtanh_backward)
leaky_relu_backward_op = _mask_gradient("leaky_relu_backward", _leaky_relu_backward)


# relu / threshold / hardtanh / leaky_relu --------------------------------------------------------------

relu_op = define(
    "relu",
    meta=_numeric_meta("relu"),
    backward=lambda ctx, g: apply(threshold_backward_op, g, ctx.saved_tensor("result"), threshold=0.0),
    saves=("result",),
    formula=lambda args, t: scalar.maximum(args[0], 0),  # NaN propagates, like PyTorch
)


def relu(input, inplace: bool = False):
    """``max(x, 0)``; the gradient at 0 is 0, like PyTorch."""
    if inplace:
        return relu_(input)
    return apply(relu_op, input)


def relu_(input):
    return apply_inplace(relu_op, input)


threshold_op = define(
    "threshold",
    meta=_numeric_meta("threshold"),
    backward=lambda ctx, g: apply(threshold_backward_op, g, ctx.saved_tensor("self"), threshold=ctx.attrs["threshold"]),
    saves=("self",),
    formula=lambda args, t, *, threshold, value: scalar.where(scalar.gt(args[0], threshold), args[0], Const(value, t)),
)


def threshold(input, threshold: float, value: float, inplace: bool = False):
    """``x if x > threshold else value``."""
    if inplace:
        return threshold_(input, threshold, value)
    return apply(threshold_op, input, threshold=threshold, value=value)


def threshold_(input, threshold: float, value: float):
    return apply_inplace(threshold_op, input, threshold=threshold, value=value)


hardtanh_op = define(
    "hardtanh",
    meta=_numeric_meta("hardtanh"),
    backward=lambda ctx, g: apply(hardtanh_backward_op, g, ctx.saved_tensor("self"), **ctx.attrs),
    saves=("self",),
    formula=lambda args, t, *, min_val, max_val: scalar.minimum(scalar.maximum(args[0], min_val), max_val),
)


def _hardtanh_args(min_val, max_val):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val cannot be greater than max_val, got min_val={min_val}, max_val={max_val}")
    return dict(min_val=min_val, max_val=max_val)


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    """Clamp to ``[min_val, max_val]``; zero gradient outside the open interval."""
    if inplace:
        return hardtanh_(input, min_val, max_val)
    return apply(hardtanh_op, input, **_hardtanh_args(min_val, max_val))


def hardtanh_(input, min_val: float = -1.0, max_val: float = 1.0):
    return apply_inplace(hardtanh_op, input, **_hardtanh_args(min_val, max_val))


def relu6(input, inplace: bool = False):
    return hardtanh(input, 0.0, 6.0, inplace)


def _leaky_relu(args, t, *, negative_slope):
    (x,) = args
    return scalar.where(scalar.gt(x, 0), x, scalar.mul(x, negative_slope))


leaky_relu_op = define(
    "leaky_relu",
    meta=_float_meta("leaky_relu"),
    backward=lambda ctx, g: apply(leaky_relu_backward_op, g, ctx.saved_tensor("self"), **ctx.attrs),
    saves=("self",),
    formula=_leaky_relu,
)


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """``x if x > 0 else negative_slope * x``."""
    if inplace:
        return leaky_relu_(input, negative_slope)
    return apply(leaky_relu_op, input, negative_slope=float(negative_slope))


def leaky_relu_(input, negative_slope: float = 0.01):
    return apply_inplace(leaky_relu_op, input, negative_slope=float(negative_slope))


# composite activations: each op's decomposition, written in public ops beside it, is its meaning ------


def _define_activation(name: str, decomposition, meta=_same_meta, inputs=("self",)):
    """An activation built from several ops, as a composite: its gradient comes from those ops."""
    return define(name, inputs=inputs, meta=meta, decomposition=decomposition)


hardsigmoid_op = _define_activation("hardsigmoid", lambda x: hardtanh(x + 3.0, 0.0, 6.0) / 6.0)
hardswish_op = _define_activation("hardswish", lambda x: x * (hardtanh(x + 3.0, 0.0, 6.0) / 6.0))


def hardsigmoid(input, inplace: bool = False):
    """``relu6(x + 3) / 6``."""
    if inplace:
        return _composite_inplace(input, hardsigmoid)
    return apply(hardsigmoid_op, input)


def hardswish(input, inplace: bool = False):
    """``x * relu6(x + 3) / 6``."""
    if inplace:
        return _composite_inplace(input, hardswish)
    return apply(hardswish_op, input)


hardshrink_op = _define_activation(
    "hardshrink", lambda x, *, lambd: threshold(x, lambd, 0.0) - threshold(-x, lambd, 0.0)
)


def hardshrink(input, lambd: float = 0.5):
    """``x if |x| > lambd else 0``."""
    return apply(hardshrink_op, input, lambd=float(lambd))


def _softshrink_meta(x, *, lambd):
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}")
    return Meta(tuple(x.shape), x.dtype)


softshrink_op = _define_activation(
    "softshrink", lambda x, *, lambd: relu(x - lambd) - relu(-x - lambd), meta=_softshrink_meta
)


def softshrink(input, lambd: float = 0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    return apply(softshrink_op, input, lambd=float(lambd))


def _prelu_meta(input, weight):
    _check_float(input, "prelu")
    n = weight.numel()
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.ndim > 1 or (n != 1 and n != channels):
        raise RuntimeError(
            f"prelu: expected weight with 1 element or {channels} elements (the size of dim 1 of the input), "
            f"got weight of shape {list(weight.shape)}"
        )
    return Meta(tuple(input.shape), D.result_type(input, weight))


def _prelu_decomposition(input, weight):
    if weight.numel() != 1 and input.ndim >= 2:
        weight = weight.reshape((input.shape[1],) + (1,) * (input.ndim - 2))
    elif input.ndim == 0:
        weight = weight.reshape(())
    return relu(input) - weight * relu(-input)


prelu_op = _define_activation("prelu", _prelu_decomposition, meta=_prelu_meta, inputs=("self", "weight"))


def prelu(input, weight):
    """``x if x > 0 else weight * x``; ``weight`` has 1 or C (= dim 1) elements."""
    return apply(prelu_op, input, weight)


def rrelu(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, inplace: bool = False):
    """Leaky ReLU with a random slope in [lower, upper] per element when training, else their mean."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    if inplace:
        return _composite_inplace(input, lambda x: rrelu(x, lower, upper, training))
    slope = _munet().rand(tuple(input.shape), dtype=input.dtype, device=input.device) * (upper - lower) + lower
    return relu(input) - slope * relu(-input)


def rrelu_(input, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False):
    return rrelu(input, lower, upper, training, inplace=True)


# elu family ------------------------------------------------------------------------------------------


def _elu_backward(ctx, g):
    m = _munet()
    a = ctx.attrs
    x, result = ctx.saved_tensor("self"), ctx.saved_tensor("result")
    # for x <= 0: d/dx scale*alpha*(exp(x*s) - 1) = s * (result + scale*alpha); no overflow on x > 0
    negative = (result + a["scale"] * a["alpha"]) * a["input_scale"]
    return g * m.where(x > 0, a["scale"], negative)


def _elu(args, t, *, alpha, scale, input_scale):
    (x,) = args
    negative = scalar.mul(scalar.expm1(scalar.mul(scalar.minimum(x, 0), input_scale)), alpha * scale)
    return scalar.where(scalar.gt(x, 0), scalar.mul(x, scale), negative)


elu_op = define("elu", meta=_float_meta("elu"), backward=_elu_backward, saves=("self", "result"), formula=_elu)


def _elu_family(input, alpha, scale, input_scale, inplace: bool):
    attrs = dict(alpha=float(alpha), scale=float(scale), input_scale=float(input_scale))
    if inplace:
        return apply_inplace(elu_op, input, **attrs)
    return apply(elu_op, input, **attrs)


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """``x if x > 0 else alpha * (exp(x) - 1)``."""
    return _elu_family(input, alpha, 1.0, 1.0, inplace)


def elu_(input, alpha: float = 1.0):
    return _elu_family(input, alpha, 1.0, 1.0, True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace: bool = False):
    return _elu_family(input, _SELU_ALPHA, _SELU_SCALE, 1.0, inplace)


def selu_(input):
    return _elu_family(input, _SELU_ALPHA, _SELU_SCALE, 1.0, True)


def celu(input, alpha: float = 1.0, inplace: bool = False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise RuntimeError("celu: ZeroDivisionError, alpha must not be 0")
    return _elu_family(input, alpha, 1.0, 1.0 / alpha, inplace)


def celu_(input, alpha: float = 1.0):
    return celu(input, alpha, True)


# softplus and smooth activations --------------------------------------------------------------------------


def _softplus_backward(ctx, g):
    m = _munet()
    x = ctx.saved_tensor("self")
    beta, threshold = ctx.attrs["beta"], ctx.attrs["threshold"]
    bx = x * beta
    return g * m.where(bx > threshold, 1.0, m.sigmoid(bx))


def _softplus(args, t, *, beta, threshold):
    (x,) = args
    bx = scalar.mul(x, beta)
    # log(1 + exp(bx)) without overflow: max(bx, 0) + log1p(exp(-|bx|))
    smooth = scalar.add(scalar.maximum(bx, 0), scalar.log1p(scalar.exp(scalar.neg(scalar.abs(bx)))))
    return scalar.where(scalar.gt(bx, threshold), x, scalar.div(smooth, beta))


softplus_op = define("softplus", meta=_float_meta("softplus"), backward=_softplus_backward, saves=("self",),
                     formula=_softplus)  # fmt: skip


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    return apply(softplus_op, input, beta=float(beta), threshold=float(threshold))


def sigmoid(input):
    return _munet().sigmoid(input)


def tanh(input):
    return _munet().tanh(input)


def _gelu_meta(x, *, approximate):
    _check_float(x, "gelu")
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"gelu: approximate argument must be either 'none' or 'tanh', got '{approximate}'")
    return Meta(tuple(x.shape), x.dtype)


# GELU and its gradient are composites (the decompositions are their meaning) that also give their
# scalar formula, the same arithmetic in the same order: every backend renders its fast kernel from
# it, so each is one pass (tests/ops/test_composites.py checks the kernels against the decompositions).
# The gradient's composite has no rule of its own: a double backward differentiates its decomposition.
_GELU_A = 0.044715  # the cubic coefficient of the tanh approximation
_SQRT_HALF = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_decomposition(x, *, approximate):
    """``x * Phi(x)`` with the erf (``'none'``) or its tanh approximation (``'tanh'``)."""
    m = _munet()
    if approximate == "none":
        return x * 0.5 * (1.0 + m.erf(x * _SQRT_HALF))
    inner = (x + x * x * x * _GELU_A) * _SQRT_2_OVER_PI
    return x * 0.5 * (1.0 + m.tanh(inner))


def _gelu_formula(args, t, *, approximate):
    (x,) = args
    half_x = scalar.mul(x, 0.5)
    if approximate == "none":
        return scalar.mul(half_x, scalar.add(scalar.erf(scalar.mul(x, _SQRT_HALF)), 1.0))
    cube = scalar.mul(scalar.mul(scalar.mul(x, x), x), _GELU_A)
    return scalar.mul(half_x, scalar.add(scalar.tanh(scalar.mul(scalar.add(x, cube), _SQRT_2_OVER_PI)), 1.0))


def _gelu_backward_decomposition(grad, x, *, approximate):
    """``grad * d gelu(x) / dx``: ``Phi(x) + x * phi(x)`` (erf), or the tanh approximation's derivative
    ``0.5 * (1 + t) + 0.5 * x * (1 - t^2) * sqrt(2 / pi) * (1 + 3 a x^2)``."""
    m = _munet()
    if approximate == "none":
        return grad * (0.5 * (1.0 + m.erf(x * _SQRT_HALF)) + x * (m.exp(x * x * -0.5) * _INV_SQRT_2PI))
    t = m.tanh((x + x * x * x * _GELU_A) * _SQRT_2_OVER_PI)
    slope = (1.0 - t * t) * ((1.0 + x * x * (3.0 * _GELU_A)) * _SQRT_2_OVER_PI)
    return grad * (0.5 * (1.0 + t) + x * 0.5 * slope)


def _gelu_backward_formula(args, t, *, approximate):
    grad, x = args
    mul, add = scalar.mul, scalar.add
    if approximate == "none":
        cdf = mul(add(scalar.erf(mul(x, _SQRT_HALF)), 1.0), 0.5)
        density = mul(scalar.exp(mul(mul(x, x), -0.5)), _INV_SQRT_2PI)
        return mul(grad, add(cdf, mul(x, density)))
    cube = mul(mul(mul(x, x), x), _GELU_A)
    th = scalar.tanh(mul(add(x, cube), _SQRT_2_OVER_PI))
    slope = mul(scalar.sub(1.0, mul(th, th)), mul(add(mul(mul(x, x), 3.0 * _GELU_A), 1.0), _SQRT_2_OVER_PI))
    return mul(grad, add(mul(add(th, 1.0), 0.5), mul(mul(x, 0.5), slope)))


gelu_backward_op = define(
    "gelu_backward",
    inputs=("grad", "self"),
    meta=_grad_meta,
    decomposition=_gelu_backward_decomposition,
    formula=_gelu_backward_formula,
)
gelu_op = define(
    "gelu",
    meta=_gelu_meta,
    backward=lambda ctx, g: apply(gelu_backward_op, g, ctx.saved_tensor("self"), **ctx.attrs),
    saves=("self",),
    decomposition=_gelu_decomposition,
    formula=_gelu_formula,
)
silu_op = _define_activation("silu", lambda x: x * _munet().sigmoid(x), meta=_float_meta("silu"))
mish_op = _define_activation("mish", lambda x: x * _munet().tanh(softplus(x)))
softsign_op = _define_activation("softsign", lambda x: x / (x.abs() + 1.0))
logsigmoid_op = _define_activation("logsigmoid", lambda x: -softplus(-x))  # stable for large |x|
tanhshrink_op = _define_activation("tanhshrink", lambda x: x - _munet().tanh(x))


def gelu(input, approximate: str = "none"):
    """``x * Phi(x)`` (``approximate='none'``) or its tanh approximation (``'tanh'``)."""
    return apply(gelu_op, input, approximate=approximate)


def silu(input, inplace: bool = False):
    """``x * sigmoid(x)``."""
    _check_float(input, "silu")
    if inplace:
        return _composite_inplace(input, silu)
    return apply(silu_op, input)


def mish(input, inplace: bool = False):
    """``x * tanh(softplus(x))``."""
    if inplace:
        return _composite_inplace(input, mish)
    return apply(mish_op, input)


def softsign(input):
    """``x / (1 + |x|)``."""
    return apply(softsign_op, input)


def logsigmoid(input):
    """``log(sigmoid(x))``, computed stably as ``-softplus(-x)``."""
    return apply(logsigmoid_op, input)


def tanhshrink(input):
    """``x - tanh(x)``."""
    return apply(tanhshrink_op, input)


def _glu_meta(x, *, dim):
    if x.ndim == 0:
        raise RuntimeError("glu: does not support scalars because halving size must be even")
    d = wrap_dim(dim, x.ndim, "glu")
    n = x.shape[d]
    if n % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {d} is size {n}")
    return Meta(tuple(n // 2 if i == d else s for i, s in enumerate(x.shape)), x.dtype)


def _glu_decomposition(x, *, dim):
    """``a * sigmoid(b)`` of the two halves ``a, b`` along ``dim``."""
    d = wrap_dim(dim, x.ndim, "glu")
    half = x.shape[d] // 2
    return x.narrow(d, 0, half) * _munet().sigmoid(x.narrow(d, half, half))


glu_op = _define_activation("glu", _glu_decomposition, meta=_glu_meta)


def glu(input, dim: int = -1):
    """``a * sigmoid(b)`` where ``a, b`` are the two halves of ``input`` along ``dim``."""
    return apply(glu_op, input, dim=int(dim))


# softmax family ---------------------------------------------------------------------------------------


def _softmax_meta(x, *, dim):
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"softmax: expected a floating point input, got {x.dtype.name} (pass dtype=)")
    return Meta(tuple(x.shape), x.dtype)


def _softmax_backward_decomposition(grad, y, *, dim):
    """``grad * y - y * sum(grad * y)``: softmax's input gradient from its output ``y``."""
    gy = grad * y
    return gy - y * gy.sum(dim, keepdim=True)


# softmax's gradient: a composite (one fast kernel instead of four passes where a backend has one; a
# double backward differentiates its decomposition)
softmax_backward_op = define(
    "softmax_backward",
    inputs=("grad", "result"),
    meta=lambda grad, y, *, dim: Meta(tuple(y.shape), y.dtype),
    decomposition=_softmax_backward_decomposition,
)


def _softmax_backward(ctx, g):
    return apply(softmax_backward_op, g, ctx.saved_tensor("result"), dim=ctx.attrs["dim"])


def _log_softmax_backward(ctx, g):
    y = ctx.saved_tensor("result")
    return g - y.exp() * g.sum(ctx.attrs["dim"], keepdim=True)


def _shifted(x, dim: int):
    """``x - max(x)`` along ``dim``, in float32 for 16-bit floats (as PyTorch computes them)."""
    if x.dtype in (D.float16, D.bfloat16):
        x = x.to(D.float32)
    return x - x.amax(dim, keepdim=True)


def _softmax_decomposition(x, *, dim):
    """``exp(x - max) / sum(exp(x - max))``: a row holding +inf or NaN gives NaN, as PyTorch."""
    if x.numel() == 0:
        return x.clone()
    e = _shifted(x, dim).exp()
    return (e / e.sum(dim, keepdim=True)).to(x.dtype)


def _log_softmax_decomposition(x, *, dim):
    """``(x - max) - log(sum(exp(x - max)))``."""
    if x.numel() == 0:
        return x.clone()
    shifted = _shifted(x, dim)
    return (shifted - shifted.exp().sum(dim, keepdim=True).log()).to(x.dtype)


def _define_softmax(name: str, backward, decomposition):
    """One of the softmax family: a composite whose gradient rule reads its result."""
    return define(name, meta=_softmax_meta, backward=backward, saves=("result",), decomposition=decomposition)


softmax_op = _define_softmax("softmax", _softmax_backward, _softmax_decomposition)
log_softmax_op = _define_softmax("log_softmax", _log_softmax_backward, _log_softmax_decomposition)


def _softmax_dim(name: str, ndim: int, dim, stacklevel: int = 4) -> int:
    if dim is None:
        warnings.warn(
            f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an argument.",
            stacklevel=stacklevel,
        )
        dim = 0 if ndim in (0, 1, 3) else 1
    return wrap_dim(dim, ndim, name)


def _softmax_input(input, dtype, stacklevel=None):
    if dtype is None and isinstance(stacklevel, D.dtype):
        dtype = stacklevel  # torch.softmax(x, dim, dtype): the third positional is the dtype
    if dtype is not None and input.dtype is not dtype:
        input = input.to(dtype)
    return input


def softmax(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """``exp(x) / sum(exp(x))`` along ``dim`` (computed stably); ``dtype`` casts the input first."""
    dim = _softmax_dim("softmax", input.ndim, dim)
    return apply(softmax_op, _softmax_input(input, dtype, _stacklevel), dim=dim)


def log_softmax(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """``x - logsumexp(x)`` along ``dim``."""
    dim = _softmax_dim("log_softmax", input.ndim, dim)
    return apply(log_softmax_op, _softmax_input(input, dtype, _stacklevel), dim=dim)


def softmin(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """``softmax(-x)``."""
    dim = _softmax_dim("softmin", input.ndim, dim)
    return apply(softmax_op, -_softmax_input(input, dtype, _stacklevel), dim=dim)


# dropout ------------------------------------------------------------------------------------------------


def _check_p(p: float, name: str) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"{name}: dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(input, shape, p: float):
    """A 0/1 mask of ``shape`` (in ``input``'s dtype): each entry kept with probability 1 - p."""
    m = _munet()
    return m.bernoulli(m.full(tuple(shape), 1.0 - p, dtype=input.dtype, device=input.device))


def _apply_noise(input, shape, p: float, alpha: bool, inplace: bool):
    if p == 1.0 and not alpha:
        out = input * 0.0
    else:
        noise = _keep_mask(input, shape, p)
        if alpha:
            a_const = 1.7580993408473766
            a = 1.0 / math.sqrt((a_const * a_const * p + 1) * (1 - p))
            b = (noise - 1.0) * (a_const * a) + a_const * a * p
            out = input * (noise * a) + b
        else:
            out = input * (noise * (1.0 / (1.0 - p)))
    return input.copy_(out) if inplace else out


def _dropout_impl(input, p, training, inplace, shape, alpha: bool, name: str):
    _check_p(p, name)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name}: expected a floating point input, got {input.dtype.name}")
    return _apply_noise(input, shape, p, alpha, inplace)


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (training only)."""
    return _dropout_impl(input, p, training, inplace, tuple(input.shape), False, "dropout")


def dropout_(input, p: float = 0.5, training: bool = True):
    return dropout(input, p, training, inplace=True)


def alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """Dropout that keeps SELU's zero mean and unit variance."""
    return _dropout_impl(input, p, training, inplace, tuple(input.shape), True, "alpha_dropout")


def alpha_dropout_(input, p: float = 0.5, training: bool = False):
    return alpha_dropout(input, p, training, inplace=True)


def _feature_noise_shape(shape: tuple, name: str) -> tuple:
    """(N, C, 1, ...): PyTorch's feature dropout zeroes whole (sample, channel) slices."""
    if len(shape) < 2:
        raise RuntimeError(f"{name}: Feature dropout requires at least 2 dimensions in the input")
    return tuple(shape[:2]) + (1,) * (len(shape) - 2)


def _warn_unexpected_rank(input, spatial: int, name: str) -> None:
    warnings.warn(
        f"{name}: Received a {input.ndim}-D input to {name}, which is deprecated and will result in an error in a "
        f"future release. To retain the behavior and silence this warning, please use dropout instead. Note that "
        f"{name} exists to provide channel-wise dropout on inputs with {spatial} spatial dimensions, a channel "
        f"dimension, and an optional batch dimension (i.e. {spatial + 1}D or {spatial + 2}D inputs).",
        stacklevel=3,
    )


def _unbatched_noise_shape(input, batched_rank: int, name: str) -> tuple:
    """Noise shape of dropout1d/3d, which treat any rank but ``batched_rank`` as one sample (PyTorch)."""
    if input.ndim == batched_rank:
        return _feature_noise_shape(tuple(input.shape), name)
    return _feature_noise_shape((1,) + tuple(input.shape), name)[1:]


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, L) or (C, L) inputs."""
    _check_p(p, "dropout1d")
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that dropout1d exists to "
            "provide channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, and an optional "
            "batch dimension (i.e. 2D or 3D inputs)."
        )
    return _dropout_impl(input, p, training, inplace, _unbatched_noise_shape(input, 3, "dropout1d"), False, "dropout1d")


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, H, W) inputs. As in PyTorch, a 3D input is read as (N, C, L) with a
    warning, and other ranks warn and drop (dim 0, dim 1) slices."""
    _check_p(p, "dropout2d")
    if input.ndim not in (3, 4):
        _warn_unexpected_rank(input, 2, "dropout2d")
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior is "
            "desired - input is interpreted as shape (N, C, L), where C is the channel dim.",
            stacklevel=2,
        )
    return _dropout_impl(
        input, p, training, inplace, _feature_noise_shape(tuple(input.shape), "dropout2d"), False, "dropout2d"
    )


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs; other ranks warn and are read as
    one unbatched sample, as in PyTorch."""
    _check_p(p, "dropout3d")
    if input.ndim not in (4, 5):
        _warn_unexpected_rank(input, 3, "dropout3d")
    return _dropout_impl(input, p, training, inplace, _unbatched_noise_shape(input, 5, "dropout3d"), False, "dropout3d")


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False, inplace: bool = False):
    """Alpha dropout of whole channels (dim 1)."""
    if input.ndim < 2:
        raise RuntimeError(f"feature_alpha_dropout: expected input of rank >= 2, got shape {list(input.shape)}")
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return _dropout_impl(input, p, training, inplace, shape, True, "feature_alpha_dropout")


def feature_alpha_dropout_(input, p: float, train: bool):
    """``torch.feature_alpha_dropout_``: in-place alpha dropout of whole channels (dim 1)."""
    return feature_alpha_dropout(input, p, train, inplace=True)


def feature_dropout(input, p: float, train: bool, inplace: bool = False):
    """``torch.feature_dropout``: zero whole (sample, channel) slices of an input of rank >= 2."""
    shape = _feature_noise_shape(tuple(input.shape), "feature_dropout")
    return _dropout_impl(input, p, train, inplace, shape, False, "feature_dropout")


def feature_dropout_(input, p: float, train: bool):
    """``torch.feature_dropout_``: ``feature_dropout`` in place."""
    return feature_dropout(input, p, train, inplace=True)
