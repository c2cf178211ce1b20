"""Creation, casts, strided copies (``cat``, ``as_strided_scatter`` too) and fills: the kernels the backend's memory layer builds on.

They are CuPy array operations (CuPy compiles its own small elementwise kernels for them); the
arithmetic ops come from the op formulas, rendered as CUDA C (``munet.compiler.codegen.cuda``).
"""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet.backends.cuda import copies
from munet.backends.cuda.registry import kernel


@kernel("empty")
def empty(rt, *, shape, dtype):
    return rt.empty(shape, dtype)


@kernel("full")
def full(rt, *, shape, value, dtype):
    out = rt.empty(shape, dtype)
    copies.copy_into(rt.cupy, out, value)
    return out


@kernel("arange")
def arange(rt, *, start, end, step, dtype):
    cp = rt.cupy
    n = max(0, int(np.ceil((end - start) / step)))  # the cpu kernel's count
    if dtype.is_floating_point:
        return copies.cast(cp, start + cp.arange(n, dtype=cp.float64) * step, dtype)
    return (start + cp.arange(n, dtype=cp.int64) * step).astype(dtype.np)


@kernel("linspace")
def linspace(rt, *, start, end, steps, dtype):
    """The decomposition's formula (``munet/ops/creation.py``), as the cpu kernel computes it:
    PyTorch's half from ``start`` and half from ``end``, in float32/float64 for those dtypes, in
    float64 after truncating ``start`` and ``end`` for integers, in float32 for other floats."""
    cp = rt.cupy
    floating = dtype.is_floating_point
    if steps == 1:
        return copies.cast(cp, cp.full(1, start, dtype=cp.float64 if floating else cp.int64), dtype)
    work = (dtype.np if dtype.np in (np.float32, np.float64) else np.float32) if floating else np.float64
    rounded = np.dtype(work).type
    lo, hi = (rounded(v) if floating else rounded(np.int64(v)) for v in (start, end))
    step = rounded((hi - lo) / rounded(steps - 1))
    i = cp.arange(steps, dtype=work)
    out = cp.where(i < steps // 2, i * step + lo, hi - (steps - 1 - i) * step)
    return copies.cast(cp, out if floating else cp.trunc(out).astype(cp.int64), dtype)


@kernel("eye")
def eye(rt, *, n, m, dtype):
    cp = rt.cupy
    return copies.cast(cp, cp.eye(n, m, dtype=cp.float32 if dtype is D.bfloat16 else dtype.np), dtype)


@kernel("cast")
def cast(rt, x, *, dtype):
    return copies.cast(rt.cupy, x, dtype)


@kernel("clone")
def clone(rt, x):
    return rt.cupy.array(x, copy=True, order="C")


@kernel("copy")
def copy(rt, self, src):
    out = rt.empty(self.shape, copies.dtype_of(self))
    copies.copy_into(rt.cupy, out, src)
    return out


@kernel("copy_")
def copy_(rt, out, src):
    copies.copy_into(rt.cupy, out, src)


@kernel("fill")
def fill(rt, self, value):
    out = rt.empty(self.shape, copies.dtype_of(self))
    copies.copy_into(rt.cupy, out, value)
    return out


@kernel("fill_")
def fill_(rt, out, value):
    copies.copy_into(rt.cupy, out, value)


@kernel("cat")
def cat(rt, tensors, *, dim, sizes):
    """One strided copy per input into its slice of the result (1-D empty inputs, ``sizes`` None, skipped)."""
    kept = [t for t, size in zip(tensors, sizes) if size is not None]
    dtype = copies.dtype_of(tensors[0])
    if not kept:
        return rt.empty((0,), dtype)
    shape = list(kept[0].shape)
    shape[dim] = sum(t.shape[dim] for t in kept)
    out = rt.empty(shape, dtype)
    start = 0
    for t in kept:
        if t.size:
            copies.copy_into(rt.cupy, out[(slice(None),) * dim + (slice(start, start + t.shape[dim]),)], t)
        start += t.shape[dim]
    return out


@kernel("as_strided_scatter")
def as_strided_scatter(rt, x, src, *, size, stride, storage_offset):
    """A C-contiguous copy of ``x`` whose strided view ``(size, stride, storage_offset)`` (in elements
    of the copy) is replaced by ``src``: one strided copy into the view."""
    cp = rt.cupy
    out = cp.array(x, copy=True, order="C")
    if 0 not in tuple(size):
        at = out.reshape(-1).data + storage_offset * out.itemsize
        view = cp.ndarray(tuple(size), out.dtype, at, tuple(s * out.itemsize for s in stride))
        copies.copy_into(cp, view, src)
    return out
