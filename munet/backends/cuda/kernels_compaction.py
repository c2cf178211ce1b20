"""Ops whose result size depends on the data, on cuda: ``nonzero`` and ``unique`` (both modes), as
stream compaction on the device: *count*, *scan*, *scatter*.

The elements, in row-major order, are cut into chunks of :data:`CHUNK`; one thread per chunk
counts the elements it keeps (``nonzero``: the non-zero ones, NaN included; ``unique``: the first
of each run of equal values), the cuda ``cumsum`` kernel turns the counts into each chunk's end,
the host reads the last end (the result's size: one 8-byte copy, the synchronization PyTorch's
``nonzero`` and ``unique`` make too), and one thread per chunk walks it again writing each kept
element at its place, so the result keeps row-major order. ``masked_select`` (``nonzero`` and an
index) runs on these kernels too.

``unique`` sorts first (the cuda ``sort`` kernel, stable; ``unique_consecutive`` does not), then
keeps the starts of runs: the values, each element's run (``inverse``, through the sort's
indices) and each run's length (``counts``, from the run starts). Equality is the cpu kernel's:
NaNs are one value for ``unique`` (NumPy's ``unique``), each NaN its own run for
``unique_consecutive`` (``!=``).

With ``dim`` (unique slices), each slice along ``dim`` is a row of a contiguous copy with ``dim``
first: ``unique`` orders the rows lexicographically by merge passes over their indices
(``render_row_merge_pass``: the element order of ``sort``, NaN last; stable), then counts and writes
the starts of runs of equal rows as above and gathers each run's first row. Rows are equal when
every element is ``==`` (NumPy's rule for slices: a row holding a NaN equals no other row, in both
modes; -0.0 equals 0.0).
"""

from __future__ import annotations

import functools

from munet import _dtype as D
from munet.backends.cuda import copies, launch
from munet.backends.cuda.kernels_sort import LESS
from munet.backends.cuda.registry import KERNELS, kernel
from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, compute_dtype, ctype, load
from munet.backends.cuda.source import CudaSource, kernel_head, offsets

CHUNK = 64  # elements per thread: the scan runs over n / CHUNK counts
_FLOAT_NAMES = tuple(d.name for d in D.FLOATING_DTYPES)

_CHUNK_BOUNDS = [f"    const long long lo = i * {CHUNK}, hi = lo + {CHUNK} < n ? lo + {CHUNK} : n;"]


def _unit(name: str, params: list, lines: list) -> CudaSource:
    return CudaSource(name, HEADER + PRELUDE + "\n".join(lines) + "\n", tuple(params))


def _strided_params(rank: int) -> list:
    return [("long long", f"{family}{d}") for family in ("size", "xs") for d in range(rank)]


def _is_nonzero(dtype: str) -> str:
    return f"({load(dtype, 'x[at_xs]')} != 0)"


@functools.lru_cache(maxsize=128)
def render_nonzero_count(dtype: str, rank: int) -> CudaSource:
    """``counts[t]``: how many of the elements ``[t * CHUNK, (t + 1) * CHUNK)`` (row-major, read
    through the strides ``xs``) are non-zero."""
    params = [("long long", "n"), ("long long", "chunks"), (f"const {ctype(dtype)} *", "x"), ("long long *", "counts")]
    params += _strided_params(rank)
    name = f"munet_nonzero_count_{dtype}_r{rank}"
    lines = [*kernel_head(name, params, "chunks"), *_CHUNK_BOUNDS, "    long long kept = 0;"]
    lines += ["    for (long long q = lo; q < hi; q++) {", *offsets("q", "size", rank, ("xs",))]
    lines += [f"      kept += {_is_nonzero(dtype)};", "    }", "    counts[i] = kept;", "  }", "}"]
    return _unit(name, params, lines)


@functools.lru_cache(maxsize=128)
def render_nonzero_write(dtype: str, rank: int) -> CudaSource:
    """Each non-zero element's coordinates as row ``j`` of ``out`` (``(count, rank)`` int64), ``j``
    counted from its chunk's start (``ends[t - 1]``, the inclusive scan of the counts)."""
    params = [("long long", "n"), ("long long", "chunks"), (f"const {ctype(dtype)} *", "x")]
    params += [("const long long *", "ends"), ("long long *", "out"), *_strided_params(rank)]
    name = f"munet_nonzero_write_{dtype}_r{rank}"
    lines = [*kernel_head(name, params, "chunks"), *_CHUNK_BOUNDS, "    long long j = i == 0 ? 0 : ends[i - 1];"]
    lines += ["    for (long long q = lo; q < hi; q++) {", *offsets("q", "size", rank, ("xs",))]
    lines += [f"      if (!{_is_nonzero(dtype)}) continue;", "      long long left = q;"]
    for d in reversed(range(rank)):
        lines.append(f"      out[j * {rank} + {d}] = left % size{d}; left /= size{d};")
    lines += ["      j++;", "    }", "  }", "}"]
    return _unit(name, params, lines)


def _chunk_ends(rt, counts):
    """The inclusive scan of ``counts`` and its last entry (the total), read on the host."""
    ends = KERNELS["cumsum"](rt, counts, dim=0, reverse=False)
    return ends, int(copies.to_host(rt.cupy, ends[-1:])[0])


def _strided_arguments(x) -> list:
    return [*x.shape, *(s // x.itemsize for s in x.strides)]


@kernel("nonzero")
def nonzero(rt, x):
    rank = x.ndim
    if x.size == 0:
        return rt.empty((0, rank), D.int64)
    dtype = copies.dtype_of(x).name
    n, chunks = x.size, -(-x.size // CHUNK)
    counts = rt.empty((chunks,), D.int64)
    count_src = render_nonzero_count(dtype, rank)
    head = [n, chunks, x.data.ptr]
    launch.launch(rt, count_src, chunks, _typed(count_src, [*head, counts.data.ptr, *_strided_arguments(x)]))
    ends, total = _chunk_ends(rt, counts)
    out = rt.empty((total, rank), D.int64)
    if total and rank:
        write_src = render_nonzero_write(dtype, rank)
        values = [*head, ends.data.ptr, out.data.ptr, *_strided_arguments(x)]
        launch.launch(rt, write_src, chunks, _typed(write_src, values))
    return out


def _typed(src: CudaSource, values: list) -> list:
    return list(zip((t for t, _ in src.params), values))


# unique ------------------------------------------------------------------------------------------


def _starts_run(dtype: str, nan_equal: bool) -> str:
    """Whether sorted or flat element ``q`` of ``keys`` begins a run of equal values."""
    a, b = load(dtype, "keys[q]"), load(dtype, "keys[q - 1]")
    same = f"{a} == {b}"
    if nan_equal and dtype in _FLOAT_NAMES:
        same = f"({same} || ({a} != {a} && {b} != {b}))"
    return f"(q == 0 || !({same}))"


@functools.lru_cache(maxsize=64)
def render_unique_count(dtype: str, nan_equal: bool) -> CudaSource:
    """``counts[t]``: how many runs of equal values begin in chunk ``t`` of the flat ``keys``."""
    params = [
        ("long long", "n"),
        ("long long", "chunks"),
        (f"const {ctype(dtype)} *", "keys"),
        ("long long *", "counts"),
    ]
    name = f"munet_unique_count_{dtype}{'_nan_equal' if nan_equal else ''}"
    lines = [*kernel_head(name, params, "chunks"), *_CHUNK_BOUNDS, "    long long kept = 0;"]
    lines += [f"    for (long long q = lo; q < hi; q++) kept += {_starts_run(dtype, nan_equal)};"]
    lines += ["    counts[i] = kept;", "  }", "}"]
    return _unit(name, params, lines)


@functools.lru_cache(maxsize=64)
def render_unique_write(dtype: str, nan_equal: bool, sorted_keys: bool) -> CudaSource:
    """Per run ``g``: ``values[g]`` and ``first[g]`` (its first position in ``keys``); per element
    ``q``: ``inverse[order[q]]`` (``sorted_keys``; else ``inverse[q]``) is its run."""
    params = [("long long", "n"), ("long long", "chunks"), (f"const {ctype(dtype)} *", "keys")]
    params += [("const long long *", "order"), ("const long long *", "ends"), (f"{ctype(dtype)} *", "values")]
    params += [("long long *", "first"), ("long long *", "inverse")]
    name = f"munet_unique_write_{dtype}{'_nan_equal' if nan_equal else ''}{'_sorted' if sorted_keys else ''}"
    lines = [*kernel_head(name, params, "chunks"), *_CHUNK_BOUNDS, "    long long g = i == 0 ? 0 : ends[i - 1];"]
    lines += [
        "    for (long long q = lo; q < hi; q++) {",
        f"      if ({_starts_run(dtype, nan_equal)}) {{ values[g] = keys[q]; first[g] = q; g++; }}",
        f"      inverse[{'order[q]' if sorted_keys else 'q'}] = g - 1;",
        "    }",
        "  }",
        "}",
    ]
    return _unit(name, params, lines)


@functools.lru_cache(maxsize=1)
def render_run_lengths() -> CudaSource:
    """``counts[g] = first[g + 1] - first[g]`` (the last run ends at ``n``)."""
    params = [("long long", "runs"), ("long long", "n"), ("const long long *", "first"), ("long long *", "counts")]
    lines = [*kernel_head("munet_run_lengths", params, "runs")]
    lines += ["    counts[i] = (i + 1 < runs ? first[i + 1] : n) - first[i];", "  }", "}"]
    return _unit("munet_run_lengths", params, lines)


# unique slices --------------------------------------------------------------------------------


def _guarded(name: str, lines: list) -> str:
    """Device function ``name``'s definition, once per translation unit (tests and caches combine sources)."""
    guard = f"MUNET_{name.upper()}"
    return "\n".join([f"#ifndef {guard}", f"#define {guard}", *lines, "#endif"])


def _row_order(dtype: str) -> str:
    """A device function: -1, 0 or 1 as row ``a`` of ``keys`` (rows of ``m``) goes before, ties with or
    goes after row ``b`` lexicographically, elements in ``sort``'s order (NaN last, NaNs tie)."""
    value = ctype(compute_dtype(dtype))
    return _guarded(f"munet_row_order_{dtype}", [
        f"static __device__ int munet_row_order_{dtype}(const {ctype(dtype)} *keys, long long m, long long a, long long b) {{",
        "  for (long long c = 0; c < m; c++) {",
        f"    const {value} u = {load(dtype, 'keys[a * m + c]')}, w = {load(dtype, 'keys[b * m + c]')};",
        f"    if ({LESS.format(a='u', b='w')}) return -1;",
        f"    if ({LESS.format(a='w', b='u')}) return 1;",
        "  }",
        "  return 0;",
        "}",
    ])  # fmt: skip


@functools.lru_cache(maxsize=64)
def render_row_merge_pass(dtype: str) -> CudaSource:
    """One merge pass of the row indices ``order`` (null: the identity) of ``n`` rows of ``m`` in ``keys``:
    runs of ``width`` rows, sorted lexicographically and stably, merged pairwise into ``order_out``."""
    params = [("long long", "n"), ("long long", "m"), ("long long", "width"), (f"const {ctype(dtype)} *", "keys")]
    params += [("const long long *", "order"), ("long long *", "order_out")]
    name = f"munet_row_merge_pass_{dtype}"
    lines = [
        _row_order(dtype),
        *kernel_head(name, params, "n"),
        "    const long long lo = i - i % (2 * width);",
        "    const long long mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;",
        "    const long long v = order ? order[i] : i;",
        "    const bool left = i < mid;",
        "    // the sibling run's rows that go before row v (ties too, for v of the right run): a prefix",
        "    long long a = left ? mid : lo, b = left ? hi : mid;",
        "    while (a < b) {",
        "      const long long h = a + (b - a) / 2;",
        f"      const int c = munet_row_order_{dtype}(keys, m, order ? order[h] : h, v);",
        "      if (left ? c < 0 : c <= 0) a = h + 1; else b = h;",
        "    }",
        "    order_out[lo + (left ? (i - lo) + (a - mid) : (i - mid) + (a - lo))] = v;",
        "  }",
        "}",
    ]
    return _unit(name, params, lines)


def _row_starts_run(dtype: str) -> str:
    """Whether row ``order[q]`` (``q`` without an order) begins a run: it differs (``!=``) from the row before."""
    return _guarded(f"munet_row_starts_run_{dtype}", [
        f"static __device__ bool munet_row_starts_run_{dtype}(const {ctype(dtype)} *keys, const long long *order,",
        "                                                 long long m, long long q) {",
        "  if (q == 0) return true;",
        "  const long long a = order ? order[q] : q, b = order ? order[q - 1] : q - 1;",
        f"  for (long long c = 0; c < m; c++) if ({load(dtype, 'keys[a * m + c]')} != {load(dtype, 'keys[b * m + c]')}) return true;",
        "  return false;",
        "}",
    ])  # fmt: skip


@functools.lru_cache(maxsize=64)
def render_row_runs(dtype: str, write: bool) -> CudaSource:
    """Over chunks of the ``n`` rows (in the order ``order``, or their own): ``counts[t]``, the runs of equal
    rows beginning in chunk ``t`` (``write`` False); or (``write``) per run ``g`` its first position
    ``first[g]`` and its first row ``rows[g]``, and per row its run ``inverse[row]``."""
    params = [("long long", "n"), ("long long", "m"), ("long long", "chunks"), (f"const {ctype(dtype)} *", "keys")]
    params += [("const long long *", "order")]
    if write:
        params += [("const long long *", "ends"), ("long long *", "first"), ("long long *", "rows")]
        params += [("long long *", "inverse")]
    else:
        params += [("long long *", "counts")]
    name = f"munet_row_runs_{'write' if write else 'count'}_{dtype}"
    starts = f"munet_row_starts_run_{dtype}(keys, order, m, q)"
    lines = [_row_starts_run(dtype), *kernel_head(name, params, "chunks"), *_CHUNK_BOUNDS]
    if write:
        lines += [
            "    long long g = i == 0 ? 0 : ends[i - 1];",
            "    for (long long q = lo; q < hi; q++) {",
            "      const long long row = order ? order[q] : q;",
            f"      if ({starts}) {{ first[g] = q; rows[g] = row; g++; }}",
            "      inverse[row] = g - 1;",
            "    }",
        ]
    else:
        lines += ["    long long kept = 0;", f"    for (long long q = lo; q < hi; q++) kept += {starts};"]
        lines += ["    counts[i] = kept;"]
    return _unit(name, params, [*lines, "  }", "}"])


@functools.lru_cache(maxsize=64)
def render_gather_rows(dtype: str) -> CudaSource:
    """``out[g, c] = keys[rows[g], c]`` for ``runs`` rows of ``m``."""
    params = [("long long", "total"), ("long long", "m"), (f"const {ctype(dtype)} *", "keys")]
    params += [("const long long *", "rows"), (f"{ctype(dtype)} *", "out")]
    name = f"munet_gather_rows_{dtype}"
    lines = [*kernel_head(name, params, "total"), "    out[i] = keys[rows[i / m] * m + i % m];", "  }", "}"]
    return _unit(name, params, lines)


def _launch(rt, src: CudaSource, n: int, values: list) -> None:
    launch.launch(rt, src, n, _typed(src, values))


def _unique_slices(rt, x, dim: int, consecutive: bool):
    cp = rt.cupy
    dtype = copies.dtype_of(x)
    n = x.shape[dim]
    perm = [dim] + [d for d in range(x.ndim) if d != dim]
    if n == 0:
        return rt.empty(x.shape, dtype), rt.empty((0,), D.int64), rt.empty((0,), D.int64)
    keys = cp.ascontiguousarray(x.transpose(perm))
    m = keys.size // n
    order = None
    if not consecutive:
        merge_src, order_out = render_row_merge_pass(dtype.name), rt.empty((n,), D.int64)
        width = 1
        while width < n:
            _launch(
                rt,
                merge_src,
                n,
                [n, m, width, keys.data.ptr, 0 if order is None else order.data.ptr, order_out.data.ptr],
            )
            order, order_out = order_out, (rt.empty((n,), D.int64) if order is None else order)
            width *= 2
    order_ptr = 0 if order is None else order.data.ptr
    chunks = -(-n // CHUNK)
    counts = rt.empty((chunks,), D.int64)
    _launch(rt, render_row_runs(dtype.name, False), chunks, [n, m, chunks, keys.data.ptr, order_ptr, counts.data.ptr])
    ends, runs = _chunk_ends(rt, counts)
    first, rows, inverse = rt.empty((runs,), D.int64), rt.empty((runs,), D.int64), rt.empty((n,), D.int64)
    pointers = [ends.data.ptr, first.data.ptr, rows.data.ptr, inverse.data.ptr]
    _launch(rt, render_row_runs(dtype.name, True), chunks, [n, m, chunks, keys.data.ptr, order_ptr, *pointers])
    gathered = rt.empty((runs, *keys.shape[1:]), dtype)
    if gathered.size:
        _launch(
            rt,
            render_gather_rows(dtype.name),
            gathered.size,
            [gathered.size, m, keys.data.ptr, rows.data.ptr, gathered.data.ptr],
        )
    shape = list(x.shape)
    shape[dim] = runs
    values = rt.empty(shape, dtype)
    copies.copy_into(cp, values.transpose(perm), gathered)
    lengths = rt.empty((runs,), D.int64)
    _launch(rt, render_run_lengths(), runs, [runs, n, first.data.ptr, lengths.data.ptr])
    return values, inverse, lengths


@kernel("unique")
def unique(rt, x, *, dim, consecutive):
    if dim is not None:
        return _unique_slices(rt, x, dim, consecutive)
    dtype = copies.dtype_of(x)
    n = x.size
    if n == 0:
        return rt.empty((0,), dtype), rt.empty(x.shape, D.int64), rt.empty((0,), D.int64)
    flat = x.reshape(-1)
    if consecutive:
        keys, order_ptr = flat, 0  # the write kernel reads no order without a sort
    else:
        keys, order = KERNELS["sort"](rt, flat, dim=0, descending=False, stable=True)
        order_ptr = order.data.ptr
    nan_equal = not consecutive
    chunks = -(-n // CHUNK)
    counts = rt.empty((chunks,), D.int64)
    count_src = render_unique_count(dtype.name, nan_equal)
    launch.launch(rt, count_src, chunks, _typed(count_src, [n, chunks, keys.data.ptr, counts.data.ptr]))
    ends, runs = _chunk_ends(rt, counts)
    values, first = rt.empty((runs,), dtype), rt.empty((runs,), D.int64)
    inverse = rt.empty(x.shape, D.int64)
    write_src = render_unique_write(dtype.name, nan_equal, not consecutive)
    pointers = [keys.data.ptr, order_ptr, ends.data.ptr, values.data.ptr, first.data.ptr, inverse.data.ptr]
    launch.launch(rt, write_src, chunks, _typed(write_src, [n, chunks, *pointers]))
    lengths = rt.empty((runs,), D.int64)
    lengths_src = render_run_lengths()
    launch.launch(rt, lengths_src, runs, _typed(lengths_src, [runs, n, first.data.ptr, lengths.data.ptr]))
    return values, inverse, lengths
