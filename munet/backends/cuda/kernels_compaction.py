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
``unique_consecutive`` (``!=``). ``dim`` (unique slices) has no kernel here: it raises
:class:`~munet.DeviceError`.
"""

from __future__ import annotations

import functools

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.cuda import copies, launch
from munet.backends.cuda.registry import KERNELS, kernel
from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, ctype, load
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


@kernel("unique")
def unique(rt, x, *, dim, consecutive):
    if dim is not None:
        raise DeviceError(
            f"unique: dim={dim} (unique slices) has no kernel for device 'cuda:{rt.index}' yet; use dim=None"
        )
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
