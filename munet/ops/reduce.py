"""Reductions over dims (int, tuple or None, with keepdim) and cumulative scans.

Primitives with kernels: ``sum``, ``prod``, ``amax``/``amin``, ``max``/``min``
along a dim (values and indices), ``argmax``/``argmin``, ``median``, the
scans ``cumsum``/``cumprod``/``cummax``/``cummin``, and the boolean reductions. ``nansum`` and
``logsumexp`` are composite ops (a decomposition in public ops beside their definition, fast
kernels on cpu and vulkan); ``mean``, ``var``, ``std``, ``norm`` and friends are functions
composed of those.

A few private primitives exist only for gradient rules, where PyTorch uses a dedicated
backward formula: ``reduce_tie_weights`` (split a gradient evenly among tied extrema),
``reduce_onehot`` (route a gradient to selected indices), ``safe_sqrt`` (sqrt whose
gradient is 0 where the result is 0, as PyTorch's std and norm), ``prod_others`` (product
of the other elements, exact with zeros) and the scan backward helpers.

Integer and bool inputs of ``sum``/``prod``/``cumsum``/``cumprod`` accumulate in int64;
float16/bfloat16 accumulate in float32 (the kernels' ``acc_dtype``).
"""

from __future__ import annotations

import builtins
import math
import warnings
from collections import namedtuple

from munet import _dtype as D
from munet.ops._registry import Meta, apply, define
from munet.ops._scalar import scalar
from munet.ops._utils import wrap_dim, wrap_dims

__all__ = [
    "sum", "nansum", "mean", "nanmean", "var", "std", "var_mean", "std_mean", "max", "min", "amax", "amin",
    "aminmax", "argmax", "argmin", "prod", "logsumexp", "cumsum", "cumprod", "cummax", "cummin", "norm",
    "all", "any", "count_nonzero", "median", "nanmedian", "mode",
]  # fmt: skip
__tensor_methods__ = [
    "sum", "nansum", "mean", "nanmean", "var", "std", "max", "min", "amax", "amin", "aminmax", "argmax",
    "argmin", "prod", "logsumexp", "cumsum", "cumprod", "cummax", "cummin", "norm", "all", "any",
    "count_nonzero", "median", "nanmedian", "mode", "cumsum_", "cumprod_",
]  # fmt: skip

_LOW_PRECISION = (D.float16, D.bfloat16)


# return types ---------------------------------------------------------------------------------------


def _return_type(name: str, fields: tuple[str, ...]):
    """A named tuple printed like ``torch.return_types.<name>``."""
    base = namedtuple(name, fields)

    def __repr__(self):  # noqa: N807 - the class's own repr
        body = ",\n".join(f"{f}={getattr(self, f)!r}" for f in fields)
        return f"munet.return_types.{name}(\n{body})"

    return type(name, (base,), {"__slots__": (), "__repr__": __repr__})


return_max = _return_type("max", ("values", "indices"))
return_min = _return_type("min", ("values", "indices"))
return_cummax = _return_type("cummax", ("values", "indices"))
return_cummin = _return_type("cummin", ("values", "indices"))
return_median = _return_type("median", ("values", "indices"))
return_nanmedian = _return_type("nanmedian", ("values", "indices"))
return_mode = _return_type("mode", ("values", "indices"))
return_aminmax = _return_type("aminmax", ("min", "max"))


# shapes and dims ------------------------------------------------------------------------------------


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple([1 if i in dims else n for i, n in enumerate(shape)])
    return tuple([n for i, n in enumerate(shape) if i not in dims])


def reduce_dims(input, dim, op: str) -> tuple:
    """``dim`` (None, int, or sequence; empty means all) as sorted non-negative dims of ``input``.

    A rank-0 tensor accepts dim 0 / -1 and has no dims to reduce.
    """
    ndim = len(input._shape)
    if type(dim) is int and ndim:  # the common case: one dim of a tensor of rank >= 1
        return (wrap_dim(dim, ndim, op),)
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    dims = wrap_dims(dim, ndim, op)
    return dims if ndim else ()


def _one_dim(input, dim, op: str) -> int:
    """A single non-negative dim; 0 for rank-0 tensors (which accept 0 and -1)."""
    return wrap_dim(dim, input.ndim, op)


def _reduce_meta(x, *, dims, keepdim, dtype=None):
    return Meta(reduced_shape(x._shape, dims, keepdim), dtype or x._dtype)


def _check_nonempty(op: str, x, dims) -> None:
    for d in dims:
        if x.shape[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")


def expand_reduced(g, input_shape, dims, keepdim: bool):
    """Broadcast the gradient of a reduction back over the reduced dims."""
    if not keepdim and dims and len(dims) < len(input_shape):  # (a full reduction's 0-d g expands as it is)
        shape = list(input_shape)
        for d in dims:
            shape[d] = 1
        g = g.reshape(shape)
    return g.expand(tuple(input_shape))


def _expand_result(r, input_shape, dims, keepdim: bool):
    return expand_reduced(r, input_shape, dims, keepdim)


def _numel(shape, dims) -> int:
    return math.prod(shape[d] for d in dims)


def _cast(x, dtype):
    return x if dtype is None or x.dtype is dtype else x.to(dtype)


def _integral_to_int64(x, dtype):
    """``dtype`` when given, else int64 for integer/bool inputs (PyTorch's sum/prod/cumsum rule)."""
    if dtype is not None:
        return dtype
    return x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else D.int64


def _require_float(op: str, x) -> None:
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}(): expected a floating point input, got {x.dtype.name}")


def _upcast_low(x):
    """float16/bfloat16 computed in float32 by composites; returns (x, dtype to cast back to)."""
    if x.dtype in _LOW_PRECISION:
        return x.to(D.float32), x.dtype
    return x, None


# gradient helpers (composites; cpu and vulkan run them as one kernel each) ---------------------------


def _tie_weights_meta(x, result, *, dims, keepdim):
    return Meta(tuple(x.shape), x.dtype)


def _tie_weights_decomposition(x, result, *, dims, keepdim):
    """``tied / max(count, 1)`` where ``tied`` says ``x`` equals its reduced ``result`` (a NaN
    equals a NaN) and ``count`` is the number tied in each reduced slice."""
    if not keepdim:
        result = result.reshape(tuple(1 if d in dims else n for d, n in enumerate(x.shape)))
    tied = x == result
    if x.dtype.is_floating_point:
        tied = tied | (x.isnan() & result.isnan())
    # counted in x's dtype (not int64, which a fused vulkan kernel cannot read)
    weights = tied.to(x.dtype if x.dtype.is_floating_point else D.float32)
    count = apply(sum_op, weights, dims=dims, keepdim=True) if dims else weights
    return (weights / count.clamp(min=1)).to(x.dtype)


tie_weights_op = define(
    "reduce_tie_weights", inputs=("self", "result"), meta=_tie_weights_meta, decomposition=_tie_weights_decomposition
)


def tie_weights(x, result, dims, keepdim: bool):
    """1/count where ``x`` equals the reduced ``result`` (NaN matches NaN), 0 elsewhere."""
    return apply(tie_weights_op, x.detach(), result.detach(), dims=dims, keepdim=keepdim)


def _onehot_decomposition(indices, *, dim, shape, keepdim, dtype):
    """1 where the position along ``dim`` of ``shape`` equals ``indices`` (reduced along ``dim``,
    kept or not), else 0: ``arange(shape[dim]) == indices``."""
    from munet.ops.creation import arange, ones

    if not shape:
        return ones((), dtype=dtype, device=indices.device)
    line = arange(shape[dim], device=indices.device).reshape(tuple(n if d == dim else 1 for d, n in enumerate(shape)))
    return (line == (indices if keepdim else indices.unsqueeze(dim))).to(dtype)


onehot_op = define(
    "reduce_onehot",
    meta=lambda indices, *, dim, shape, keepdim, dtype: Meta(tuple(shape), dtype),
    decomposition=_onehot_decomposition,
)


def _select_backward(g, indices, input_shape, dim: int, keepdim: bool):
    """The gradient of picking ``indices`` along ``dim``: ``g`` routed to those positions."""
    mask = apply(onehot_op, indices, dim=dim, shape=tuple(input_shape), keepdim=keepdim, dtype=g.dtype)
    return expand_reduced(g, input_shape, (dim,) if len(input_shape) else (), keepdim) * mask


def _safe_reciprocal_backward(ctx, g):
    r = ctx.saved_tensor("result")
    return -g * r * r


safe_reciprocal_op = define(
    "safe_reciprocal", meta=lambda x: Meta(tuple(x.shape), x.dtype), backward=_safe_reciprocal_backward,
    saves=("result",), formula=lambda args, t: scalar.where(scalar.eq(args[0], 0), 0, scalar.div(1, args[0])),
)  # fmt: skip


def _safe_sqrt_backward(ctx, g):
    return g * 0.5 * apply(safe_reciprocal_op, ctx.saved_tensor("result"))


safe_sqrt_op = define(
    "safe_sqrt", meta=lambda x: Meta(tuple(x.shape), x.dtype), backward=_safe_sqrt_backward, saves=("result",),
    formula=lambda args, t: scalar.sqrt(args[0]),
)  # fmt: skip


# sum, nansum, mean, nanmean ---------------------------------------------------------------------------


def _sum_backward(ctx, g):
    return expand_reduced(g, ctx.input_shapes[0], ctx.attrs["dims"], ctx.attrs["keepdim"])


sum_op = define("sum", meta=_reduce_meta, backward=_sum_backward)


def sum(input, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A001 - PyTorch's name
    """Sum over ``dim`` (all dims when None); integer and bool inputs sum to int64."""
    dims = reduce_dims(input, dim, "sum")
    if dtype is not None or not input._dtype.is_floating_point:
        input = _cast(input, _integral_to_int64(input, dtype))
    return apply(sum_op, input, dims=dims, keepdim=bool(keepdim))


def _nansum_backward(ctx, g):
    from munet.ops.elementwise import isnan, where

    g = expand_reduced(g, ctx.input_shapes[0], ctx.attrs["dims"], ctx.attrs["keepdim"])
    return where(isnan(ctx.saved_tensor("self")), 0.0, g)


def _nansum_decomposition(x, *, dims, keepdim):
    """``sum(where(isnan(x), 0, x))``."""
    from munet.ops.elementwise import where

    kept = where(x.isnan(), 0.0, x) if x.dtype.is_floating_point else x
    return kept.sum(dims, keepdim=keepdim) if dims else kept.clone()


nansum_op = define(
    "nansum",
    meta=_reduce_meta,
    backward=_nansum_backward,
    saves=("self",),
    decomposition=_nansum_decomposition,
)


def nansum(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Sum treating NaN as zero."""
    dims = reduce_dims(input, dim, "nansum")
    input = _cast(input, _integral_to_int64(input, dtype))
    return apply(nansum_op, input, dims=dims, keepdim=bool(keepdim))


def _mean_input(op: str, input, dtype):
    input = _cast(input, dtype)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(
            f"{op}(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {input.dtype.name}"
        )
    return input


def mean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Arithmetic mean over ``dim``; floating inputs only (like PyTorch). Mean of nothing is NaN."""
    input = _mean_input("mean", input, dtype)
    dims = reduce_dims(input, dim, "mean")
    total = apply(sum_op, input, dims=dims, keepdim=bool(keepdim))
    count = _numel(input.shape, dims)
    return total / count if count else total / 0.0


def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Mean of the non-NaN elements."""
    from munet.ops.elementwise import isnan

    input = _mean_input("nanmean", input, dtype)
    dims = reduce_dims(input, dim, "nanmean")
    count = apply(sum_op, isnan(input).logical_not().to(input.dtype), dims=dims, keepdim=bool(keepdim))
    return apply(nansum_op, input, dims=dims, keepdim=bool(keepdim)) / count


# var, std ---------------------------------------------------------------------------------------------


def _correction(op: str, unbiased, correction) -> float:
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{op}(): can't specify both unbiased and correction")
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _var_args(op: str, input, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):  # the var(input, unbiased) overload
        dim, unbiased = None, dim
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(
            f"{op}(): std and var only support floating point and complex dtypes, got {input.dtype.name}"
        )
    return reduce_dims(input, dim, op), _correction(op, unbiased, correction), bool(keepdim)


def _var(op: str, input, dims, correction, keepdim):
    x, back = _upcast_low(input)
    centered = x - mean(x, dims, keepdim=True)
    dof = _numel(x.shape, dims) - correction
    if centered.dtype.is_complex:  # |centered|^2: a real variance, as PyTorch's
        squares = centered.real.square() + centered.imag.square()
    else:
        squares = centered * centered
    total = sum(squares, dims, keepdim)
    if dof <= 0:
        warnings.warn(
            f"{op}(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor "
            "(input numel divided by output numel).",
            UserWarning,
            stacklevel=3,
        )
    out = total / dof if dof > 0 else total / 0.0
    return _cast(out, back)


def var(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """Variance over ``dim`` divided by ``N - correction`` (default correction 1, Bessel's)."""
    dims, correction, keepdim = _var_args("var", input, dim, unbiased, keepdim, correction)
    return _var("var", input, dims, correction, keepdim)


def std(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """Standard deviation; its gradient is 0 where the result is 0, as PyTorch's."""
    dims, correction, keepdim = _var_args("std", input, dim, unbiased, keepdim, correction)
    return apply(safe_sqrt_op, _var("std", input, dims, correction, keepdim))


def var_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """``(var, mean)`` over ``dim``."""
    dims, correction, keepdim = _var_args("var_mean", input, dim, unbiased, keepdim, correction)
    return _var("var_mean", input, dims, correction, keepdim), mean(input, dims, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """``(std, mean)`` over ``dim``."""
    dims, correction, keepdim = _var_args("std_mean", input, dim, unbiased, keepdim, correction)
    return apply(safe_sqrt_op, _var("std_mean", input, dims, correction, keepdim)), mean(input, dims, keepdim)


# amax, amin, max, min, argmax, argmin ------------------------------------------------------------------


def _extremum_backward(ctx, g):
    dims, keepdim = ctx.attrs["dims"], ctx.attrs["keepdim"]
    shape = ctx.input_shapes[0]
    w = tie_weights(ctx.saved_tensor("self"), ctx.saved_tensor("result"), dims, keepdim)
    return expand_reduced(g, shape, dims, keepdim) * w


amax_op = define("amax", meta=_reduce_meta, backward=_extremum_backward, saves=("self", "result"))
amin_op = define("amin", meta=_reduce_meta, backward=_extremum_backward, saves=("self", "result"))


def _amax_amin(op, name: str, input, dim, keepdim):
    dims = reduce_dims(input, dim, name)
    _check_nonempty(name, input, dims)
    return apply(op, input, dims=dims, keepdim=bool(keepdim))


def amax(input, dim=(), keepdim: bool = False):
    """Maximum over ``dim`` (all dims by default); the gradient splits evenly among ties.

    A NaN maximum routes the gradient to the NaNs (as PyTorch's ``max()``); PyTorch's ``amax``
    gives NaN gradients to the whole reduced slice instead.
    """
    return _amax_amin(amax_op, "amax", input, dim, keepdim)


def amin(input, dim=(), keepdim: bool = False):
    """Minimum over ``dim`` (all dims by default); the gradient splits evenly among ties."""
    return _amax_amin(amin_op, "amin", input, dim, keepdim)


def aminmax(input, *, dim=None, keepdim: bool = False):
    """``(min, max)`` over ``dim`` (all dims when None)."""
    name = "aminmax"
    if input.numel() == 0 and dim is None:
        raise RuntimeError(
            f"{name}(): cannot compute aminmax over an empty dimension as the operation has no identity."
        )
    dims = reduce_dims(input, dim, name)
    _check_nonempty(name, input, dims)
    lo = apply(amin_op, input, dims=dims, keepdim=bool(keepdim))
    hi = apply(amax_op, input, dims=dims, keepdim=bool(keepdim))
    return return_aminmax(lo, hi)


def _dim_meta(x, *, dim, keepdim):
    shape = reduced_shape(tuple(x.shape), (dim,) if x.ndim else (), keepdim)
    return Meta(shape, x.dtype), Meta(shape, D.int64)


def _value_select_backward(ctx, g, _g_indices=None):
    return _select_backward(g, ctx.saved_tensor("indices"), ctx.input_shapes[0], ctx.attrs["dim"], ctx.attrs["keepdim"])


def _arg_meta(x, *, dim, keepdim):
    if dim is None:
        shape = (1,) * x.ndim if keepdim else ()
    else:
        shape = reduced_shape(tuple(x.shape), (dim,) if x.ndim else (), keepdim)
    return Meta(shape, D.int64)


argmax_op = define("argmax", meta=_arg_meta)
argmin_op = define("argmin", meta=_arg_meta)


def _select_dim_decomposition(arg_op):
    def decomposition(x, *, dim, keepdim):
        """``argmax`` (``argmin``) along ``dim`` (its first extremum, or its first NaN), and the
        value found there (``gather``): a tie of -0.0 and +0.0 reports the first one's sign."""
        if x.ndim == 0:
            return x.clone(), apply(argmax_op, x, dim=None, keepdim=False)
        key = x.to(D.uint8) if x.dtype is D.bool_ else x
        indices = apply(arg_op, key, dim=dim, keepdim=True)
        values = x.gather(dim, indices)
        return (values, indices) if keepdim else (values.squeeze(dim), indices.squeeze(dim))

    return decomposition


max_dim_op = define(
    "max_dim", meta=_dim_meta, outputs=("values", "indices"), nondiff_outputs=(1,),
    backward=_value_select_backward, saves=("indices",), decomposition=_select_dim_decomposition(argmax_op),
)  # fmt: skip
min_dim_op = define(
    "min_dim", meta=_dim_meta, outputs=("values", "indices"), nondiff_outputs=(1,),
    backward=_value_select_backward, saves=("indices",), decomposition=_select_dim_decomposition(argmin_op),
)  # fmt: skip


def _max_min(name: str, full_op, dim_op, result_type, input, dim, keepdim, other):
    from munet.ops._utils import is_tensor

    if is_tensor(dim) or other is not None:
        import munet

        return getattr(munet, "maximum" if name == "max" else "minimum")(input, dim if other is None else other)
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}(): keepdim requires dim to be given")
        if input.numel() == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        return apply(full_op, input, dims=tuple(range(input.ndim)), keepdim=False)
    d = _one_dim(input, dim, name)
    if input.ndim:
        _check_nonempty(name, input, (d,))
    values, indices = apply(dim_op, input, dim=d, keepdim=bool(keepdim))
    return result_type(values, indices)


def max(input, dim=None, keepdim: bool = False, *, other=None):  # noqa: A001 - PyTorch's name
    """``max(input)``: the maximum; ``max(input, dim)``: ``(values, indices)`` (first occurrence);
    ``max(input, other)``: elementwise ``maximum``."""
    return _max_min("max", amax_op, max_dim_op, return_max, input, dim, keepdim, other)


def min(input, dim=None, keepdim: bool = False, *, other=None):  # noqa: A001 - PyTorch's name
    """``min(input)``, ``min(input, dim)`` -> ``(values, indices)``, or elementwise ``minimum``."""
    return _max_min("min", amin_op, min_dim_op, return_min, input, dim, keepdim, other)


def _arg_extremum(op, name: str, input, dim, keepdim):
    if input.dtype is D.bool_:
        raise RuntimeError(f"{name}(): does not support bool input")
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
        return apply(op, input, dim=None, keepdim=bool(keepdim))
    d = _one_dim(input, dim, name)
    if input.ndim:
        _check_nonempty(name, input, (d,))
    return apply(op, input, dim=d, keepdim=bool(keepdim))


def argmax(input, dim=None, keepdim: bool = False):
    """Index of the first maximum (of the flattened input when ``dim`` is None)."""
    return _arg_extremum(argmax_op, "argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim: bool = False):
    """Index of the first minimum (of the flattened input when ``dim`` is None)."""
    return _arg_extremum(argmin_op, "argmin", input, dim, keepdim)


# prod -------------------------------------------------------------------------------------------------


def _keep_reduced(op, x, dims):
    """``op`` (sum, prod) of ``x`` over ``dims`` with keepdim; ``x`` itself when ``dims`` is empty."""
    return apply(op, x, dims=dims, keepdim=True) if dims else x


def _prod_others_backward_decomposition(g, x, *, dims):
    """``sum_{i != k} g_i prod_{j != i, k} x_j`` for each k over ``dims``, exact with zeros: with no
    zero among the others it is ``prod_{j != k} x_j * sum_{i != k} g_i / x_i``; with exactly one
    other zero z only the term i = z survives; with more it is 0. 16-bit floats compute in float32."""
    from munet.ops.elementwise import where

    (a, back), gm = _upcast_low(x), g.to(D.float32) if g.dtype in _LOW_PRECISION else g
    zero = a == 0
    nonzero = where(zero, 1.0, a)
    ratio = where(zero, 0.0, gm / nonzero)
    others = _keep_reduced(prod_op, nonzero, dims) / nonzero  # product of the nonzeros other than x_k
    no_other_zero = others * (_keep_reduced(sum_op, ratio, dims) - ratio)
    at_zero = where(zero, gm, 0.0)
    one_other_zero = (_keep_reduced(sum_op, at_zero, dims) - at_zero) * others
    other_zeros = _keep_reduced(sum_op, zero.to(D.int64), dims) - zero.to(D.int64)
    out = where(other_zeros == 0, no_other_zero, where(other_zeros == 1, one_other_zero, 0.0))
    return out if back is None else out.to(back)


def _no_double_backward(name: str):
    """The gradient rule of a gradient composite whose decomposition is exact only in value: its zero
    branches are piecewise constant, so differentiating them would drop the terms through a zero."""

    def backward(ctx, *grads):
        raise RuntimeError(f"{name}: double backward (create_graph=True) is not supported")

    return backward


# Reached by second-order gradients of prod.
prod_others_backward_op = define(
    "prod_others_backward", inputs=("grad", "self"), meta=lambda g, x, *, dims: Meta(tuple(x.shape), x.dtype),
    backward=_no_double_backward("prod (third order)"), decomposition=_prod_others_backward_decomposition,
)  # fmt: skip


def _prod_others_backward(ctx, g):
    return apply(prod_others_backward_op, g, ctx.saved_tensor("self"), dims=ctx.attrs["dims"])


def _prod_others_decomposition(x, *, dims):
    """Per element, the product of the other elements over ``dims``, exact with zeros: with no
    zero in the slice ``prod / x``; with one, that zero's position gets the product of the
    nonzeros and the rest 0; with more, 0 everywhere."""
    from munet.ops.elementwise import where

    zero = x == 0
    nonzero = where(zero, 1, x)
    product = apply(prod_op, nonzero, dims=dims, keepdim=True)
    zeros = apply(sum_op, zero.to(D.int64), dims=dims, keepdim=True) if dims else zero.to(D.int64)
    one_zero = where(zero, product, 0)
    return where(zeros == 0, product / nonzero, where(zeros == 1, one_zero, 0))


prod_others_op = define(
    "prod_others", meta=lambda x, *, dims: Meta(tuple(x.shape), x.dtype), backward=_prod_others_backward,
    saves=("self", "result"), decomposition=_prod_others_decomposition,
)  # fmt: skip


def _prod_backward(ctx, g):
    dims, keepdim = ctx.attrs["dims"], ctx.attrs["keepdim"]
    others = apply(prod_others_op, ctx.saved_tensor("self"), dims=dims)
    return expand_reduced(g, ctx.input_shapes[0], dims, keepdim) * others


prod_op = define("prod", meta=_reduce_meta, backward=_prod_backward, saves=("self",))


def prod(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Product over ``dim`` (all elements when None); integer and bool inputs give int64.

    The gradient is exact with zeros in the input (one zero or several).
    """
    dims = reduce_dims(input, dim, "prod")
    input = _cast(input, _integral_to_int64(input, dtype))
    return apply(prod_op, input, dims=dims, keepdim=bool(keepdim))


# logsumexp --------------------------------------------------------------------------------------------


def _logsumexp_backward(ctx, g):
    from munet.ops.elementwise import exp

    dims, keepdim = ctx.attrs["dims"], ctx.attrs["keepdim"]
    shape = ctx.input_shapes[0]
    r = _expand_result(ctx.saved_tensor("result"), shape, dims, keepdim)
    return expand_reduced(g, shape, dims, keepdim) * exp(ctx.saved_tensor("self") - r)


def _logsumexp_decomposition(x, *, dims, keepdim):
    """``log(sum(exp(x - m))) + m`` with ``m`` the maximum where it is finite, else 0 (so a
    reduction holding +inf gives +inf, one of all -inf gives -inf); an empty one gives -inf.
    16-bit floats compute in float32."""
    from munet.ops.creation import full
    from munet.ops.elementwise import where

    kept = tuple(1 if i in dims else n for i, n in enumerate(x.shape))
    shape = kept if keepdim else tuple(n for i, n in enumerate(x.shape) if i not in dims)
    if 0 in (x.shape[d] for d in dims):
        return full(shape, -math.inf, dtype=x.dtype, device=x.device)
    xf = x.to(D.float32) if x.dtype in (D.float16, D.bfloat16) else x
    m = xf.amax(dims, keepdim=True)
    shift = where(m.isfinite(), m, 0.0)
    out = (xf - shift).exp().sum(dims, keepdim=True).log() + shift
    return out.reshape(shape).to(x.dtype)


logsumexp_op = define(
    "logsumexp",
    meta=_reduce_meta,
    backward=_logsumexp_backward,
    saves=("self", "result"),
    decomposition=_logsumexp_decomposition,
)


def logsumexp(input, dim, keepdim: bool = False):
    """``log(sum(exp(input)))`` over ``dim``, computed stably (shifted by the maximum)."""
    if not input.dtype.is_floating_point:
        input = input.to(D.get_default_dtype())
    dims = reduce_dims(input, dim, "logsumexp")
    return apply(logsumexp_op, input, dims=dims, keepdim=bool(keepdim))


# scans ------------------------------------------------------------------------------------------------


def _scan_meta(x, *, dim, **_):
    return Meta(tuple(x.shape), x.dtype)


def _cumsum_backward(ctx, g):
    return apply(cumsum_op, g, dim=ctx.attrs["dim"], reverse=not ctx.attrs["reverse"])


cumsum_op = define("cumsum", meta=_scan_meta, backward=_cumsum_backward)


def cumsum(input, dim, *, dtype=None):
    """Running sum along ``dim``; integer and bool inputs give int64."""
    d = _one_dim(input, dim, "cumsum")
    input = _cast(input, _integral_to_int64(input, dtype))
    return apply(cumsum_op, input, dim=d, reverse=False)


def cumsum_(self, dim, *, dtype=None):
    """In-place :func:`cumsum`."""
    return self.copy_(cumsum(self, dim, dtype=dtype))


def cumprod_(self, dim, *, dtype=None):
    """In-place :func:`cumprod`."""
    # The gradient reads the input, so autograd needs a copy of it that the write leaves intact.
    source = self.clone() if self.requires_grad else self
    return self.copy_(cumprod(source, dim, dtype=dtype))


def _cumprod_backward_decomposition(g, x, *, dim):
    """Gradient of cumprod along ``dim``, exact with zeros. Before the first zero of a line,
    grad_k = sum_{i>=k} g_i y_i / x_k (y the cumprod, the sum a reversed cumsum). At the first zero
    z, grad_z = sum_{i>=z} g_i prod_{j<=i, j!=z} x_j: the cumprod with x_z replaced by 1. After it,
    every product holds x_z, so the gradient is 0. 16-bit floats compute in float32."""
    from munet.ops.creation import arange
    from munet.ops.elementwise import where

    (a, back), gm = _upcast_low(x), g.to(D.float32) if g.dtype in _LOW_PRECISION else g
    if a.ndim == 0 or a.shape[dim] == 0:  # one element (its gradient is g), or none
        return g.clone()
    n = a.shape[dim]
    zero = a == 0
    shape = [1] * a.ndim
    shape[dim] = n
    pos = arange(n, device=a.device).reshape(tuple(shape))
    first = where(zero, pos, n).amin(dim, keepdim=True)  # the first zero's position, n without one
    before, at_first = pos < first, pos == first
    y = apply(cumprod_op, a, dim=dim)
    tail = apply(cumsum_op, gm * y, dim=dim, reverse=True)
    normal = tail / where(before, a, 1.0)
    y_skip = apply(cumprod_op, where(at_first, 1.0, a), dim=dim)
    grad_first = where(pos >= first, gm * y_skip, 0.0).sum(dim, keepdim=True)
    out = where(before, normal, where(at_first, grad_first, 0.0))
    return out if back is None else out.to(back)


cumprod_backward_op = define(
    "cumprod_backward", inputs=("grad", "self"), meta=lambda g, x, *, dim: Meta(tuple(x.shape), x.dtype),
    backward=_no_double_backward("cumprod"), decomposition=_cumprod_backward_decomposition,
)  # fmt: skip


def _cumprod_backward(ctx, g):
    return apply(cumprod_backward_op, g, ctx.saved_tensor("self"), dim=ctx.attrs["dim"])


cumprod_op = define("cumprod", meta=_scan_meta, backward=_cumprod_backward, saves=("self",))


def cumprod(input, dim, *, dtype=None):
    """Running product along ``dim``; the gradient is exact with zeros in the input."""
    d = _one_dim(input, dim, "cumprod")
    input = _cast(input, _integral_to_int64(input, dtype))
    return apply(cumprod_op, input, dim=d)


def _cum_select_meta(x, *, dim):
    return Meta(tuple(x.shape), x.dtype), Meta(tuple(x.shape), D.int64)


def _cumulative_select_backward_decomposition(g, indices, *, dim):
    """Each gradient added into zeros at the index its value came from (``scatter_add``)."""
    from munet.ops.creation import zeros

    if g.ndim == 0:
        return g.clone()
    return zeros(tuple(g.shape), dtype=g.dtype, device=g.device).scatter_add(dim, indices, g)


# the gradient of cummax/cummin; differentiable through its decomposition (their double backward)
scatter_along_op = define(
    "cumulative_select_backward", inputs=("grad", "indices"),
    meta=lambda g, indices, *, dim: Meta(tuple(g.shape), g.dtype),
    decomposition=_cumulative_select_backward_decomposition,
)  # fmt: skip


def _cum_select_backward(ctx, g, _g_indices=None):
    return apply(scatter_along_op, g, ctx.saved_tensor("indices"), dim=ctx.attrs["dim"])


cummax_op = define(
    "cummax", meta=_cum_select_meta, outputs=("values", "indices"), nondiff_outputs=(1,),
    backward=_cum_select_backward, saves=("indices",),
)  # fmt: skip
cummin_op = define(
    "cummin", meta=_cum_select_meta, outputs=("values", "indices"), nondiff_outputs=(1,),
    backward=_cum_select_backward, saves=("indices",),
)  # fmt: skip


def cummax(input, dim):
    """Running maximum along ``dim`` and the index where it was reached (the latest on ties)."""
    values, indices = apply(cummax_op, input, dim=_one_dim(input, dim, "cummax"))
    return return_cummax(values, indices)


def cummin(input, dim):
    """Running minimum along ``dim`` and the index where it was reached (the latest on ties)."""
    values, indices = apply(cummin_op, input, dim=_one_dim(input, dim, "cummin"))
    return return_cummin(values, indices)


# median -----------------------------------------------------------------------------------------------


def _sorted_along(x, dim: int):
    """``x`` sorted ascending along ``dim`` (stable: equal values keep their order, NaN last) and
    the source positions."""
    from munet.ops.sort import sort_op

    return apply(sort_op, x, dim=dim, descending=False, stable=True)


def _pick(tensors, dim: int, k, keepdim: bool):
    """Each tensor read along ``dim`` at the positions ``k`` (keepdim-shaped)."""
    picked = tuple(t.gather(dim, k) for t in tensors)
    return picked if keepdim else tuple(p.squeeze(dim) for p in picked)


def _median_dim_decomposition(ignore_nan: bool):
    def decomposition(x, *, dim, keepdim):
        """The lower median along ``dim`` from a stable sort: position ``(n - 1) // 2``; with a NaN
        in the slice its first NaN (position ``n - nans``) unless NaNs are ignored, then
        ``(n - nans - 1) // 2`` of the rest (halved by a shift: not every device divides integers).
        Ties report the first occurrence in sorted order."""
        from munet.ops.creation import full
        from munet.ops.elementwise import where

        if x.ndim == 0:
            return x.clone(), apply(argmax_op, x, dim=None, keepdim=False)
        n = x.shape[dim]
        values, order = _sorted_along(x, dim)
        if x.dtype.is_floating_point:
            nans = x.isnan().to(D.int64).sum(dim, keepdim=True)
            k = (
                (n - 1 - nans).clamp(min=0).bitwise_right_shift(1)
                if ignore_nan
                else where(nans > 0, n - nans, (n - 1) // 2)
            )
        else:
            shape = tuple(1 if d == dim else s for d, s in enumerate(x.shape))
            k = full(shape, (n - 1) // 2, dtype=D.int64, device=x.device)
        return _pick((values, order), dim, k, keepdim)

    return decomposition


def _median_decomposition(ignore_nan: bool):
    def decomposition(x, *, dims, keepdim):
        """The median of all elements (NaN for none): the dim form over the flattened input."""
        from munet.ops.creation import full

        if x.numel() == 0:
            return full((), float("nan"), dtype=x.dtype, device=x.device)
        return _median_dim_decomposition(ignore_nan)(x.reshape(-1), dim=0, keepdim=False)[0]

    return decomposition


median_op = define(
    "median", meta=_reduce_meta, backward=_extremum_backward, saves=("self", "result"),
    decomposition=_median_decomposition(ignore_nan=False),
)  # fmt: skip
nanmedian_op = define(
    "nanmedian", meta=_reduce_meta, backward=_extremum_backward, saves=("self", "result"),
    decomposition=_median_decomposition(ignore_nan=True),
)  # fmt: skip
median_dim_op = define(
    "median_dim", meta=_dim_meta, outputs=("values", "indices"), nondiff_outputs=(1,),
    backward=_value_select_backward, saves=("indices",), decomposition=_median_dim_decomposition(ignore_nan=False),
)  # fmt: skip
nanmedian_dim_op = define(
    "nanmedian_dim", meta=_dim_meta, outputs=("values", "indices"), nondiff_outputs=(1,),
    backward=_value_select_backward, saves=("indices",), decomposition=_median_dim_decomposition(ignore_nan=True),
)  # fmt: skip


def _median(name, full_op, dim_op, result_type, input, dim, keepdim):
    if dim is None:
        return apply(full_op, input, dims=tuple(range(input.ndim)), keepdim=False)
    d = _one_dim(input, dim, name)
    if input.ndim:
        _check_nonempty(name, input, (d,))
    values, indices = apply(dim_op, input, dim=d, keepdim=bool(keepdim))
    return result_type(values, indices)


def median(input, dim=None, keepdim: bool = False):
    """The lower median (NaN if any element is NaN); with ``dim``, ``(values, indices)``."""
    return _median("median", median_op, median_dim_op, return_median, input, dim, keepdim)


def nanmedian(input, dim=None, keepdim: bool = False):
    """The lower median of the non-NaN elements; with ``dim``, ``(values, indices)``."""
    return _median("nanmedian", nanmedian_op, nanmedian_dim_op, return_nanmedian, input, dim, keepdim)


def _mode_decomposition(x, *, dim, keepdim):
    """From a stable sort along ``dim``: each run of equal sorted values (a NaN equals nothing)
    counts up from its start, the count peaks at the run's last entry (the value's last
    occurrence), and the first peak (``argmax``) is the most frequent value, the smallest on ties."""
    from munet.ops.creation import arange, ones
    from munet.ops.elementwise import where
    from munet.ops.movement import cat

    if x.ndim == 0:
        return x.clone(), apply(argmax_op, x, dim=None, keepdim=False)
    values, order = _sorted_along(x, dim)
    n = x.shape[dim]
    shape = [1] * x.ndim
    shape[dim] = n
    pos = arange(n, device=x.device).reshape(shape)
    first = ones(tuple(1 if d == dim else s for d, s in enumerate(x.shape)), dtype=D.bool_, device=x.device)
    starts = cat([first, values.narrow(dim, 1, n - 1) != values.narrow(dim, 0, n - 1)], dim)
    run_start = apply(cummax_op, where(starts, pos, 0), dim=dim)[0]
    best = apply(argmax_op, pos - run_start, dim=dim, keepdim=True)
    return _pick((values, order), dim, best, keepdim)


mode_op = define(
    "mode", meta=_dim_meta, outputs=("values", "indices"), nondiff_outputs=(1,),
    backward=_value_select_backward, saves=("indices",), decomposition=_mode_decomposition,
)  # fmt: skip


def mode(input, dim: int = -1, keepdim: bool = False):
    """The most frequent value along ``dim`` (the smallest on ties) and the index of its last occurrence."""
    d = _one_dim(input, dim, "mode")
    if input.ndim:
        _check_nonempty("mode", input, (d,))
    values, indices = apply(mode_op, input, dim=d, keepdim=bool(keepdim))
    return return_mode(values, indices)


# boolean reductions -----------------------------------------------------------------------------------


def _bool_reduce_meta(x, *, dims, keepdim):
    return Meta(reduced_shape(tuple(x.shape), dims, keepdim), D.uint8 if x.dtype is D.uint8 else D.bool_)


all_op = define("all", meta=_bool_reduce_meta)
any_op = define("any", meta=_bool_reduce_meta)


def _count_nonzero_decomposition(x, *, dims):
    """``sum(x != 0)`` over ``dims`` as int64 (NaN counts, -0.0 does not)."""
    nonzero = (x != 0).to(D.int64)
    return apply(sum_op, nonzero, dims=dims, keepdim=False) if dims else nonzero


count_nonzero_op = define(
    "count_nonzero",
    meta=lambda x, *, dims: Meta(reduced_shape(tuple(x.shape), dims, False), D.int64),
    decomposition=_count_nonzero_decomposition,
)


def all(input, dim=None, keepdim: bool = False):  # noqa: A001 - PyTorch's name
    """True where every element over ``dim`` is nonzero (uint8 inputs give uint8)."""
    return apply(all_op, input, dims=reduce_dims(input, dim, "all"), keepdim=bool(keepdim))


def any(input, dim=None, keepdim: bool = False):  # noqa: A001 - PyTorch's name
    """True where some element over ``dim`` is nonzero (uint8 inputs give uint8)."""
    return apply(any_op, input, dims=reduce_dims(input, dim, "any"), keepdim=bool(keepdim))


def count_nonzero(input, dim=None):
    """Number of nonzero elements over ``dim`` (int64)."""
    return apply(count_nonzero_op, input, dims=reduce_dims(input, dim, "count_nonzero"))


# norm -------------------------------------------------------------------------------------------------


def norm(input, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """Vector p-norm over ``dim`` (all elements when None): p = 'fro', 2, 1, inf, -inf, 0 or any number.

    The gradient at a zero vector is 0 (as PyTorch's).
    """
    input = _cast(input, dtype)
    if input.dtype.is_complex:  # the norm of the magnitudes
        input = input.abs()
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"norm(): input dtype should be either floating point or complex. Got {input.dtype.name} instead."
        )
    if p is None:
        p = "fro"
    if isinstance(p, str) and p != "fro":
        raise RuntimeError(f"norm(): p={p!r} (a matrix norm) is not supported; expected 'fro' or a number")
    dims = reduce_dims(input, dim, "norm")
    keepdim = bool(keepdim)
    x, back = _upcast_low(input)
    if p == "fro" or p == 2:
        out = apply(safe_sqrt_op, sum(x * x, dims, keepdim))
    elif p == math.inf or p == -math.inf:
        if builtins.any(x.shape[d] == 0 for d in dims):
            raise RuntimeError(
                f"norm(): cannot compute the {p} norm on an empty tensor because the operation does not have an identity"
            )
        out = apply(amax_op if p > 0 else amin_op, x.abs(), dims=dims, keepdim=keepdim)
    elif p == 0:
        # The count of nonzeros; ``sign(x) * 0`` adds nothing but a (zero) gradient, as PyTorch's.
        out = sum(x.ne(0).to(x.dtype) + x.sign() * 0.0, dims, keepdim)
    elif p == 1:
        out = sum(x.abs(), dims, keepdim)
    else:
        out = sum(x.abs() ** p, dims, keepdim) ** (1.0 / p)
    return _cast(out, back)
