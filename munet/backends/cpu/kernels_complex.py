"""CPU kernels of the complex ops (``munet/ops/complex.py``): NumPy's complex arithmetic."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.registry import kernel


@kernel("conj")
def conj(x):
    return np.conj(x)


@kernel("complex_abs")
def complex_abs(z):
    return np.abs(z)


@kernel("angle")
def angle(z):
    if z.dtype.kind == "c":
        return np.angle(z)
    return np.where(np.isnan(z), z, np.where(z < 0, np.pi, 0.0)).astype(z.dtype)  # -0.0 is not negative


@kernel("complex")
def make_complex(re, im):
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), np.result_type(re.dtype, np.complex64))
    out.real = re
    out.imag = im
    return out
