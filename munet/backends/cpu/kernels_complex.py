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
    return np.angle(z)


@kernel("complex")
def make_complex(re, im):
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), np.result_type(re.dtype, np.complex64))
    out.real = re
    out.imag = im
    return out
