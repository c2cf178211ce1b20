"""Creation, casts, strided copies and fills: the kernels the backend's memory layer builds on.

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
    cp = rt.cupy
    if not dtype.is_floating_point:
        return cp.linspace(start, end, steps).astype(cp.int64).astype(dtype.np)
    if steps == 1:
        return copies.cast(cp, cp.full(1, start, dtype=cp.float64), dtype)
    # PyTorch fills the first half from start and the second half from end (as the cpu kernel).
    step = (end - start) / (steps - 1)
    idx = cp.arange(steps, dtype=cp.float64)
    out = cp.where(idx < steps // 2, start + step * idx, end - step * (steps - 1 - idx))
    return copies.cast(cp, out, dtype)


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
