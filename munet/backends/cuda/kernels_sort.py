"""``sort`` and ``topk`` on cuda: a ranking kernel for short rows, merge passes for long ones.

Both give the cpu kernel's stable order: ascending puts NaN last, descending puts NaN first, and
equal elements (NaNs among themselves, -0.0 and 0.0) keep their original order either way, so every
position has exactly one element and the result is deterministic. 16-bit floats compare as float32
(exactly).

- ``render_rank(dtype, rank)`` (rows of at most :data:`MERGE_MIN_LENGTH` elements): one thread per
  input element counts the elements of its row (the dim sorted, read through the input's strides)
  that go before it, which is its position in the sorted row; it stores its value and its index
  there when that position is below ``k`` (``sort``: the row's length; ``topk``: its ``k``). One
  launch, ``n**2`` comparisons per row of ``n``.
- ``render_merge_pass(dtype)`` (longer rows): the rows are copied contiguous (the sorted dim last)
  and sorted by ``ceil(log2 n)`` launches of a bottom-up merge, runs of ``width`` merged into runs of
  ``2 width`` between two buffers. One thread per element finds its place in the merged run: its
  index in its own run plus, by binary search, how many elements of the sibling run go before it
  (strictly, for an element of the left run; or equal, for one of the right run: this keeps the
  merge stable). At most ``n log2(n)**2`` comparisons per row, global memory only; ``topk``
  sorts the whole row and keeps the first ``k``.

:data:`MERGE_MIN_LENGTH` is reasoned, not tuned on a GPU: past a few thousand elements a row's
``n**2`` comparisons cost more than a dozen launches.
"""

from __future__ import annotations

import functools

from munet import _dtype as D
from munet._tensor import contiguous_strides
from munet.backends.cuda import copies, launch
from munet.backends.cuda.registry import kernel
from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, compute_dtype, ctype, load
from munet.backends.cuda.source import CudaSource, kernel_head, offsets

# a goes before b in ascending order: smaller, or a number before a NaN (equal ones: by index)
LESS = "(({a} < {b}) || ({b} != {b} && {a} == {a}))"
MERGE_MIN_LENGTH = 2048  # rows longer than this sort by merge passes (see the module docstring)


@functools.lru_cache(maxsize=128)
def render_rank(dtype: str, rank: int) -> CudaSource:
    """The ranking kernel over ``dtype`` rows whose position has ``rank`` other dims (see the module
    docstring): ``values``/``indices`` (int64) get the first ``k`` positions of each row's order."""
    value = ctype(compute_dtype(dtype))
    params = [("long long", "total"), ("long long", "n"), ("long long", "k"), ("bool", "descending")]
    params += [(f"const {ctype(dtype)} *", "in"), (f"{ctype(dtype)} *", "values"), ("long long *", "indices")]
    params += [("long long", "in_step"), ("long long", "out_step")]
    params += [("long long", f"{name}{d}") for name in ("size", "xs", "ys") for d in range(rank)]
    name = f"munet_rank_{dtype}_r{rank}"
    lines = [*kernel_head(name, params, "total"), "    const long long q = i % n;"]
    lines += offsets("i / n", "size", rank, ("xs", "ys"))
    w_first = LESS.format(a="w", b="v") + " || (!" + LESS.format(a="v", b="w") + " && j < q)"
    w_first_descending = LESS.format(a="v", b="w") + " || (!" + LESS.format(a="w", b="v") + " && j < q)"
    lines += [
        f"    const {value} v = {load(dtype, 'in[at_xs + q * in_step]')};",
        "    long long position = 0;",
        "    for (long long j = 0; j < n; j++) {",
        f"      const {value} w = {load(dtype, 'in[at_xs + j * in_step]')};",
        f"      position += (j != q) && (descending ? ({w_first_descending}) : ({w_first}));",
        "    }",
        "    if (position < k) {",
        "      values[at_ys + position * out_step] = in[at_xs + q * in_step];",
        "      indices[at_ys + position * out_step] = q;",
        "    }",
        "  }",
        "}",
    ]
    return CudaSource(name, HEADER + PRELUDE + "\n".join(lines) + "\n", tuple(params))


@functools.lru_cache(maxsize=64)
def render_merge_pass(dtype: str) -> CudaSource:
    """One merge pass over ``total / n`` contiguous rows of ``n``: runs of ``width`` (sorted in the
    order ``descending`` says) merged pairwise from ``keys``/``order`` into ``keys_out``/``order_out``.
    A null ``order`` reads each element's index as its position (the first pass)."""
    value = ctype(compute_dtype(dtype))
    params = [("long long", "total"), ("long long", "n"), ("long long", "width"), ("bool", "descending")]
    params += [(f"const {ctype(dtype)} *", "keys"), ("const long long *", "order")]
    params += [(f"{ctype(dtype)} *", "keys_out"), ("long long *", "order_out")]
    name = f"munet_merge_pass_{dtype}"
    before = f"(descending ? {LESS.format(a='v', b='w')} : {LESS.format(a='w', b='v')})"  # w strictly before v
    after = f"(descending ? {LESS.format(a='w', b='v')} : {LESS.format(a='v', b='w')})"  # v strictly before w
    lines = [
        *kernel_head(name, params, "total"),
        "    const long long row = i - i % n, q = i % n;",
        "    const long long lo = q - q % (2 * width);",
        "    const long long mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;",
        f"    const {value} v = {load(dtype, 'keys[i]')};",
        "    const bool left = q < mid;",
        "    // the sibling run's elements that go before v (ties too, for v of the right run): a prefix",
        "    long long a = left ? mid : lo, b = left ? hi : mid;",
        "    while (a < b) {",
        "      const long long m = a + (b - a) / 2;",
        f"      const {value} w = {load(dtype, 'keys[row + m]')};",
        f"      const bool goes_first = left ? {before} : !{after};",
        "      if (goes_first) a = m + 1; else b = m;",
        "    }",
        "    const long long place = lo + (left ? (q - lo) + (a - mid) : (q - mid) + (a - lo));",
        "    keys_out[row + place] = keys[i];",
        "    order_out[row + place] = order ? order[i] : q;",
        "  }",
        "}",
    ]
    return CudaSource(name, HEADER + PRELUDE + "\n".join(lines) + "\n", tuple(params))


def _merge_sorted(rt, x, dim: int, k: int, descending: bool):
    """``_ranked``'s result for long rows: merge passes over a contiguous copy with ``dim`` last."""
    cp = rt.cupy
    dtype = copies.dtype_of(x)
    perm = [d for d in range(x.ndim) if d != dim] + [dim]
    keys, order = cp.ascontiguousarray(x.transpose(perm)), None
    keys_out, order_out = rt.empty(keys.shape, dtype), rt.empty(keys.shape, D.int64)
    src = render_merge_pass(dtype.name)
    width, n = 1, x.shape[dim]
    while width < n:
        pointers = [keys.data.ptr, 0 if order is None else order.data.ptr, keys_out.data.ptr, order_out.data.ptr]
        arguments = [keys.size, n, width, descending, *pointers]
        launch.launch(rt, src, keys.size, list(zip((t for t, _ in src.params), arguments)))
        if order is None:
            order = rt.empty(keys.shape, D.int64)
        keys, keys_out, order, order_out = keys_out, keys, order_out, order
        width *= 2
    shape = list(x.shape)
    shape[dim] = k
    values, indices = rt.empty(shape, dtype), rt.empty(shape, D.int64)
    copies.copy_into(cp, values.transpose(perm), keys[..., :k])
    copies.copy_into(cp, indices.transpose(perm), order[..., :k])
    return values, indices


def _ranked(rt, x, dim: int, k: int, descending: bool):
    cp = rt.cupy
    dtype = copies.dtype_of(x)
    if x.ndim == 0:  # one element: itself, at index 0
        return cp.array(x, copy=True), cp.full((), 0, dtype=cp.int64)
    shape = list(x.shape)
    shape[dim] = k
    values, indices = rt.empty(shape, dtype), rt.empty(shape, D.int64)
    n = x.shape[dim]
    if values.size and n > MERGE_MIN_LENGTH:
        return _merge_sorted(rt, x, dim, k, descending)
    if values.size:
        in_st = [s // x.itemsize for s in x.strides]
        out_st = contiguous_strides(tuple(shape))
        kept = [d for d in range(x.ndim) if d != dim]
        src = render_rank(dtype.name, len(kept))
        arguments = [x.size, n, k, descending, x.data.ptr, values.data.ptr, indices.data.ptr, in_st[dim], out_st[dim]]
        arguments += [x.shape[d] for d in kept] + [in_st[d] for d in kept] + [out_st[d] for d in kept]
        launch.launch(rt, src, x.size, list(zip((t for t, _ in src.params), arguments)))
    return values, indices


@kernel("sort")
def sort(rt, x, *, dim, descending, stable):
    return _ranked(rt, x, dim, x.shape[dim] if x.ndim else 1, bool(descending))


@kernel("topk")
def topk(rt, x, *, k, dim, largest):
    return _ranked(rt, x, dim, k, bool(largest))
