"""Normalization: layer_norm, rms_norm, batch_norm, group_norm, instance_norm, normalize.

The normalizations are composites (``define(..., decomposition=)``), each written in public ops
beside its definition and built on one lower composite, ``standardize``: over ``dims`` it returns
``xhat = (x - mean) * rstd`` (or ``x * rstd`` without centering, for RMS norm) and
``rstd = 1 / sqrt(var + eps)`` (kept dims). Its decomposition (two sums, then the scale) is its
meaning: the compiler fuses it into two reductions and one elementwise kernel; the cpu and
vulkan backends register fast kernels for eager mode (``tests/ops/test_composites.py`` checks
them against it). Its gradient is the analytic formula written with public ops, and both outputs
are differentiable, so double backward is exact. The norms around it (affine weight/bias, batch
and instance norm's running statistics, updated in place without gradient) differentiate through
their decompositions' ops.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from munet import _dtype as D
from munet.autograd.grad_mode import no_grad
from munet.ops._registry import Meta, apply, define
from munet.ops._scalar import scalar
from munet.ops._utils import is_tensor, wrap_dim

# torch.batch_norm / torch.instance_norm take (input, weight, bias, running_mean, ...), an order
# unlike F's; they are left out of the munet namespace rather than given F's meaning.
__all__ = ["layer_norm", "rms_norm", "group_norm"]
__functional__ = [
    "layer_norm",
    "rms_norm",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "normalize",
    "local_response_norm",
]
__tensor_methods__: list[str] = []


# the primitive ------------------------------------------------------------------------------------


def _standardize_meta(x, *, dims, eps, center):
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"standardize: expected a floating point input, got {x.dtype.name}")
    kept = tuple(1 if i in dims else n for i, n in enumerate(x.shape))
    return Meta(tuple(x.shape), x.dtype), Meta(kept, x.dtype)


def _standardize_backward(ctx, g, g_rstd):
    xhat = ctx.saved_tensor("result")
    rstd = ctx.saved_tensor("rstd")
    dims = ctx.attrs["dims"]
    count = 1
    for d in dims:
        count *= ctx.input_shapes[0][d]
    grad = None
    if g is not None:
        mean_g = g.mean(dims, keepdim=True) if ctx.attrs["center"] else 0.0
        grad = apply(standardize_input_grad_op, g, xhat, (g * xhat).mean(dims, keepdim=True), mean_g, rstd)
    if g_rstd is not None:
        # d rstd / dx_i = -rstd^2 * xhat_i / count (with or without centering)
        term = xhat * (g_rstd * rstd * rstd) * (-1.0 / max(count, 1))
        grad = term if grad is None else grad + term
    return grad


def _input_grad_meta(g, xhat, mean_gxhat, mean_g, rstd):
    return Meta(tuple(g.shape), g.dtype)


def _input_grad_decomposition(g, xhat, mean_gxhat, mean_g, rstd):
    """``(g - xhat * mean(g * xhat) - mean(g)) * rstd``, the means given (``mean_g`` is 0 without centering)."""
    return (g - xhat * mean_gxhat - mean_g) * rstd


def _input_grad_formula(args, t):
    g, xhat, mean_gxhat, mean_g, rstd = args
    return scalar.mul(scalar.sub(scalar.sub(g, scalar.mul(xhat, mean_gxhat)), mean_g), rstd)


# The elementwise part of standardize's input gradient: a composite whose fast kernel every backend
# renders from its formula (one pass instead of four); a double backward differentiates its decomposition.
standardize_input_grad_op = define(
    "standardize_input_grad",
    inputs=("grad", "result", "mean_grad_result", "mean_grad", "rstd"),
    meta=_input_grad_meta,
    decomposition=_input_grad_decomposition,
    formula=_input_grad_formula,
)


def _standardize_decomposition(x, *, dims, eps, center):
    """Mean, centered values, mean of squares, ``1 / sqrt(var + eps)`` and the scale, in that
    order; 16-bit floats compute in float32. Empty ``dims`` give ``mean = x``; an empty reduction
    gives a NaN ``rstd``."""
    xf = x.to(D.float32) if x.dtype in (D.float16, D.bfloat16) else x
    count = 1
    for d in dims:
        count *= x.shape[d]

    def mean(v):
        return v.sum(dims, keepdim=True) / float(count) if dims else v

    centered = xf - mean(xf) if center else xf
    rstd = 1.0 / (mean(centered * centered) + eps).sqrt()
    return (centered * rstd).to(x.dtype), rstd.to(x.dtype)


standardize_op = define(
    "standardize",
    outputs=("result", "rstd"),
    meta=_standardize_meta,
    backward=_standardize_backward,
    saves=("result", "rstd"),
    backward_name="NativeLayerNormBackward0",
    decomposition=_standardize_decomposition,
)


def standardize(x, dims: tuple, eps: float, center: bool = True):
    """``((x - mean) * rstd, rstd)`` over ``dims`` (``x * rstd`` when not ``center``)."""
    return apply(standardize_op, x, dims=tuple(dims), eps=float(eps), center=bool(center))


# helpers ---------------------------------------------------------------------------------------------


def _finfo_eps(dtype) -> float:
    if dtype is D.bfloat16:
        return float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)
    return float(np.finfo(dtype.np).eps)


def _as_shape(normalized_shape) -> tuple:
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)


def _normalized_shape(normalized_shape, input, op: str) -> tuple:
    shape = _as_shape(normalized_shape)
    k = len(shape)
    if k == 0:
        raise RuntimeError(f"{op}: expected normalized_shape to be at least 1-dimensional, got {list(shape)}")
    if input.ndim < k or tuple(input.shape[input.ndim - k :]) != shape:
        raise RuntimeError(
            f"{op}: given normalized_shape={list(shape)}, expected input with shape [*, {', '.join(map(str, shape))}], "
            f"but got input of size {list(input.shape)}"
        )
    return shape


def _check_param(param, shape, name: str, op: str) -> None:
    if param is not None and tuple(param.shape) != tuple(shape):
        raise RuntimeError(f"{op}: expected {name} of shape {list(shape)}, got {list(param.shape)}")


def _channel_view(param, ndim: int):
    """A (C,) parameter viewed as (1, C, 1, ..., 1) to broadcast over (N, C, *)."""
    return param.reshape((1, -1) + (1,) * (ndim - 2))


def _affine(out, weight, bias):
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def _check_float(input, op: str) -> None:
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point input, got {input.dtype.name}")


# layer / rms / group norm: composites over standardize --------------------------------------------
#
# Each public function checks its arguments and applies its composite op; the op's decomposition,
# beside it, is its meaning (``standardize`` and the affine ops), read by eager mode, autograd,
# tracing, ONNX export and every backend. The gradient comes from the decomposition's ops.


def _float_result(input, *params):
    return D.result_type(input, *(p for p in params if p is not None))


def _layer_norm_meta(input, weight, bias, *, normalized_shape, eps):
    _check_float(input, "layer_norm")
    shape = _normalized_shape(normalized_shape, input, "layer_norm")
    _check_param(weight, shape, "weight", "layer_norm")
    _check_param(bias, shape, "bias", "layer_norm")
    return Meta(tuple(input.shape), _float_result(input, weight, bias))


def _layer_norm_decomposition(input, weight, bias, *, normalized_shape, eps):
    dims = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    xhat, _ = standardize(input, dims, eps, center=True)
    return _affine(xhat, weight, bias)


layer_norm_op = define(
    "layer_norm",
    inputs=("input", "weight", "bias"),
    meta=_layer_norm_meta,
    decomposition=_layer_norm_decomposition,
)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """Normalize over the trailing ``normalized_shape`` dims, then ``* weight + bias``."""
    return apply(layer_norm_op, input, weight, bias, normalized_shape=_as_shape(normalized_shape), eps=float(eps))


def _rms_norm_meta(input, weight, *, normalized_shape, eps):
    _check_float(input, "rms_norm")
    shape = _normalized_shape(normalized_shape, input, "rms_norm")
    _check_param(weight, shape, "weight", "rms_norm")
    return Meta(tuple(input.shape), _float_result(input, weight))


def _rms_norm_decomposition(input, weight, *, normalized_shape, eps):
    dims = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    xhat, _ = standardize(input, dims, eps, center=False)
    return _affine(xhat, weight, None)


rms_norm_op = define("rms_norm", inputs=("input", "weight"), meta=_rms_norm_meta, decomposition=_rms_norm_decomposition)


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing dims; ``eps=None`` is the dtype's epsilon."""
    if eps is None:  # the dtype's epsilon; a non-float input is refused by the op's meta
        eps = _finfo_eps(input.dtype) if is_tensor(input) and input.dtype.is_floating_point else 0.0
    return apply(rms_norm_op, input, weight, normalized_shape=_as_shape(normalized_shape), eps=float(eps))


def _group_norm_meta(input, weight, bias, *, num_groups, eps):
    _check_float(input, "group_norm")
    if input.ndim < 2:
        raise RuntimeError(f"group_norm: expected input of rank >= 2 (N, C, *), got shape {list(input.shape)}")
    channels = input.shape[1]
    if num_groups <= 0 or channels % num_groups != 0:
        raise RuntimeError(
            f"group_norm: expected number of channels in input to be divisible by num_groups, but got input of "
            f"shape {list(input.shape)} and num_groups={num_groups}"
        )
    _check_param(weight, (channels,), "weight", "group_norm")
    _check_param(bias, (channels,), "bias", "group_norm")
    return Meta(tuple(input.shape), _float_result(input, weight, bias))


def _group_norm_decomposition(input, weight, bias, *, num_groups, eps):
    grouped = input.reshape(input.shape[0], num_groups, -1)
    xhat, _ = standardize(grouped, (2,), eps, center=True)
    return _channel_affine(xhat.reshape(tuple(input.shape)), weight, bias)


group_norm_op = define(
    "group_norm",
    inputs=("input", "weight", "bias"),
    meta=_group_norm_meta,
    decomposition=_group_norm_decomposition,
)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    """Normalize over groups of ``C // num_groups`` channels (and all spatial dims) per sample."""
    return apply(group_norm_op, input, weight, bias, num_groups=int(num_groups), eps=float(eps))


# batch / instance norm: composites whose decomposition also updates the running statistics ------------


def _channel_affine(out, weight, bias):
    w = _channel_view(weight, out.ndim) if weight is not None else None
    b = _channel_view(bias, out.ndim) if bias is not None else None
    return _affine(out, w, b)


def _update_running(running, stat, momentum: float) -> None:
    with no_grad():
        running.copy_(running * (1.0 - momentum) + stat.to(running.dtype) * momentum)


def _batch_stats(input, dims):
    """Mean and unbiased variance over ``dims`` (for running statistics; no gradient)."""
    with no_grad():
        count = 1
        for d in dims:
            count *= input.shape[d]
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).sum(dims, keepdim=True) / max(count - 1, 1)
    return mean, var


def _eval_normalize(input, running_mean, running_var, eps: float, op: str):
    if running_mean is None or running_var is None:
        raise RuntimeError(f"{op}: running_mean and running_var must be defined when not using batch statistics")
    import munet

    mean = _channel_view(running_mean, input.ndim)
    scale = munet.rsqrt(_channel_view(running_var, input.ndim) + eps)
    return (input - mean) * scale


def _channel_norm_meta(op: str, min_rank: int, shape_text: str, stats_dims, what: str):
    """Meta of batch_norm / instance_norm: (N, C, *) input, (C,) statistics and affine parameters."""

    def meta(input, running_mean, running_var, weight, bias, *, use_input_stats, momentum, eps):
        _check_float(input, op)
        if input.ndim < min_rank:
            raise ValueError(f"{op}: expected input of rank >= {min_rank} {shape_text}, got shape {list(input.shape)}")
        channels = input.shape[1]
        params = (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias))
        for name, t in params:
            _check_param(t, (channels,), name, op)
        if not use_input_stats and (running_mean is None or running_var is None):
            raise RuntimeError(f"{op}: running_mean and running_var must be defined when not using batch statistics")
        if use_input_stats:
            _check_count(input, stats_dims(input.ndim), what)
        return Meta(tuple(input.shape), _float_result(input, weight, bias))

    return meta


def _batch_dims(ndim: int) -> tuple:
    return (0, *range(2, ndim))


def _instance_dims(ndim: int) -> tuple:
    return tuple(range(2, ndim))


def _check_count(input, dims, what: str) -> None:
    count = 1
    for d in dims:
        count *= input.shape[d]
    if count == 1:
        raise ValueError(f"Expected more than 1 {what} when training, got input size {list(input.shape)}")


def _channel_norm_decomposition(op: str, stats_dims, per_channel):
    """batch_norm / instance_norm: standardize over ``stats_dims`` (and update the running
    statistics with the stats ``per_channel`` reduces to (C,)), or normalize with the running ones."""

    def decomposition(input, running_mean, running_var, weight, bias, *, use_input_stats, momentum, eps):
        if not use_input_stats:
            return _channel_affine(_eval_normalize(input, running_mean, running_var, eps, op), weight, bias)
        dims = stats_dims(input.ndim)
        out, _ = standardize(input, dims, eps, center=True)
        if running_mean is not None or running_var is not None:
            mean, var = _batch_stats(input, dims)
            if running_mean is not None:
                _update_running(running_mean, per_channel(mean, input), momentum)
            if running_var is not None:
                _update_running(running_var, per_channel(var, input), momentum)
        return _channel_affine(out, weight, bias)

    decomposition.__name__ = f"_{op}_decomposition"
    return decomposition


batch_norm_op = define(
    "batch_norm",
    inputs=("input", "running_mean", "running_var", "weight", "bias"),
    meta=_channel_norm_meta("batch_norm", 2, "(N, C, *)", _batch_dims, "value per channel"),
    decomposition=_channel_norm_decomposition("batch_norm", _batch_dims, lambda stat, x: stat.reshape(-1)),
)


def batch_norm(
    input,
    running_mean,
    running_var,
    weight=None,
    bias=None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
):
    """Batch normalization over (N, C, *) per channel C.

    In training it normalizes with the batch statistics and, when running statistics are
    given, updates them in place (without gradient) with ``momentum`` and the unbiased
    variance, like PyTorch; otherwise it normalizes with ``running_mean``/``running_var``.
    """
    attrs = dict(use_input_stats=bool(training), momentum=float(momentum), eps=float(eps))
    return apply(batch_norm_op, input, running_mean, running_var, weight, bias, **attrs)


instance_norm_op = define(
    "instance_norm",
    inputs=("input", "running_mean", "running_var", "weight", "bias"),
    meta=_channel_norm_meta("instance_norm", 3, "(N, C, *)", _instance_dims, "spatial element"),
    decomposition=_channel_norm_decomposition(
        "instance_norm", _instance_dims, lambda stat, x: stat.reshape(x.shape[0], x.shape[1]).mean(0)
    ),
)


def instance_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
):
    """Normalize each (sample, channel) over its spatial dims; running stats averaged over N."""
    attrs = dict(use_input_stats=bool(use_input_stats), momentum=float(momentum), eps=float(eps))
    return apply(instance_norm_op, input, running_mean, running_var, weight, bias, **attrs)


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
    """Normalize by the sum of squares over ``size`` neighbouring channels (AlexNet's LRN)."""
    import munet

    if input.ndim < 3:
        raise ValueError(
            f"local_response_norm: expected 3D or higher dimensional input, got {input.ndim} dimensions (shape {list(input.shape)})"
        )
    if input.numel() == 0:
        return input.clone()
    n, c = input.shape[0], input.shape[1]
    sq = (input * input).reshape(n, c, -1)
    before, after = size // 2, (size - 1) // 2
    zeros_before = munet.zeros(n, before, sq.shape[2], dtype=input.dtype, device=input.device)
    zeros_after = munet.zeros(n, after, sq.shape[2], dtype=input.dtype, device=input.device)
    padded = munet.cat([zeros_before, sq, zeros_after], dim=1)
    total = padded.narrow(1, 0, c)
    for i in range(1, size):
        total = total + padded.narrow(1, i, c)
    div = ((total / size) * alpha + k) ** beta
    return input / div.reshape(tuple(input.shape))


# normalize ---------------------------------------------------------------------------------------------


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``."""
    _check_float(input, "normalize")
    dim = wrap_dim(dim, input.ndim, "normalize")
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    result = input / denom
    if out is not None:
        return out.copy_(result)
    return result
