"""The scans on cuda (``cumsum``, ``cumprod``, ``cummax``, ``cummin``) as one CUDA C kernel renderer.

``render_scan(op, dtype, rank)``: one thread per *segment* of a *line* (the elements along the
scanned dim at one position of the other ``rank`` dims, read through the input's strides) walks it in
order, combining with the scalar formula form of ``add``/``mul``/``maximum``/``minimum`` and storing
every prefix into the C-contiguous output. The cpu kernel's arithmetic: 16-bit floats load to
float32, accumulate there and round each output once; integers wrap in their own type (the op gives
integer sums int64); a NaN propagates through ``cummax``/``cummin``, whose index is the last position
holding the running extreme (ties take the later one; after a NaN, the last NaN). ``cumsum``'s
``reverse`` walks from the end (its gradient).

Many lines (or short ones) run one segment per line: one launch, the cpu's order of operations, so
the results are the cpu's bit for bit. A few long lines (at most :data:`FEW_LINES` lines longer than
:data:`SEGMENTED_MIN_LENGTH`) are cut into segments of about ``sqrt(len)`` elements so that the GPU
has threads to run, in three launches:

1. ``render_scan`` with ``totals``: each segment's own total (and, for ``cummax``/``cummin``, the
   last index of it: the ``(value, index)`` the walk ends with);
2. ``render_scan_carries``: one thread per line combines the totals in order into each segment's
   carry, the state the whole-line walk has when it reaches the segment's first element;
3. ``render_scan`` with ``carry``: each segment walks again from its carry, writing the outputs.

``cummax``/``cummin`` and integer sums and products are exact in any grouping, so they stay equal to
the cpu's; a float ``cumsum``/``cumprod`` of a segmented line adds in another order and agrees with
the cpu to rounding (each prefix within ``len * eps`` times the sum of magnitudes, as any order of
summation is). The segment length and the two thresholds are reasoned, not tuned on a GPU.
"""

from __future__ import annotations

import functools
import math

from munet import _dtype as D
from munet._tensor import contiguous_strides
from munet.backends.cuda import complex_formula, copies, launch
from munet.backends.cuda.registry import kernel
from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, compute_dtype, ctype, load, render_apply, store
from munet.backends.cuda.source import CudaSource, kernel_head, offsets
from munet.ops._scalar import Apply, Arg

_COMBINE = {"cumsum": "add", "cumprod": "mul", "cummax": "maximum", "cummin": "minimum"}
OPS = tuple(_COMBINE)
SEGMENTED_MIN_LENGTH = 8192  # lines longer than this, when there are few, are scanned in segments
FEW_LINES = 1024  # fewer lines than this leave most of a GPU's threads idle with a thread per line
MIN_SEGMENT = 64  # the shortest segment (about sqrt(len) elements otherwise)


def _combine(op: str, value: str, a: str, b: str) -> str:
    return render_apply(Apply(_COMBINE[op], (Arg(0, value), Arg(1, value)), value), [a, b])


def _check_op(op: str, where: str) -> None:
    if op not in _COMBINE:
        raise ValueError(f"{where}: op must be one of {', '.join(OPS)}, got {op!r}")


@functools.lru_cache(maxsize=256)
def render_scan(op: str, dtype: str, rank: int) -> CudaSource:
    """The scan kernel of ``op`` over ``dtype`` lines whose position has ``rank`` dims (see the module
    docstring), a thread per segment of ``seg_len`` (``segments`` per line); ``cummax``/``cummin`` also
    write each prefix's index (int64) to ``key``. A segment starts from ``carry``/``carry_key`` when those
    are given (and it is not a line's first); with ``totals`` it writes only its final state there."""
    _check_op(op, "render_scan")
    select = op in ("cummax", "cummin")
    value = compute_dtype(dtype)
    acc_type = ctype(value)
    params = [("long long", "lines"), ("long long", "len"), ("long long", "segments"), ("long long", "seg_len")]
    params += [(f"const {ctype(dtype)} *", "in"), (f"{ctype(dtype)} *", "out")]
    params += [("long long *", "key")] if select else []
    params += [(f"const {acc_type} *", "carry"), (f"{acc_type} *", "totals")]
    params += [("const long long *", "carry_key"), ("long long *", "total_keys")] if select else []
    params += [("long long", "in_step"), ("long long", "out_step"), ("bool", "reverse")]
    params += [("long long", f"{name}{d}") for name in ("size", "xs", "ys") for d in range(rank)]
    name = f"munet_{op}_{dtype}_r{rank}"
    lines = [*kernel_head(name, params, "lines * segments"), "    const long long s = i % segments;"]
    lines += offsets("i / segments", "size", rank, ("xs", "ys"))
    lines += [
        f"    {acc_type} acc = 0; long long last = 0; bool started = false;",
        f"    if (carry && s > 0) {{ acc = carry[i]; {'last = carry_key[i]; ' if select else ''}started = true; }}",
        "    const long long r0 = s * seg_len, r1 = r0 + seg_len < len ? r0 + seg_len : len;",
        "    for (long long r = r0; r < r1; r++) {",
        "      const long long q = reverse ? len - 1 - r : r;",
        f"      const {acc_type} v = {load(dtype, 'in[at_xs + q * in_step]')};",
        f"      acc = started ? {_combine(op, value, 'acc', 'v')} : v;",
        "      started = true;",
    ]
    if select:  # the position of the running extreme: the latest equal to it, or the latest NaN
        lines += ["      if (v == acc || v != v) last = q;"]
    lines += ["      if (!totals) {", f"        out[at_ys + q * out_step] = {store(dtype, 'acc', value)};"]
    lines += ["        key[at_ys + q * out_step] = last;"] if select else []
    lines += ["      }", "    }", "    if (totals) {", "      totals[i] = acc;"]
    lines += ["      total_keys[i] = last;"] if select else []
    lines += ["    }", "  }", "}"]
    return CudaSource(name, HEADER + PRELUDE + "\n".join(lines) + "\n", tuple(params))


@functools.lru_cache(maxsize=64)
def render_scan_carries(op: str, dtype: str) -> CudaSource:
    """One thread per line: ``carry[s]``, the state of the line's walk before segment ``s`` (from the
    segments' ``totals``: the combined totals before it; for ``cummax``/``cummin`` with the index)."""
    _check_op(op, "render_scan_carries")
    select = op in ("cummax", "cummin")
    value = compute_dtype(dtype)
    acc_type = ctype(value)
    params = [("long long", "lines"), ("long long", "segments"), (f"const {acc_type} *", "totals")]
    params += [(f"{acc_type} *", "carry")]
    params += [("const long long *", "total_keys"), ("long long *", "carry_key")] if select else []
    name = f"munet_{op}_carries_{dtype}"
    lines = [*kernel_head(name, params, "lines"), f"    {acc_type} acc = 0; long long last = 0;"]
    lines += ["    for (long long s = 0; s < segments; s++) {", "      const long long at = i * segments + s;"]
    lines += [f"      const {acc_type} m = totals[at];"]
    if select:
        better = "m > acc" if op == "cummax" else "m < acc"
        lines += [
            "      carry[at] = acc; carry_key[at] = last;",
            "      const long long l = total_keys[at];",
            "      // after a NaN only a later NaN moves the index; a NaN, a new extreme or a tie takes the segment's",
            f"      if (s == 0 || m != m || (acc == acc && ({better} || m == acc))) {{ acc = m; last = l; }}",
        ]
    else:
        lines += ["      carry[at] = acc;", f"      acc = s == 0 ? m : {_combine(op, value, 'acc', 'm')};"]
    lines += ["    }", "  }", "}"]
    return CudaSource(name, HEADER + PRELUDE + "\n".join(lines) + "\n", tuple(params))


def segment_length(n: int, lines: int) -> int:
    """Elements per segment for ``lines`` lines of ``n`` (see the module docstring): ``n`` for one segment."""
    if n <= SEGMENTED_MIN_LENGTH or lines >= FEW_LINES:
        return max(n, 1)
    return max(MIN_SEGMENT, math.isqrt(n))


def _scan(rt, op: str, x, dim: int, reverse: bool = False):
    line = x.reshape(1) if x.ndim == 0 else x  # a 0-d tensor scans as one element
    dtype = copies.dtype_of(x)
    out = rt.empty(line.shape, dtype)
    select = op in ("cummax", "cummin")
    key = rt.empty(line.shape, D.int64) if select else None
    n = line.shape[dim]
    if line.size:
        lines = line.size // n
        seg_len = segment_length(n, lines)
        segments = -(-n // seg_len)
        in_st = [s // line.itemsize for s in line.strides]
        out_st = contiguous_strides(line.shape)
        kept = [d for d in range(line.ndim) if d != dim]
        src = render_scan(op, dtype.name, len(kept))
        geometry = [in_st[dim], out_st[dim], reverse]
        geometry += [line.shape[d] for d in kept] + [in_st[d] for d in kept] + [out_st[d] for d in kept]
        head = [lines, n, segments, seg_len, line.data.ptr, out.data.ptr, *([key.data.ptr] if select else [])]

        def run(carry, totals, carry_key, total_keys):
            values = [*head, carry, totals, *([carry_key, total_keys] if select else []), *geometry]
            launch.launch(rt, src, lines * segments, list(zip((t for t, _ in src.params), values)))

        if segments == 1:
            run(0, 0, 0, 0)
        else:
            acc = D.float32 if dtype in (D.float16, D.bfloat16) else dtype  # compute_dtype's
            totals, carry = rt.empty((lines, segments), acc), rt.empty((lines, segments), acc)
            indices = [rt.empty((lines, segments), D.int64) for _ in range(2 if select else 0)]
            keys = [a.data.ptr for a in indices] or [0, 0]  # the segments' last indices and carried ones
            run(0, totals.data.ptr, 0, keys[0])
            carries = render_scan_carries(op, dtype.name)
            values = [lines, segments, totals.data.ptr, carry.data.ptr, *(keys if select else [])]
            launch.launch(rt, carries, lines, list(zip((t for t, _ in carries.params), values)))
            run(carry.data.ptr, 0, keys[1], 0)
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
