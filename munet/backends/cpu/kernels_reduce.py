"""CPU kernels for reductions and scans; float16/bfloat16 accumulate in float32 like PyTorch.

Kernels return new arrays; the caller casts each result to the dtype the op declared.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from munet.backends.cpu.registry import kernel

LOW_PRECISION = frozenset({np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)})


def acc_dtype(x: np.ndarray):
    """The accumulation dtype for ``x``: float32 for 16-bit floats, else ``x``'s own."""
    return np.float32 if x.dtype in LOW_PRECISION else None


def upcast(x: np.ndarray) -> np.ndarray:
    """``x`` in its accumulation dtype (a float32 copy only for 16-bit floats)."""
    return x.astype(np.float32) if x.dtype in LOW_PRECISION else x


def _is_float(x: np.ndarray) -> bool:
    return x.dtype.kind == "f" or x.dtype in LOW_PRECISION


def _fresh(out, x):
    """A reduction over no dims may hand back ``x`` itself: make sure the result is a new array."""
    out = np.asarray(out)
    return out.copy() if np.shares_memory(out, x) else out


def _line(shape_len: int, dim: int, n: int) -> np.ndarray:
    """``arange(n)`` shaped to broadcast along ``dim`` of a rank-``shape_len`` array."""
    shape = [1] * shape_len
    shape[dim] = n
    return np.arange(n).reshape(shape)


# sums and products -------------------------------------------------------------------------------------


@kernel("sum")
def sum_(x, *, dims, keepdim, dtype=None):
    # the ufunc's own reduce: what np.sum calls, without its Python-level dispatch
    out = np.add.reduce(x, axis=dims, dtype=acc_dtype(x), keepdims=keepdim)
    return out if dims else _fresh(out, x)


@kernel("nansum")
def nansum(x, *, dims, keepdim):
    return _fresh(np.nansum(upcast(x), axis=dims, keepdims=keepdim), x)


@kernel("prod")
def prod(x, *, dims, keepdim):
    with np.errstate(all="ignore"):
        return _fresh(np.prod(upcast(x), axis=dims, keepdims=keepdim), x)


@kernel("prod_others")
def prod_others(x, *, dims):
    """For each element, the product of the other elements over ``dims`` (exact with zeros)."""
    a = upcast(x)
    zero = a == 0
    nonzero = np.where(zero, np.ones((), a.dtype), a)
    with np.errstate(all="ignore"):
        nz_prod = np.prod(nonzero, axis=dims, keepdims=True)
        zeros = zero.sum(axis=dims, keepdims=True)
        no_zero = nz_prod / nonzero
    one_zero = np.where(zero, nz_prod, np.zeros((), a.dtype))
    return np.where(zeros == 0, no_zero, np.where(zeros == 1, one_zero, np.zeros((), a.dtype)))


@kernel("prod_others_backward")
def prod_others_backward(g, x, *, dims):
    """``sum_{i != k} g_i prod_{j != i, k} x_j`` for each k over ``dims`` (exact with zeros).

    With no other zero than possibly x_k it is ``prod_{j != k} x_j * sum_{i != k} g_i / x_i``;
    with exactly one other zero z only the term i = z survives; with more it is 0.
    """
    a, gm = upcast(x), upcast(g)
    zero = a == 0
    one = np.ones((), a.dtype)
    nonzero = np.where(zero, one, a)
    with np.errstate(all="ignore"):
        nz_prod = np.prod(nonzero, axis=dims, keepdims=True)
        q = np.sum(np.where(zero, 0, gm / nonzero), axis=dims, keepdims=True)
        others = nz_prod / nonzero  # product of the nonzeros other than x_k
        no_other_zero = others * (q - np.where(zero, 0, gm / nonzero))
    zeros = zero.sum(axis=dims, keepdims=True)
    other_zeros = zeros - zero
    g_at_zeros = np.sum(np.where(zero, gm, 0), axis=dims, keepdims=True)
    one_other_zero = (g_at_zeros - np.where(zero, gm, 0)) * others
    return np.where(other_zeros == 0, no_other_zero, np.where(other_zeros == 1, one_other_zero, 0))


@kernel("logsumexp")
def logsumexp(x, *, dims, keepdim):
    a = upcast(x)
    if any(a.shape[d] == 0 for d in dims):
        shape = tuple(1 if i in dims else n for i, n in enumerate(a.shape))
        out = np.full(shape, -np.inf, a.dtype)
        return out if keepdim else out.reshape([n for i, n in enumerate(a.shape) if i not in dims])
    m = np.max(a, axis=dims, keepdims=True)
    m = np.where(np.isfinite(m), m, np.zeros((), a.dtype))
    with np.errstate(all="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=dims, keepdims=True)) + m
    return out if keepdim else out.reshape([n for i, n in enumerate(a.shape) if i not in dims])


# extrema ------------------------------------------------------------------------------------------------


@kernel("amax")
def amax(x, *, dims, keepdim):
    return _fresh(np.max(upcast(x), axis=dims, keepdims=keepdim), x)


@kernel("amin")
def amin(x, *, dims, keepdim):
    return _fresh(np.min(upcast(x), axis=dims, keepdims=keepdim), x)


@kernel("reduce_tie_weights")
def tie_weights(x, result, *, dims, keepdim):
    """1/count at the elements equal to their reduced ``result`` (NaN matches NaN), else 0."""
    a, r = upcast(x), upcast(result)
    if not keepdim:
        r = np.expand_dims(r, dims)
    mask = a == r
    if _is_float(a):
        mask |= np.isnan(a) & np.isnan(r)
    count = mask.sum(axis=dims, keepdims=True)
    return mask / np.maximum(count, 1)


@kernel("reduce_onehot")
def onehot(indices, *, dim, shape, keepdim, dtype):
    """A mask of ``shape``: 1 where the position along ``dim`` equals ``indices``."""
    if len(shape) == 0:
        return np.ones((), np.float32)
    idx = indices if keepdim else np.expand_dims(indices, dim)
    return _line(len(shape), dim, shape[dim]) == idx


def _select_along(x, dim, keepdim, pick):
    """(values, int64 indices) of ``pick`` (argmax/argmin) along ``dim``."""
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    a = upcast(x)
    idx = pick(a, axis=dim, keepdims=True)
    values = np.take_along_axis(a, idx, axis=dim)
    if not keepdim:
        values, idx = np.squeeze(values, dim), np.squeeze(idx, dim)
    return values, idx.astype(np.int64)


@kernel("max_dim")
def max_dim(x, *, dim, keepdim):
    return _select_along(x, dim, keepdim, np.argmax)


@kernel("min_dim")
def min_dim(x, *, dim, keepdim):
    return _select_along(x, dim, keepdim, np.argmin)


def _arg(x, dim, keepdim, pick):
    a = upcast(x)
    if dim is None:
        out = np.asarray(pick(a.reshape(-1)), np.int64)
        return out.reshape((1,) * x.ndim) if keepdim else out
    if x.ndim == 0:
        return np.zeros((), np.int64)
    return np.asarray(pick(a, axis=dim, keepdims=keepdim), np.int64)


@kernel("argmax")
def argmax(x, *, dim, keepdim):
    return _arg(x, dim, keepdim, np.argmax)


@kernel("argmin")
def argmin(x, *, dim, keepdim):
    return _arg(x, dim, keepdim, np.argmin)


# median --------------------------------------------------------------------------------------------------


def _median_last(a, ignore_nan: bool):
    """(values, indices) of the lower median along the last axis (NaN-propagating unless ignored)."""
    n = a.shape[-1]
    order = np.argsort(a, axis=-1, kind="stable")  # NaNs sort last, in input order
    nans = np.isnan(a).sum(axis=-1) if _is_float(a) else np.zeros(a.shape[:-1], np.int64)
    if ignore_nan:
        k = np.maximum((n - nans - 1) // 2, 0)
    else:
        k = np.where(nans > 0, n - nans, (n - 1) // 2)
    idx = np.take_along_axis(order, k[..., None], axis=-1)
    return np.take_along_axis(a, idx, axis=-1)[..., 0], idx[..., 0].astype(np.int64)


def _median_full(x, ignore_nan: bool):
    a = upcast(x).reshape(-1)
    if a.size == 0:
        return np.full((), np.nan, a.dtype if _is_float(a) else np.float64)
    return np.asarray(_median_last(a, ignore_nan)[0])


def _median_dim(x, dim, keepdim, ignore_nan: bool):
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    a = np.moveaxis(upcast(x), dim, -1)
    values, idx = _median_last(a, ignore_nan)
    if keepdim:
        values, idx = np.expand_dims(values, dim), np.expand_dims(idx, dim)
    return values, idx


@kernel("median")
def median(x, *, dims, keepdim):
    return _median_full(x, ignore_nan=False)


@kernel("nanmedian")
def nanmedian(x, *, dims, keepdim):
    return _median_full(x, ignore_nan=True)


@kernel("median_dim")
def median_dim(x, *, dim, keepdim):
    return _median_dim(x, dim, keepdim, ignore_nan=False)


@kernel("nanmedian_dim")
def nanmedian_dim(x, *, dim, keepdim):
    return _median_dim(x, dim, keepdim, ignore_nan=True)


@kernel("mode")
def mode(x, *, dim, keepdim):
    """Most frequent value along ``dim`` (smallest on ties; NaNs never equal) and its last index."""
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    a = np.moveaxis(upcast(x), dim, -1)
    n = a.shape[-1]
    order = np.argsort(a, axis=-1, kind="stable")
    s = np.take_along_axis(a, order, axis=-1)
    pos = np.arange(n)
    starts = np.ones(s.shape, bool)
    starts[..., 1:] = s[..., 1:] != s[..., :-1]
    run_start = np.maximum.accumulate(np.where(starts, pos, 0), axis=-1)
    # The count so far within each run peaks at the run's last element, which (stable sort)
    # is the value's last occurrence; argmax picks the smallest value among equal counts.
    best = np.argmax(pos - run_start, axis=-1)[..., None]
    values = np.take_along_axis(s, best, axis=-1)
    indices = np.take_along_axis(order, best, axis=-1).astype(np.int64)
    if not keepdim:
        return values[..., 0], indices[..., 0]
    return np.moveaxis(values, -1, dim), np.moveaxis(indices, -1, dim)


# scans ------------------------------------------------------------------------------------------------


@kernel("cumsum")
def cumsum(x, *, dim, reverse):
    a = upcast(x)
    if a.ndim == 0:
        return a.copy()
    if reverse:
        return np.flip(np.cumsum(np.flip(a, dim), axis=dim), dim).copy()
    return np.cumsum(a, axis=dim)


@kernel("cumprod")
def cumprod(x, *, dim):
    a = upcast(x)
    if a.ndim == 0:
        return a.copy()
    with np.errstate(all="ignore"):
        return np.cumprod(a, axis=dim)


@kernel("cumprod_backward")
def cumprod_backward(g, x, *, dim):
    """Gradient of cumprod, exact with zeros.

    Before the first zero of a line, grad_k = sum_{i>=k} g_i y_i / x_k. At the first zero z,
    grad_z = sum_{i>=z} g_i prod_{j<=i, j!=z} x_j, the cumprod with x_z replaced by 1. After
    it, every product contains x_z, so the gradient is 0.
    """
    if x.ndim == 0:
        return upcast(g).copy()
    a = np.moveaxis(upcast(x), dim, -1)
    gm = np.moveaxis(upcast(g), dim, -1)
    n = a.shape[-1]
    if n == 0:
        return np.zeros(x.shape, a.dtype)
    pos = np.arange(n)
    zero = a == 0
    has_zero = zero.any(axis=-1, keepdims=True)
    first = np.where(has_zero, np.argmax(zero, axis=-1)[..., None], n)
    before = pos < first
    at_first = pos == first
    one = np.ones((), a.dtype)
    with np.errstate(all="ignore"):
        y = np.cumprod(a, axis=-1)
        tail = np.flip(np.cumsum(np.flip(gm * y, -1), axis=-1), -1)
        normal = tail / np.where(before, a, one)
        y_skip = np.cumprod(np.where(at_first, one, a), axis=-1)
        grad_first = np.sum(np.where(pos >= first, gm * y_skip, 0), axis=-1, keepdims=True)
    out = np.where(before, normal, np.where(at_first, grad_first, np.zeros((), a.dtype)))
    return np.moveaxis(out, -1, dim)


def _cum_extreme(x, dim, accumulate):
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    a = upcast(x)
    values = accumulate(a, axis=dim)
    hit = a == values
    if _is_float(a):
        hit |= np.isnan(a)
    pos = _line(a.ndim, dim, a.shape[dim])
    indices = np.maximum.accumulate(np.where(hit, pos, 0), axis=dim)
    return values, indices.astype(np.int64)


@kernel("cummax")
def cummax(x, *, dim):
    return _cum_extreme(x, dim, np.maximum.accumulate)


@kernel("cummin")
def cummin(x, *, dim):
    return _cum_extreme(x, dim, np.minimum.accumulate)


@kernel("cumulative_select_backward")
def cumulative_select_backward(g, indices, *, dim):
    """``zeros_like(g).scatter_add(dim, indices, g)``: each gradient goes to the index it came from."""
    gm = upcast(g)
    if gm.ndim == 0 or gm.size == 0:
        return gm.copy()
    gm = np.moveaxis(gm, dim, -1)
    im = np.moveaxis(indices, dim, -1)
    n = gm.shape[-1]
    flat_g = gm.reshape(-1, n)
    rows = np.arange(flat_g.shape[0])[:, None]
    out = np.zeros_like(flat_g)
    np.add.at(out, (rows, im.reshape(-1, n)), flat_g)
    return np.moveaxis(out.reshape(gm.shape), -1, dim)


# boolean reductions -------------------------------------------------------------------------------------


@kernel("all")
def all_(x, *, dims, keepdim):
    return np.asarray(np.all(upcast(x), axis=dims, keepdims=keepdim))


@kernel("any")
def any_(x, *, dims, keepdim):
    return np.asarray(np.any(upcast(x), axis=dims, keepdims=keepdim))


@kernel("count_nonzero")
def count_nonzero(x, *, dims):
    return np.asarray(np.count_nonzero(upcast(x), axis=dims) if dims else (upcast(x) != 0).astype(np.int64))
