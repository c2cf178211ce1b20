"""The scans on cuda (``cumsum``, ``cumprod``, ``cummax``, ``cummin``) as one CUDA C kernel renderer.

``render_scan(op, dtype, rank)``: one thread per *line* (the elements along the scanned dim at one
position of the other ``rank`` dims, read through the input's strides) walks it in order, combining
with the scalar formula form of ``add``/``mul``/``maximum``/``minimum`` and storing every prefix into
the C-contiguous output. The cpu kernel's arithmetic: 16-bit floats load to float32, accumulate there
and round each output once; integers wrap in their own type (the op gives integer sums int64); a NaN
propagates through ``cummax``/``cummin``, whose index is the last position holding the running extreme
(ties take the later one; after a NaN, the last NaN). ``cumsum``'s ``reverse`` walks from the end (its
gradient). Sequential per line: correct for any length, fast only with many lines (a long single line
runs on one thread; a parallel prefix scan is the next step).
"""

from __future__ import annotations

import functools

from munet import _dtype as D
from munet._tensor import contiguous_strides
from munet.backends.cuda import complex_formula, copies, launch
from munet.backends.cuda.registry import kernel
from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, compute_dtype, ctype, load, render_apply, store
from munet.backends.cuda.source import CudaSource, kernel_head, offsets
from munet.ops._scalar import Apply, Arg

_COMBINE = {"cumsum": "add", "cumprod": "mul", "cummax": "maximum", "cummin": "minimum"}
OPS = tuple(_COMBINE)


@functools.lru_cache(maxsize=256)
def render_scan(op: str, dtype: str, rank: int) -> CudaSource:
    """The scan kernel of ``op`` over ``dtype`` lines whose position has ``rank`` dims (see the module
    docstring); ``cummax``/``cummin`` also write each prefix's index (int64) to ``key``."""
    if op not in _COMBINE:
        raise ValueError(f"render_scan: op must be one of {', '.join(OPS)}, got {op!r}")
    select = op in ("cummax", "cummin")
    value = compute_dtype(dtype)
    acc_type = ctype(value)
    params = [("long long", "lines"), ("long long", "len")]
    params += [(f"const {ctype(dtype)} *", "in"), (f"{ctype(dtype)} *", "out")]
    params += [("long long *", "key")] if select else []
    params += [("long long", "in_step"), ("long long", "out_step"), ("bool", "reverse")]
    params += [("long long", f"{name}{d}") for name in ("size", "xs", "ys") for d in range(rank)]
    name = f"munet_{op}_{dtype}_r{rank}"
    combine = render_apply(Apply(_COMBINE[op], (Arg(0, value), Arg(1, value)), value), ["acc", "v"])
    lines = [*kernel_head(name, params, "lines"), *offsets("i", "size", rank, ("xs", "ys"))]
    lines += [
        f"    {acc_type} acc = 0; long long last = 0;",
        "    for (long long r = 0; r < len; r++) {",
        "      const long long q = reverse ? len - 1 - r : r;",
        f"      const {acc_type} v = {load(dtype, 'in[at_xs + q * in_step]')};",
        f"      acc = r == 0 ? v : {combine};",
        f"      out[at_ys + q * out_step] = {store(dtype, 'acc', value)};",
    ]
    if select:  # the position of the running extreme: the latest equal to it, or the latest NaN
        lines += ["      if (v == acc || v != v) last = q;", "      key[at_ys + q * out_step] = last;"]
    lines += ["    }", "  }", "}"]
    return CudaSource(name, HEADER + PRELUDE + "\n".join(lines) + "\n", tuple(params))


def _scan(rt, op: str, x, dim: int, reverse: bool = False):
    line = x.reshape(1) if x.ndim == 0 else x  # a 0-d tensor scans as one element
    dtype = copies.dtype_of(x)
    out = rt.empty(line.shape, dtype)
    select = op in ("cummax", "cummin")
    key = rt.empty(line.shape, D.int64) if select else None
    n = line.shape[dim]
    if line.size:
        in_st = [s // line.itemsize for s in line.strides]
        out_st = contiguous_strides(line.shape)
        kept = [d for d in range(line.ndim) if d != dim]
        src = render_scan(op, dtype.name, len(kept))
        values = [line.size // n, n, line.data.ptr, out.data.ptr, *([key.data.ptr] if select else [])]
        values += [in_st[dim], out_st[dim], reverse]
        values += [line.shape[d] for d in kept] + [in_st[d] for d in kept] + [out_st[d] for d in kept]
        launch.launch(rt, src, line.size // n, list(zip((t for t, _ in src.params), values)))
    if select:
        return out.reshape(x.shape), key.reshape(x.shape)
    return out.reshape(x.shape)


@kernel("cumsum")
def cumsum(rt, x, *, dim, reverse):
    if x.dtype.kind == "c":  # the scan renderer prints real formulas only
        return complex_formula.cumulative_sum(rt, x, dim, reverse)
    return _scan(rt, "cumsum", x, dim, reverse)


@kernel("cumprod")
def cumprod(rt, x, *, dim):
    return _scan(rt, "cumprod", x, dim)


@kernel("cummax")
def cummax(rt, x, *, dim):
    return _scan(rt, "cummax", x, dim)


@kernel("cummin")
def cummin(rt, x, *, dim):
    return _scan(rt, "cummin", x, dim)
