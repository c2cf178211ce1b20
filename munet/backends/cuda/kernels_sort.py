"""``sort`` and ``topk`` on cuda: one ranking kernel rendered as CUDA C.

``render_rank(dtype, rank)``: one thread per input element counts the elements of its row (the dim
sorted, read through the input's strides) that go before it, which is its position in the sorted row;
it stores its value and its index there when that position is below ``k`` (``sort``: the row's length;
``topk``: its ``k``). The order is the cpu kernel's stable one: ascending puts NaN last, descending
puts NaN first, and equal elements (NaNs among themselves, -0.0 and 0.0) keep their original order
either way, so every position has exactly one element and the result is deterministic. 16-bit floats
compare as float32 (exactly). Each row costs ``n**2`` comparisons on ``n`` threads: correct for any
length, quick for rows up to a few thousand elements; a merge or bitonic sort is the next step.
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
_LESS = "(({a} < {b}) || ({b} != {b} && {a} == {a}))"


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
    w_first = _LESS.format(a="w", b="v") + " || (!" + _LESS.format(a="v", b="w") + " && j < q)"
    w_first_descending = _LESS.format(a="v", b="w") + " || (!" + _LESS.format(a="w", b="v") + " && j < q)"
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


def _ranked(rt, x, dim: int, k: int, descending: bool):
    cp = rt.cupy
    dtype = copies.dtype_of(x)
    if x.ndim == 0:  # one element: itself, at index 0
        return cp.array(x, copy=True), cp.full((), 0, dtype=cp.int64)
    shape = list(x.shape)
    shape[dim] = k
    values, indices = rt.empty(shape, dtype), rt.empty(shape, D.int64)
    n = x.shape[dim]
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
