"""CPU kernels of the Fourier transform primitives (``munet/ops/fft.py``): NumPy's pocketfft."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.registry import kernel


@kernel("fft_c2c")
def fft_c2c(x, *, dims, norm, forward):
    return (np.fft.fftn if forward else np.fft.ifftn)(x, axes=dims, norm=norm)


@kernel("fft_r2c")
def fft_r2c(x, *, dims, norm):
    return np.fft.rfftn(x, axes=dims, norm=norm)


@kernel("fft_c2r")
def fft_c2r(x, *, dims, norm, last_dim_size):
    sizes = [x.shape[d] for d in dims[:-1]] + [last_dim_size]
    return np.fft.irfftn(x, s=sizes, axes=dims, norm=norm)
