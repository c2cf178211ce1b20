"""CPU kernels for sorting and searching (stable NumPy sorts; NaN sorts as the largest value)."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.kernels_indexing import check_bounds
from munet.backends.cpu.kernels_reduce import upcast
from munet.backends.cpu.registry import kernel


def stable_argsort(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable order along ``axis``; descending keeps equal elements in their original order."""
    keys = upcast(x)
    if not descending:
        return np.argsort(keys, axis=axis, kind="stable")
    # Sorting the reversed array ascending and reversing the result is stable for descending
    # order and puts NaN first, as PyTorch does.
    flipped = np.argsort(np.flip(keys, axis=axis), axis=axis, kind="stable")
    return keys.shape[axis] - 1 - np.flip(flipped, axis=axis)


@kernel("sort")
def sort(x, *, dim, descending, stable):
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    order = stable_argsort(x, dim, descending)
    return np.take_along_axis(x, order, axis=dim), order.astype(np.int64)


@kernel("topk")
def topk(x, *, k, dim, largest):
    if x.ndim == 0:
        return x.reshape(1)[:k].reshape(()) if k else x.copy(), np.zeros((), np.int64)
    order = np.take(stable_argsort(x, dim, largest), np.arange(k), axis=dim)
    return np.take_along_axis(x, order, axis=dim), order.astype(np.int64)


@kernel("kthvalue")
def kthvalue(x, *, k, dim, keepdim):
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    order = np.take(stable_argsort(x, dim, False), [k - 1], axis=dim)
    values = np.take_along_axis(x, order, axis=dim)
    if not keepdim:
        values, order = np.squeeze(values, axis=dim), np.squeeze(order, axis=dim)
    return np.array(values, copy=True), order.astype(np.int64)


def _unique_flat(x: np.ndarray, consecutive: bool):
    flat = x.reshape(-1)
    if not consecutive:
        values, inverse, counts = np.unique(upcast(flat), return_inverse=True, return_counts=True)
        return values.astype(x.dtype), inverse.reshape(x.shape), counts
    if flat.size == 0:
        return flat.copy(), np.zeros(x.shape, np.int64), np.zeros(0, np.int64)
    starts = np.concatenate([[True], flat[1:] != flat[:-1]])
    inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), flat.size))
    return flat[starts], inverse.reshape(x.shape), counts


def _unique_along(x: np.ndarray, dim: int, consecutive: bool):
    if not consecutive:
        values, inverse, counts = np.unique(upcast(x), return_inverse=True, return_counts=True, axis=dim)
        return values.astype(x.dtype), inverse.reshape(-1), counts
    n = x.shape[dim]
    if n == 0:
        return x.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64)
    rows = np.moveaxis(x, dim, 0).reshape(n, x.size // n)  # not -1: rows may be empty
    starts = np.concatenate([[True], np.any(rows[1:] != rows[:-1], axis=1)])
    inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), n))
    return np.compress(starts, x, axis=dim), inverse, counts


@kernel("unique")
def unique(x, *, dim, consecutive):
    if dim is None:
        values, inverse, counts = _unique_flat(x, consecutive)
    else:
        values, inverse, counts = _unique_along(x, dim, consecutive)
    return np.array(values, copy=True), inverse.astype(np.int64), counts.astype(np.int64)


@kernel("searchsorted")
def searchsorted(seq, values, sorter, *, right, out_int32):
    side = "right" if right else "left"
    out_dtype = np.int32 if out_int32 else np.int64
    if sorter is not None:
        check_bounds(sorter, seq.shape[-1], seq.ndim - 1, "searchsorted", False)
        seq = np.take_along_axis(seq, sorter, axis=-1)
    seq, values = upcast(seq), upcast(values)
    if seq.ndim == 1:
        return np.searchsorted(seq, values, side=side).astype(out_dtype)
    return _batched_searchsorted(seq, values, right).astype(out_dtype)


def _batched_searchsorted(seq: np.ndarray, values: np.ndarray, right: bool) -> np.ndarray:
    """Row-wise searchsorted without a loop: sort boundaries and queries together by (row, value, tie)."""
    n, m = seq.shape[-1], values.shape[-1]
    rows = int(np.prod(seq.shape[:-1]))  # not reshape(-1, n): ambiguous for n == 0
    s2, v2 = seq.reshape(rows, n), values.reshape(rows, m)
    row_of = np.concatenate([np.repeat(np.arange(rows), n), np.repeat(np.arange(rows), m)])
    keys = np.concatenate([s2.reshape(-1), v2.reshape(-1)])
    is_query = np.concatenate([np.zeros(rows * n, bool), np.ones(rows * m, bool)])
    # A query goes before equal boundaries for side='left' and after them for side='right'.
    tie = is_query if right else ~is_query
    order = np.lexsort((tie, keys, row_of))
    boundary_before = np.cumsum(~is_query[order]) - ~is_query[order]
    queries = is_query[order]
    out = np.empty(rows * m, np.int64)
    out[order[queries] - rows * n] = boundary_before[queries] - row_of[order[queries]] * n
    return out.reshape(values.shape)
