"""Reductions over dims (int or tuple, keepdim) and scans."""

from __future__ import annotations

from munet import _dtype as D
from munet.ops._registry import Meta, apply, define
from munet.ops._utils import wrap_dims

__all__ = ["sum", "mean"]
__tensor_methods__ = ["sum", "mean"]


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _reduce_meta(x, *, dims, keepdim, dtype=None):
    return Meta(reduced_shape(tuple(x.shape), dims, keepdim), dtype or x.dtype)


def expand_reduced(g, input_shape, dims, keepdim: bool):
    """Broadcast the gradient of a reduction back over the reduced dims."""
    if not keepdim and dims:
        shape = list(input_shape)
        for d in dims:
            shape[d] = 1
        g = g.reshape(shape)
    return g.expand(tuple(input_shape))


def _sum_backward(ctx, g):
    return expand_reduced(g, ctx.input_shapes[0], ctx.attrs["dims"], ctx.attrs["keepdim"])


sum_op = define("sum", meta=_reduce_meta, backward=_sum_backward)


def _sum_dtype(x, dtype):
    if dtype is not None:
        return dtype
    return D.int64 if not x.dtype.is_floating_point else x.dtype


def sum(input, dim=None, keepdim: bool = False, *, dtype=None):  # noqa: A001 - PyTorch's name
    """Sum over ``dim`` (all dims when None); integer and bool inputs sum to int64."""
    dims = wrap_dims(dim, input.ndim, "sum") if not (isinstance(dim, (list, tuple)) and len(dim) == 0) else tuple(range(input.ndim))
    out_dtype = _sum_dtype(input, dtype)
    if input.dtype is not out_dtype:
        input = input.to(out_dtype)
    return apply(sum_op, input, dims=dims, keepdim=bool(keepdim))


def mean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Arithmetic mean over ``dim``; floating inputs only (like PyTorch)."""
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {input.dtype.name}"
        )
    dims = wrap_dims(dim, input.ndim, "mean") if not (isinstance(dim, (list, tuple)) and len(dim) == 0) else tuple(range(input.ndim))
    count = 1
    for d in dims:
        count *= input.shape[d]
    total = apply(sum_op, input, dims=dims, keepdim=bool(keepdim))
    return total / count if count else total / 0.0
