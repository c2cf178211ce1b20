"""CPU kernels for indexing: fancy indexing, index_put, gather/scatter, masked_fill, nonzero.

Duplicate positions accumulate with ``ufunc.at``; 16-bit floats accumulate in float32. An
accumulating ``index_put`` of whole rows (an embedding's backward) adds row slices instead
(``_add_rows``), in ``ufunc.at``'s order, so the bits are the same.
Out-of-range indices raise :class:`IndexOutOfRangeError`, an ``IndexError`` that is also a
``RuntimeError`` (PyTorch raises the latter for gather/scatter), naming the op, index and size.
"""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.kernels_reduce import LOW_PRECISION
from munet.backends.cpu.registry import kernel
from munet.ops.checks import IndexOutOfRangeError


def check_bounds(index: np.ndarray, size: int, dim: int, caller: str, wrap: bool, message: str | None = None) -> None:
    """Raise :class:`IndexOutOfRangeError` for an index outside ``[-size, size)`` (``wrap``) or ``[0, size)``;
    ``message`` (a template naming ``{value}`` and ``{size}``) replaces the usual wording."""
    if index.size == 0:
        return
    low = -size if wrap else 0
    lo, hi = index.min(), index.max()
    if lo < low or hi >= size:
        bad = int(lo) if lo < low else int(hi)
        if message is None:
            message = f"{caller}: index {{value}} is out of bounds for dimension {dim} with size {{size}}"
        raise IndexOutOfRangeError(message.format(value=bad, size=size))


def _key(shape, indices, positions, caller: str, wrap: bool) -> tuple:
    key = [slice(None)] * len(shape)
    for index, p in zip(indices, positions):
        check_bounds(index, shape[p], p, caller, wrap)
        key[p] = index.astype(np.intp, copy=False)
    return tuple(key)


def _ufunc_at(ufunc, out: np.ndarray, key, values) -> None:
    """``ufunc.at(out, key, values)`` in place; 16-bit floats are computed in float32."""
    if out.dtype in LOW_PRECISION:
        wide = out.astype(np.float32)
        ufunc.at(wide, key, np.asarray(values, dtype=np.float32))
        out[...] = wide.astype(out.dtype)
        return
    if out.dtype == np.bool_ and ufunc is np.add:
        ufunc = np.logical_or
    ufunc.at(out, key, values)


@kernel("index")
def index(x, indices, *, positions, caller="index", wrap=True):
    # a fancy index copies; asarray keeps a 0-d result 0-d (ascontiguousarray would make it 1-d)
    return np.asarray(x[_key(x.shape, indices, positions, caller, wrap)], order="C")


def index_into(out, x, indices, *, positions, caller="index", wrap=True):
    """``index`` writing into ``out`` (C-contiguous, the result's shape and dtype, not overlapping ``x``).
    One index array (an embedding's lookup) is one ``np.take``, with no temporary."""
    key = _key(x.shape, indices, positions, caller, wrap)
    if len(positions) == 1:
        np.take(x, key[positions[0]], axis=positions[0], out=out, mode="wrap")  # in bounds: checked by _key
    else:
        out[...] = x[key]


def _add_rows(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``np.add.at(out, (index,), values)`` for a 1-d ``index`` (in range, not negative) into the rows of
    ``out``: each row adds its values in the order they come, as ``ufunc.at`` does, but row by row.

    ``ufunc.at`` costs a few microseconds a row. Here rows are grouped by target (a stable sort): a
    target's ``r``-th value is added in round ``r``, to all targets at once (a round has no repeated
    target, so ``out[t] += v`` is exact); a target with more than ``sqrt(n)`` values is one cumulative
    sum of its rows instead, so there are at most ``2 sqrt(n)`` NumPy passes.
    """
    n = index.shape[0]
    values = np.broadcast_to(values, (n, *out.shape[1:]))
    order = np.argsort(index, kind="stable")
    targets = index[order]
    starts = np.flatnonzero(np.r_[True, targets[1:] != targets[:-1]])
    counts = np.diff(np.r_[starts, n])
    heavy = counts > int(np.sqrt(n))
    for start, count in zip(starts[heavy], counts[heavy]):
        t = targets[start]
        rows = np.concatenate([out[t : t + 1], values[order[start : start + count]]])
        out[t] = np.add.accumulate(rows, axis=0)[-1]
    rank = np.arange(n) - np.repeat(starts, counts)
    light = np.flatnonzero(np.repeat(~heavy, counts))
    by_round = light[np.argsort(rank[light], kind="stable")]
    bounds = np.searchsorted(rank[by_round], np.arange(int(counts[~heavy].max(initial=0)) + 1))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        at = order[by_round[lo:hi]]
        out[index[at]] += values[at]


def _index_put_into(out, values, indices, positions, accumulate, caller, wrap) -> None:
    key = _key(out.shape, indices, positions, caller, wrap)
    rows = out.ndim > 1 and positions == (0,) and key[0].ndim == 1 and np.ndim(values) > 1
    if accumulate and rows and out.dtype.kind in "fiu" and out.dtype not in LOW_PRECISION:
        _add_rows(out, np.where(key[0] < 0, key[0] + out.shape[0], key[0]), values)
    elif accumulate:
        _ufunc_at(np.add, out, key, values)
    else:
        out[key] = values


@kernel("index_put")
def index_put(x, values, indices, *, positions, accumulate, caller="index_put_", wrap=True):
    out = np.array(x, copy=True, order="C")
    _index_put_into(out, values, indices, positions, accumulate, caller, wrap)
    return out


@kernel("index_put_")
def index_put_(x, values, indices, *, positions, accumulate, caller="index_put_", wrap=True):
    if isinstance(values, np.ndarray) and np.may_share_memory(x, values):
        values = values.copy()
    _index_put_into(x, values, indices, positions, accumulate, caller, wrap)


# gather / scatter ------------------------------------------------------------------------------------


def _coords(index: np.ndarray, dim: int) -> tuple:
    """Full fancy-index coordinates of every entry of ``index``, with ``index`` itself along ``dim``."""
    coords = list(np.indices(index.shape, sparse=True))
    coords[dim] = index.astype(np.intp, copy=False)
    return tuple(coords)


def _leading_block(src, index):
    if not isinstance(src, np.ndarray) or src.ndim == 0:
        return src
    return src[tuple(slice(0, n) for n in index.shape)]


def _as_1d(x, index):
    """Gather/scatter of 0-d tensors: view both as 1-d."""
    return (x.reshape(1) if x.ndim == 0 else x), (index.reshape(1) if index.ndim == 0 else index)


@kernel("gather")
def gather(x, index, *, dim):
    x1, i1 = _as_1d(x, index)
    check_bounds(i1, x1.shape[dim], dim, "gather", False)
    out = x1[_coords(i1, dim)]
    return np.array(out.reshape(index.shape), copy=True)


def _scatter_into(out, index, src, dim, reduce, caller) -> None:
    o1, i1 = _as_1d(out, index)
    check_bounds(i1, o1.shape[dim], dim, caller, False)
    if isinstance(src, np.ndarray) and src.ndim == 0 and index.ndim == 0:
        src = src.reshape(1)
    values = _leading_block(src, i1)
    key = _coords(i1, dim)
    if reduce is None:
        o1[key] = values
    elif reduce == "add" and o1.flags.c_contiguous and i1.ndim > 1:
        # ufunc.at is several times faster with one flat index than with a tuple of coordinates
        pitch = [p // o1.itemsize for p in o1.strides]
        rest = sum(k * p for d, (k, p) in enumerate(zip(key, pitch)) if d != dim)  # small: broadcasts
        flat = (key[dim] if pitch[dim] == 1 else key[dim] * pitch[dim]) + rest
        _ufunc_at(np.add, o1.reshape(-1), flat.ravel(), np.broadcast_to(values, i1.shape).ravel())
    elif reduce == "add":
        _ufunc_at(np.add, o1, key, values)
    else:
        _ufunc_at(np.multiply, o1, key, values)


@kernel("scatter")
def scatter(x, index, src, *, dim, reduce):
    out = np.array(x, copy=True, order="C")
    _scatter_into(out, index, src, dim, reduce, "scatter")
    return out


def scatter_into(out, x, index, src, *, dim, reduce):
    """``scatter`` writing into ``out`` (C-contiguous, the result's shape and dtype, not overlapping ``x``)."""
    np.copyto(out, x)
    _scatter_into(out, index, src, dim, reduce, "scatter")


@kernel("scatter_")
def scatter_(x, index, src, *, dim, reduce):
    if isinstance(src, np.ndarray) and np.may_share_memory(x, src):
        src = src.copy()
    _scatter_into(x, index, src, dim, reduce, "scatter_")


_REDUCE_UFUNCS = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _identity(reduce: str, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f" or dtype in LOW_PRECISION:
        return -np.inf if reduce == "amax" else np.inf
    if dtype == np.bool_:
        return reduce == "amin"
    info = np.iinfo(dtype)  # amax starts from the minimum (-128 for int8, not -127)
    return info.min if reduce == "amax" else info.max


@kernel("scatter_reduce", "scatter_reduce_values")
def scatter_reduce(x, index, src, *, dim, reduce, include_self):
    out = np.array(x, copy=True, order="C")
    o1, i1 = _as_1d(out, index)
    check_bounds(i1, o1.shape[dim], dim, "scatter_reduce", False)
    s1 = src.reshape(1) if src.ndim == 0 else src
    key = _coords(i1, dim)
    values = _leading_block(s1, i1)
    if not include_self:
        o1[key] = _identity(reduce, out.dtype)
    _ufunc_at(_REDUCE_UFUNCS[reduce], o1, key, values)
    if reduce == "mean":
        counts = np.ones(o1.shape, np.int64) if include_self else np.zeros(o1.shape, np.int64)
        np.add.at(counts, key, 1)
        counts = np.maximum(counts, 1)
        if o1.dtype.kind in "iub":
            o1[...] = np.floor_divide(o1, counts)
        else:
            o1[...] = (o1.astype(np.float64 if o1.dtype == np.float64 else np.float32) / counts).astype(o1.dtype)
    return out


# masks -----------------------------------------------------------------------------------------------


@kernel("masked_fill")
def masked_fill(x, mask, value):
    return np.where(mask, np.asarray(value, dtype=x.dtype), x)


@kernel("masked_fill_")
def masked_fill_(x, mask, value):
    np.copyto(x, np.asarray(value, dtype=x.dtype), where=np.broadcast_to(mask, x.shape))


@kernel("nonzero")
def nonzero(x):
    return np.argwhere(x).astype(np.int64)
