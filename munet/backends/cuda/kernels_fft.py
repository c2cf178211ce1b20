"""The Fourier transform primitives on cuda (``munet/ops/fft.py``): cuFFT through ``cupy.fft``.

The arguments are the cpu kernels' (``munet/backends/cpu/kernels_fft.py``): ``dims`` the transformed
axes, ``norm`` PyTorch's ("backward", "forward", "ortho"), ``forward`` the direction of ``c2c``,
``last_dim_size`` the real length ``c2r`` returns along its last axis. CuPy plans each transform
with cuFFT (its plan cache is per device) and runs it on the current stream, which is MuNet's, in the
operand's device scope: the result and cuFFT's work area come from the device's pool. cuFFT computes
complex64 in single precision and complex128 in double, so a float32 signal stays complex64.
"""

from __future__ import annotations

from munet.backends.cuda.registry import kernel


@kernel("fft_c2c")
def fft_c2c(rt, x, *, dims, norm, forward):
    transform = rt.cupy.fft.fftn if forward else rt.cupy.fft.ifftn
    return transform(x, axes=tuple(dims), norm=norm)


@kernel("fft_r2c")
def fft_r2c(rt, x, *, dims, norm):
    return rt.cupy.fft.rfftn(x, axes=tuple(dims), norm=norm)


@kernel("fft_c2r")
def fft_c2r(rt, x, *, dims, norm, last_dim_size):
    sizes = tuple(x.shape[d] for d in dims[:-1]) + (last_dim_size,)
    return rt.cupy.fft.irfftn(x, s=sizes, axes=tuple(dims), norm=norm)
