"""On a GPU (``cuda`` marker; ``scripts/gpu_check.sh`` runs these): the linalg primitives through
cuSOLVER and CuPy (``munet/backends/cuda/kernels_linalg.py``) against the cpu backend, batched and
non-contiguous, float32 and float64, with a gradient through a few. Factors that LAPACK leaves
free up to signs (QR, SVD, eigenvectors) are compared through what they reconstruct.
``test_cuda_linalg_emulated.py`` checks MuNet's side of the same kernels on the fake CuPy.
"""

import numpy as np
import pytest

import munet
from munet._device import DeviceError
from tests.backends.linalg_cases import close, gradient_pair, matrices, pair

pytestmark = pytest.mark.cuda

RTOL = {"float32": 1e-3, "float64": 1e-9}


def _pair(values: np.ndarray):
    return pair(values, "transposed")


def _close(got, want, dtype: str) -> None:
    close(got, want, RTOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_factorizations_match_the_cpu(dtype):
    A, Ac = _pair(matrices("spd", (2, 3, 5, 5), dtype, 1))
    L, info = munet.linalg.cholesky_ex(Ac)
    _close(L, munet.linalg.cholesky(A), dtype)
    assert info.cpu().tolist() == [[0] * 3] * 2
    G, Gc = _pair(matrices("general", (2, 3, 5, 5), dtype, 2))
    LU, pivots, info = munet.linalg.lu_factor_ex(Gc)
    want = munet.linalg.lu_factor_ex(G)
    assert munet.equal(pivots.cpu(), want.pivots) and not info.cpu().any()
    _close(LU, want.LU, dtype)
    P, L, U = munet.linalg.lu(Gc)
    _close(P @ L @ U, G, dtype)
    _close(munet.linalg.det(Gc), munet.linalg.det(G), dtype)
    _close(munet.linalg.matrix_exp(Gc / 5), munet.linalg.matrix_exp(G / 5), dtype)


@pytest.mark.parametrize("shape", [(2, 6, 4), (2, 4, 6)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_orthogonal_factorizations_reconstruct_the_input(shape, dtype):
    A, Ac = _pair(matrices("general", shape, dtype, 3))
    Q, R = munet.linalg.qr(Ac)
    _close(Q @ R, A, dtype)
    _close(R.abs(), munet.linalg.qr(A).R.abs(), dtype)
    U, S, Vh = munet.linalg.svd(Ac, full_matrices=False)
    _close(S, munet.linalg.svdvals(A), dtype)
    _close((U * S.unsqueeze(-2)) @ Vh, A, dtype)
    h, tau = munet.geqrf(Ac)
    _close(h.triu().abs()[..., : min(shape[1:]), :], munet.geqrf(A).a.triu().abs()[..., : min(shape[1:]), :], dtype)
    assert tau.shape == munet.geqrf(A).tau.shape
    S, Sc = _pair(matrices("symmetric", (3, 5, 5), dtype, 4))
    w, V = munet.linalg.eigh(Sc)
    _close(w, munet.linalg.eigvalsh(S), dtype)
    _close((V * w.unsqueeze(-2)) @ V.mT, S, dtype)


@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular_matches_the_cpu(left):
    A, Ac = _pair(matrices("triangular", (2, 1, 4, 4), "float64", 5))
    B, Bc = _pair(matrices("general", (3, 4, 4), "float64", 6))
    for upper in (False, True):
        kw = dict(upper=upper, left=left, unitriangular=False)
        _close(munet.linalg.solve_triangular(Ac, Bc, **kw), munet.linalg.solve_triangular(A, B, **kw), "float64")


def test_cholesky_info_and_device_placement():
    values = matrices("spd", (3, 4, 4), "float64", 7)
    values[1, 2, 2] = -50.0
    A = munet.tensor(values).to("cuda:0")
    assert munet.linalg.cholesky_ex(A).info.cpu().tolist() == [0, 3, 0]
    if munet.cuda.device_count() > 1:
        with munet.cuda.device(0):
            L = munet.linalg.cholesky_ex(A.to("cuda:1")).L
        assert L.device == munet.device("cuda:1")


def test_eig_where_cupy_has_it():
    import cupy

    A, Ac = _pair(matrices("general", (2, 5, 5), "float64", 12))
    if not hasattr(cupy.linalg, "eig"):
        with pytest.raises(DeviceError, match="linalg_eig: .*lacks cupy.linalg.eig"):
            munet.linalg.eig(Ac)
        return
    w, V = munet.linalg.eig(Ac)
    got, want = np.sort_complex(w.cpu().numpy()), np.sort_complex(munet.linalg.eigvals(A).numpy())
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    residual = A.to(munet.complex128).numpy() @ V.cpu().numpy() - V.cpu().numpy() * w.cpu().numpy()[..., None, :]
    assert np.abs(residual).max() < 1e-9


@pytest.mark.parametrize("name", ["cholesky", "qr", "svdvals"])
def test_gradients_match_the_cpu(name):
    kind = "spd" if name == "cholesky" else "general"
    values = matrices(kind, (2, 4, 4), "float64", 8)

    def fn(a):
        out = getattr(munet.linalg, name)(a)
        return munet.cat([t.reshape(-1) for t in out]) if name == "qr" else out

    cpu, cuda = gradient_pair(fn, values)
    _close(cuda, cpu, "float64")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fft_matches_the_cpu(dtype):
    x, xc = _pair(matrices("general", (3, 6, 8), dtype, 10))
    rtol = RTOL[dtype] * 10  # cuFFT and pocketfft round differently
    for fn in (
        lambda t: munet.fft.fft(t, norm="ortho"),
        lambda t: munet.fft.rfft2(t),
        lambda t: munet.fft.irfft(munet.fft.rfft(t, n=10), n=10, dim=-1),
        lambda t: munet.fft.ifftn(t.to(munet.complex128 if dtype == "float64" else munet.complex64), s=(4, 4)),
    ):
        got, want = fn(xc), fn(x)
        assert got.device.type == "cuda" and got.dtype is want.dtype
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=rtol, atol=rtol)


def test_complex_primitives_and_an_fft_gradient():
    values = matrices("general", (2, 8), "float64", 11)
    re, im = munet.tensor(values[0]), munet.tensor(values[1])
    z, zc = munet.complex(re, im), munet.complex(re.cuda(), im.cuda())
    for fn in (lambda t: t.conj(), lambda t: t.abs(), lambda t: t.angle(), lambda t: munet.view_as_real(t)):
        np.testing.assert_allclose(fn(zc).cpu().numpy(), fn(z).numpy(), rtol=1e-12, atol=1e-12)

    def spectrum(a):
        return munet.view_as_real(munet.fft.rfft(a))

    cpu, cuda = gradient_pair(spectrum, values)
    _close(cuda, cpu, "float64")


def test_complex_arithmetic_and_its_gradients():
    rng = np.random.default_rng(13)
    z = munet.complex(*(munet.tensor(rng.standard_normal((3, 4))) for _ in range(2)))
    w = munet.complex(*(munet.tensor(rng.standard_normal((3, 4))) for _ in range(2)))
    for fn in (
        lambda a, b: munet.exp(a) * b / (a + 3),
        lambda a, b: (a @ b.mT).sum(0),
        lambda a, b: munet.cumsum(a.flip(1), 1)[munet.tensor([2, 0], device=a.device)],
    ):
        got, want = fn(z.cuda(), w.cuda()), fn(z, w)
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-12, atol=1e-12)

    def irfft_of(a):
        return munet.fft.irfft(munet.complex(a[0], a[1]), n=10).abs()

    cpu, cuda = gradient_pair(irfft_of, rng.standard_normal((2, 6)))
    _close(cuda, cpu, "float64")
