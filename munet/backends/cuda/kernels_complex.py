"""The complex primitives on cuda (``munet/ops/complex.py``): CuPy's complex elementwise kernels.

The CUDA C renderer (``scalar_cuda.py``) prints real scalar formulas only, so ``complex``, ``conj``,
``complex_abs`` and ``angle`` are CuPy array operations on the operands' device (CuPy compiles its
own small kernels for them, as for the casts of ``kernels_memory.py``); the formula ops over complex
operands are ``complex_formula.py``'s.
"""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet.backends.cuda import copies
from munet.backends.cuda.registry import kernel


@kernel("conj")
def conj(rt, x):
    return rt.cupy.conj(x) if x.dtype.kind == "c" else rt.cupy.array(x, copy=True, order="C")


@kernel("complex_abs")
def complex_abs(rt, z):
    return rt.cupy.abs(z)


@kernel("angle")
def angle(rt, z):
    """``atan2(imag, real)``; of a real tensor pi where it is negative, 0 elsewhere, NaN where NaN."""
    cp = rt.cupy
    if z.dtype.kind == "c":
        return cp.angle(z)
    dtype = copies.dtype_of(z)
    x = copies.cast(cp, z, D.float32) if dtype is D.bfloat16 else z  # bfloat16 is held as its bits
    phase = cp.where(cp.isnan(x), x, cp.where(x < 0, x.dtype.type(np.pi), x.dtype.type(0)))  # -0.0 is not negative
    return copies.cast(cp, phase, dtype) if dtype is D.bfloat16 else phase


@kernel("complex")
def make_complex(rt, re, im):
    """``re + i im`` broadcast (float32/float64, as the op checks): the parts written into a fresh
    complex array."""
    out = rt.empty(np.broadcast_shapes(re.shape, im.shape), copies.dtype_of(re).to_complex())
    out.real[...] = re
    out.imag[...] = im
    return out
