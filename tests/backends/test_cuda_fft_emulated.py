"""The Fourier transform primitives on the fake cuda devices (``kernels_fft.py`` over the fake
``cupy.fft``): every ``munet.fft`` transform against the cpu (batched, non-contiguous, ``n``/``s``
padding and trimming, each norm, float32 and float64, real and complex input), the arguments
``cupy.fft`` is handed, the device results land on, and gradients through the transforms (their
complex products run on ``complex_formula.py``). Evidence about MuNet's side only."""

import numpy as np
import pytest

import munet
from tests.backends import fake_cupy
from tests.backends.linalg_cases import close, gradient_pair

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")

RTOL = {"float32": 1e-5, "float64": 1e-12, "complex64": 1e-5, "complex128": 1e-12}


def _signal(shape, dtype, seed=0):
    """A cpu tensor and a non-contiguous cuda view (the transposed copy, transposed back)."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        values = values + 1j * rng.standard_normal(shape)
    host = munet.tensor(np.ascontiguousarray(np.swapaxes(values.astype(dtype), -1, -2)))
    return host.mT, host.to("cuda:0").mT


TRANSFORMS = {
    "fft": lambda x, norm: munet.fft.fft(x, norm=norm),
    "ifft along dim 0, padded": lambda x, norm: munet.fft.ifft(x, n=7, dim=0, norm=norm),
    "fft2": lambda x, norm: munet.fft.fft2(x, norm=norm),
    "ifftn trimmed": lambda x, norm: munet.fft.ifftn(x, s=(3, 4), norm=norm),
    "rfft": lambda x, norm: munet.fft.rfft(x.real if x.is_complex() else x, norm=norm),
    "rfftn": lambda x, norm: munet.fft.rfftn(x.real if x.is_complex() else x, dim=(0, 2), norm=norm),
    "irfft": lambda x, norm: munet.fft.irfft(x, norm=norm),
    "irfft odd length": lambda x, norm: munet.fft.irfft(x, n=9, norm=norm),
    "irfft2": lambda x, norm: munet.fft.irfft2(x, s=(4, 6), norm=norm),
    "hfft": lambda x, norm: munet.fft.hfft(x, norm=norm),
    "ihfft": lambda x, norm: munet.fft.ihfft(x.real if x.is_complex() else x, norm=norm),
}


@pytest.mark.parametrize("norm", [None, "forward", "ortho"])
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_transform_matches_the_cpu(name, dtype, norm):
    x, xc = _signal((3, 5, 6), dtype, seed=len(name))
    got, want = TRANSFORMS[name](xc, norm), TRANSFORMS[name](x, norm)
    close(got, want, RTOL[want.dtype.name])


@pytest.mark.parametrize("dtype", ["float64", "complex64"])
def test_precision_follows_the_input(dtype):
    x, xc = _signal((2, 8), dtype, seed=1)
    for fn in (munet.fft.fft, munet.fft.ifft, munet.fft.hfft):
        close(fn(xc), fn(x), RTOL[fn(x).dtype.name])
    assert munet.fft.rfft(xc.real).dtype is munet.fft.rfft(x.real).dtype


def test_arguments_and_device():
    x = munet.tensor(np.random.default_rng(2).standard_normal((2, 3, 8)))
    with munet.cuda.device(0):
        spectrum = munet.fft.rfftn(x.to("cuda:1"), dim=(1, 2), norm="ortho")
        signal = munet.fft.irfftn(spectrum, s=(3, 8), dim=(1, 2), norm="ortho")
    assert spectrum.device == signal.device == munet.device("cuda:1")
    close(signal, x, 1e-12)
    calls = [c for c in fake_cupy.FFT_CALLS]
    assert [c[0] for c in calls] == ["rfftn", "irfftn"]
    assert calls[0][3:] == ((1, 2), None, "ortho", 1)
    assert calls[1][3:] == ((1, 2), (3, 8), "ortho", 1)


GRADIENT_CASES = {
    "fft": lambda x: munet.view_as_real(munet.fft.fft(x, norm="ortho")),
    "rfft": lambda x: munet.view_as_real(munet.fft.rfft(x)),
    "ifft2 of a complex signal": lambda x: munet.view_as_real(munet.fft.ifft2(munet.complex(x, x.flip(0)))),
    "irfft": lambda x: munet.fft.irfft(munet.complex(x, x.flip(1)), n=14, norm="forward"),
    "hfft": lambda x: munet.fft.hfft(munet.complex(x, 2 * x)),
    "rfft magnitudes": lambda x: munet.fft.rfft(x).abs(),
}


@pytest.mark.parametrize("name", list(GRADIENT_CASES))
def test_gradients_match_the_cpu(name):
    values = np.random.default_rng(3).standard_normal((2, 8))
    cpu, cuda = gradient_pair(GRADIENT_CASES[name], values)
    close(cuda, cpu, 1e-12)
