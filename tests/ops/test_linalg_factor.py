"""munet.linalg factorizations vs torch.linalg: cholesky(_ex), lu_factor(_ex), lu, lu_unpack, qr,
svd, svdvals, eigh, eigvalsh, solve_triangular; forward and gradients on batched, non-contiguous
and size-0 inputs in float32 and float64, and errors (eig/eigvals: test_linalg_eig.py).

Eigenvector and singular-vector signs are LAPACK's choice and may differ between NumPy's and
PyTorch's LAPACK, so outputs are compared after fixing each column's sign (a gauge-invariant
function of the factors, whose gradient is well defined)."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import check, gradcheck, noncontiguous, randn

LA = munet.linalg


def spd(*shape, dtype="float64", seed=0):
    """Symmetric positive-definite, condition number about 10."""
    x = randn(*shape, dtype="float64", seed=seed)
    n = shape[-1]
    return (x @ np.swapaxes(x, -1, -2) / n + np.eye(n)).astype(dtype)


def well_conditioned(*shape, dtype="float64", seed=0):
    x = randn(*shape, dtype="float64", seed=seed)
    m, n = shape[-2:]
    return (x + 3 * np.eye(m, n)).astype(dtype)


def distinct_symmetric(*shape, dtype="float64", seed=0):
    """Symmetric with eigenvalues 1, 2, ..., n (well separated)."""
    n = shape[-1]
    q, _ = np.linalg.qr(randn(*shape, dtype="float64", seed=seed))
    return (q @ (np.arange(1, n + 1) * np.swapaxes(q, -1, -2))).astype(dtype)


def _fix_signs(mod, *factors):
    """Multiply each column of the first factor (and the matching row of a second, ``Vh``)
    by the sign of that column's largest-magnitude entry."""
    first = factors[0]
    idx = first.detach().abs().argmax(dim=-2, keepdim=True)
    sign = mod.sign(first.detach().gather(-2, idx))
    out = [first * sign]
    for f in factors[1:]:
        out.append(f * sign.transpose(-2, -1)[..., : f.shape[-2], :])
    return out


DTYPES = ["float32", "float64"]


def ref(dtype, condition: float = 1.0) -> dict:
    """float32 factorizations are compared against PyTorch's own float32 error (tests/reference.py);
    ``condition`` is the amplification of one input rounding for results that go through solves."""
    return dict(float64_reference=True, condition=condition) if dtype == "float32" else {}


def solve_amplification(a, solves: int) -> float:
    """``solves`` times the largest condition number among the matrices ``a`` (float64): how far one
    rounding of ``a`` can move a result that passes through that many solves with ``a``."""
    a = np.asarray(a, dtype=np.float64)
    return solves * float(np.linalg.cond(a).max()) if a.size else 1.0


# cholesky -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (0, 3, 3), (1, 1)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(dtype, shape, upper):
    a = spd(*shape, dtype=dtype, seed=1)
    kw = ref(dtype)
    check(lambda x: LA.cholesky(x, upper=upper), lambda x: torch.linalg.cholesky(x, upper=upper), a, **kw)
    check(
        lambda x: LA.cholesky_ex(x, upper=upper).L,
        lambda x: torch.linalg.cholesky_ex(x, upper=upper).L,
        noncontiguous(a),
        **kw,
    )


def test_cholesky_gradcheck():
    a = spd(3, 3, seed=2)
    gradcheck(lambda x: LA.cholesky(x @ x.mT), a)


def test_cholesky_not_positive_definite():
    a = spd(3, 4, 4, seed=3)
    a[1, 2, 2] = -10.0
    with pytest.raises(
        RuntimeError, match=r"linalg.cholesky: \(Batch element 1\): .*leading minor of order 3 is not positive-definite"
    ):
        LA.cholesky(munet.tensor(a))
    L, info = LA.cholesky_ex(munet.tensor(a))
    assert info.dtype is munet.int32
    np.testing.assert_array_equal(info.numpy(), torch.linalg.cholesky_ex(torch.tensor(a)).info.numpy())
    np.testing.assert_allclose(L.numpy()[0], np.linalg.cholesky(a[0]), rtol=1e-12)
    with pytest.raises(RuntimeError, match="A must be batches of square matrices, but they are 2 by 3"):
        LA.cholesky(munet.zeros(2, 3))
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got int64"):
        LA.cholesky(munet.ones(2, 2, dtype=munet.int64))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        LA.cholesky(munet.ones(2))


# solve_triangular -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_solve_triangular(dtype, upper, left, unitriangular):
    a = well_conditioned(2, 1, 4, 4, dtype=dtype, seed=4)
    b = randn(3, 4, 2, dtype=dtype, seed=5) if left else randn(3, 2, 4, dtype=dtype, seed=5)
    kw = dict(upper=upper, left=left, unitriangular=unitriangular)
    check(
        lambda x, y: LA.solve_triangular(x, y, **kw),
        lambda x, y: torch.linalg.solve_triangular(x, y, **kw),
        a,
        b,
        **ref(dtype),
    )
    check(
        lambda x, y: LA.solve_triangular(x, y, **kw),
        lambda x, y: torch.linalg.solve_triangular(x, y, **kw),
        noncontiguous(a[0, 0]),
        noncontiguous(b[0]),
        **ref(dtype),
    )


def test_solve_triangular_errors_and_empty():
    check(
        lambda x, y: LA.solve_triangular(x, y, upper=True),
        lambda x, y: torch.linalg.solve_triangular(x, y, upper=True),
        randn(0, 3, 3),
        randn(0, 3, 2),
    )
    with pytest.raises(RuntimeError, match="B must have 3 rows"):
        LA.solve_triangular(munet.eye(3), munet.ones(2, 2), upper=True)
    with pytest.raises(TypeError):
        LA.solve_triangular(munet.eye(3), munet.ones(3, 2))  # upper is required, as in PyTorch


# LU -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape", [(5, 5), (2, 3, 4, 4), (4, 6), (6, 4), (2, 0, 3, 3), (2, 100, 100), (70, 130), (130, 70)]
)
def test_lu_factor(dtype, shape):
    a = randn(*shape, dtype=dtype, seed=6)
    m_lu, t_lu = LA.lu_factor(munet.tensor(a)), torch.linalg.lu_factor(torch.tensor(a))
    np.testing.assert_array_equal(m_lu.pivots.numpy(), t_lu.pivots.numpy())
    kw = ref(dtype)
    check(lambda x: LA.lu_factor(x).LU, lambda x: torch.linalg.lu_factor(x).LU, a, **kw)
    check(lambda x: LA.lu(x), lambda x: torch.linalg.lu(x), noncontiguous(a), **kw)
    check(lambda x: LA.lu_factor_ex(x)[0], lambda x: torch.linalg.lu_factor_ex(x)[0], a, **kw)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
def test_lu_gradcheck(shape):
    gradcheck(lambda x: LA.lu_factor(x).LU, randn(*shape, dtype="float64", seed=7))


def test_lu_unpack_and_singular():
    a = randn(2, 4, 4, dtype="float64", seed=8)
    LU, piv = torch.linalg.lu_factor(torch.tensor(a))
    m = munet.lu_unpack(munet.tensor(LU.numpy()), munet.tensor(piv.numpy()))
    t = torch.lu_unpack(LU, piv)
    for x, y in zip(m, t):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-12)
    singular = np.ones((3, 3))
    with pytest.raises(RuntimeError, match=r"linalg.lu_factor: U\[2,2\] is zero"):
        LA.lu_factor(munet.tensor(singular))
    info = LA.lu_factor_ex(munet.tensor(singular)).info
    assert int(info) == int(torch.linalg.lu_factor_ex(torch.tensor(singular)).info) == 2


# QR -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (3, 5), (2, 3, 6, 4), (0, 4, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr(dtype, shape, mode):
    a = randn(*shape, dtype=dtype, seed=9)
    grad = not (mode == "complete" and shape[-2] > shape[-1])

    def run(mod, qr):
        def f(x):
            q, r = qr(x, mode=mode)
            q, rt = _fix_signs(mod, q, r)
            return q, rt

        return f

    check(run(munet, LA.qr), run(torch, torch.linalg.qr), a, grad=grad, **ref(dtype))
    check(run(munet, LA.qr), run(torch, torch.linalg.qr), noncontiguous(a), grad=grad, **ref(dtype))


def test_qr_mode_r_and_errors():
    a = randn(4, 3, dtype="float64", seed=10)
    q, r = LA.qr(munet.tensor(a), mode="r")
    assert tuple(q.shape) == (0,)
    np.testing.assert_allclose(
        np.abs(r.numpy()), np.abs(torch.linalg.qr(torch.tensor(a), mode="r").R.numpy()), rtol=1e-12
    )
    x = munet.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="mode='r'"):
        LA.qr(x, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="unrecognized mode"):
        LA.qr(x, mode="full")


def test_qr_gradcheck():
    for shape in [(4, 3), (3, 5)]:
        gradcheck(lambda x: sum(f.sum() for f in _fix_signs(munet, *LA.qr(x))), randn(*shape, dtype="float64", seed=11))


# SVD ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (3, 5), (2, 3, 4, 6), (0, 3, 2)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd(dtype, shape, full_matrices):
    a = randn(*shape, dtype=dtype, seed=12)

    def run(mod, svd):
        def f(x):
            u, s, vh = svd(x, full_matrices=full_matrices)
            k = s.shape[-1]
            u, vh = _fix_signs(mod, u[..., :k], vh[..., :k, :])
            return u, s, vh

        return f

    kw = ref(dtype)
    check(run(munet, LA.svd), run(torch, torch.linalg.svd), a, **kw)
    check(lambda x: LA.svdvals(x), lambda x: torch.linalg.svdvals(x), noncontiguous(a), **kw)
    shapes = [tuple(t.shape) for t in LA.svd(munet.tensor(a), full_matrices=full_matrices)]
    assert shapes == [tuple(t.shape) for t in torch.linalg.svd(torch.tensor(a), full_matrices=full_matrices)]


def test_svd_gradcheck():
    for shape in [(4, 3), (3, 5)]:
        gradcheck(
            lambda x: sum(f.sum() for f in _fix_signs(munet, *LA.svd(x, full_matrices=False)[::2])),
            randn(*shape, dtype="float64", seed=13),
        )


# eigh -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (0, 3, 3), (1, 1)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(dtype, shape, uplo):
    a = distinct_symmetric(*shape, dtype=dtype, seed=14)
    a = a + np.triu(randn(*shape, dtype=dtype, seed=15), 1) if uplo == "L" else a  # the unread triangle is noise

    def run(mod, eigh):
        def f(x):
            w, v = eigh(x, UPLO=uplo)
            return w, _fix_signs(mod, v)[0]

        return f

    kw = ref(dtype)
    check(run(munet, LA.eigh), run(torch, torch.linalg.eigh), a, **kw)
    check(lambda x: LA.eigvalsh(x, UPLO=uplo), lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), noncontiguous(a), **kw)


def test_non_finite_input_raises_as_pytorch():
    nan = munet.full((3, 3), float("nan"), dtype=munet.float64)
    with pytest.raises(
        RuntimeError,
        match="linalg.svd: The algorithm failed to converge because the input matrix contained non-finite values",
    ):
        LA.svdvals(nan)
    with pytest.raises(RuntimeError, match="linalg.eigh: The algorithm failed to converge"):
        LA.eigh(nan)
