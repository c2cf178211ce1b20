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


def test_eig_raises_a_device_error():
    with pytest.raises(DeviceError, match="linalg_eig"):
        munet.linalg.eig(munet.ones(3, 3, device="cuda:0"))


@pytest.mark.parametrize("name", ["cholesky", "qr", "svdvals"])
def test_gradients_match_the_cpu(name):
    kind = "spd" if name == "cholesky" else "general"
    values = matrices(kind, (2, 4, 4), "float64", 8)

    def fn(a):
        out = getattr(munet.linalg, name)(a)
        return munet.cat([t.reshape(-1) for t in out]) if name == "qr" else out

    cpu, cuda = gradient_pair(fn, values)
    _close(cuda, cpu, "float64")
