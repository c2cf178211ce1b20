"""munet.linalg matrix_power, matrix_exp, multi_dot, cross, vecdot, vander, matmul, diagonal and
the torch-level cholesky, svd, qr, lu, lu_solve, cross vs PyTorch; forward and gradients."""

import math

import numpy as np
import pytest
import torch

import munet
from tests.ops.test_linalg_factor import DTYPES, _fix_signs, ref, solve_amplification, spd
from tests.reference import check, gradcheck, noncontiguous, randn

LA = munet.linalg


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, -1, -3])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (0, 2, 2)])
def test_matrix_power(dtype, n, shape):
    a = (randn(*shape, dtype="float64", seed=1) / 2 + np.eye(shape[-1])).astype(dtype)
    # A negative power multiplies |n| inverses; the gradient solves once more.
    kw = ref(dtype, solve_amplification(a, -n + 1) if n < 0 else 1.0)
    check(lambda x: LA.matrix_power(x, n), lambda x: torch.linalg.matrix_power(x, n), a, **kw)
    check(lambda x: x.matrix_power(n), lambda x: x.matrix_power(n), noncontiguous(a), **kw)


def test_matrix_power_integer_and_errors():
    a = np.arange(9).reshape(3, 3) % 4
    check(lambda x: LA.matrix_power(x, 3), lambda x: torch.linalg.matrix_power(x, 3), a)
    with pytest.raises(
        RuntimeError, match="linalg.matrix_power: A must be batches of square matrices, but they are 2 by 3"
    ):
        LA.matrix_power(munet.ones(2, 3), 2)
    with pytest.raises(RuntimeError, match="linalg.inv: .*singular"):
        LA.matrix_power(munet.zeros(3, 3), -1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [0.1, 1.0, 8.0])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1), (0, 3, 3)])
def test_matrix_exp(dtype, scale, shape):
    a = (randn(*shape, dtype="float64", seed=2) * scale).astype(dtype)
    check(LA.matrix_exp, torch.linalg.matrix_exp, a, **ref(dtype))
    check(munet.matrix_exp, torch.matrix_exp, noncontiguous(a), **ref(dtype))


def test_matrix_exp_gradcheck_and_errors():
    gradcheck(LA.matrix_exp, randn(3, 3, dtype="float64", seed=3) * 2)
    with pytest.raises(RuntimeError, match="linalg.matrix_exp: A must be batches of square matrices"):
        LA.matrix_exp(munet.ones(2, 3))
    with pytest.raises(
        RuntimeError, match="linalg.matrix_exp: Expected a floating point or complex tensor as input. Got int64"
    ):
        LA.matrix_exp(munet.ones(3, 3, dtype=munet.int64))


@pytest.mark.parametrize(
    "shapes",
    [
        [(3, 4), (4, 5)],
        [(4,), (4, 5), (5,)],
        [(10, 2), (2, 30), (30, 3), (3, 40)],
        [(5,), (5, 2), (2, 6)],
        [(3, 0), (0, 2)],
    ],
)
def test_multi_dot(shapes):
    arrays = [randn(*s, dtype="float64", seed=i) for i, s in enumerate(shapes)]
    check(lambda *t: LA.multi_dot(t), lambda *t: torch.linalg.multi_dot(t), *arrays)


def test_multi_dot_errors():
    with pytest.raises(RuntimeError, match=r"multi_dot\(\): expected at least 2 tensors but got 1"):
        LA.multi_dot([munet.ones(2, 2)])
    with pytest.raises(RuntimeError, match="tensor 1 must be 2D but got 1D"):
        LA.multi_dot([munet.ones(2, 2), munet.ones(2), munet.ones(2, 2)])
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        LA.multi_dot([munet.ones(2, 3), munet.ones(2, 2)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb,dim", [((4, 3), (4, 3), -1), ((2, 1, 3), (1, 4, 3), -1), ((3, 5), (3, 1), 0)])
def test_cross(dtype, sa, sb, dim):
    a, b = randn(*sa, dtype=dtype, seed=4), randn(*sb, dtype=dtype, seed=5)
    check(lambda x, y: LA.cross(x, y, dim=dim), lambda x, y: torch.linalg.cross(x, y, dim=dim), a, b)
    check(lambda x, y: munet.cross(x, y, dim), lambda x, y: torch.cross(x, y, dim), noncontiguous(a), b)
    check(lambda x, y: x.cross(y, dim=dim), lambda x, y: x.cross(y, dim=dim), a, b)


def test_cross_default_dim_and_errors():
    a, b = randn(3, 2, seed=6), randn(3, 2, seed=7)
    with pytest.warns(UserWarning, match="without specifying the dim arg is deprecated"):
        result = munet.cross(munet.tensor(a), munet.tensor(b))
    np.testing.assert_allclose(result.numpy(), torch.cross(torch.tensor(a), torch.tensor(b), dim=0).numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="linalg.cross: inputs dimension -1 must have length 3. Got 4 and 4"):
        LA.cross(munet.ones(2, 4), munet.ones(2, 4))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        LA.cross(munet.ones(2, 3), munet.ones(3))


@pytest.mark.parametrize(
    "sa,sb,dim", [((4, 3), (4, 3), -1), ((2, 1, 3), (4, 3), -1), ((3, 5), (3, 1), 0), ((0, 3), (0, 3), -1)]
)
def test_vecdot(sa, sb, dim):
    a, b = randn(*sa, dtype="float64", seed=8), randn(*sb, dtype="float64", seed=9)
    check(lambda x, y: LA.vecdot(x, y, dim=dim), lambda x, y: torch.linalg.vecdot(x, y, dim=dim), a, b)
    with pytest.raises(RuntimeError, match="linalg.vecdot: Expected x and y to have the same dtype"):
        LA.vecdot(munet.ones(3), munet.ones(3, dtype=munet.float64))


def test_vander_matmul_diagonal():
    x = randn(2, 4, dtype="float64", seed=10)
    check(LA.vander, torch.linalg.vander, x)
    check(lambda t: LA.vander(t, N=6), lambda t: torch.linalg.vander(t, N=6), x)
    check(LA.matmul, torch.linalg.matmul, randn(2, 3, 4, seed=11), randn(4, 2, seed=12))
    check(lambda t: LA.diagonal(t, offset=1), lambda t: torch.linalg.diagonal(t, offset=1), randn(2, 3, 4, seed=13))
    with pytest.raises(RuntimeError, match="N must be greater than 1"):
        LA.vander(munet.ones(3), N=1)


# torch-level spellings ------------------------------------------------------------------------------


def test_torch_cholesky_svd_qr():
    a = spd(2, 4, 4, seed=14)
    check(munet.cholesky, torch.cholesky, a)
    check(lambda x: x.cholesky(upper=True), lambda x: x.cholesky(upper=True), a)
    b = randn(2, 5, 3, dtype="float64", seed=15)

    def svd(mod, some):
        def f(x):
            u, s, v = mod.svd(x, some=some)
            u, vt = _fix_signs(mod, u[..., :3], v.mT)
            return u, s, vt

        return f

    for some in (True, False):
        check(svd(munet, some), svd(torch, some), b)
        check(lambda x: munet.qr(x, some=some), lambda x: torch.qr(x, some=some), b, grad=some)
    u, s, v = munet.svd(munet.tensor(b), compute_uv=False)
    t = torch.svd(torch.tensor(b), compute_uv=False)
    assert (tuple(u.shape), tuple(v.shape)) == (tuple(t.U.shape), tuple(t.V.shape)) and not u.numpy().any()
    np.testing.assert_allclose(s.numpy(), t.S.numpy(), rtol=1e-12)


def test_torch_lu_and_lu_solve():
    a, b = randn(2, 4, 4, dtype="float64", seed=16), randn(2, 4, 2, dtype="float64", seed=17)
    check(lambda x: munet.lu(x)[0], lambda x: torch.lu(x)[0], a)
    check(lambda x, y: munet.lu_solve(y, *munet.lu(x)), lambda x, y: torch.lu_solve(y, *torch.lu(x)), a, b)
    check(lambda x, y: y.lu_solve(*x.lu()), lambda x, y: y.lu_solve(*x.lu()), a, b)
    LU, piv, info = munet.lu(munet.ones(3, 3), get_infos=True)
    assert int(info) == 2
    with pytest.raises(RuntimeError, match=r"U\[2,2\] is zero"):
        munet.lu(munet.ones(3, 3))


def test_linalg_names_match_torch():
    """Every public torch.linalg function exists in munet.linalg."""
    from munet.ops import linalg_eig

    expected = {
        "norm", "vector_norm", "matrix_norm", "inv", "inv_ex", "solve", "solve_ex", "det", "slogdet", "svd",
        "svdvals", "eig", "eigvals", "eigh", "eigvalsh", "qr", "cholesky", "cholesky_ex", "lu", "lu_factor",
        "lu_factor_ex", "lu_solve", "pinv", "lstsq", "matrix_rank", "matrix_power", "matrix_exp", "multi_dot",
        "cross", "vecdot", "solve_triangular", "vander", "matmul", "diagonal",
    }  # fmt: skip
    assert expected <= set(munet.linalg.__all__)
    assert all(hasattr(torch.linalg, name) for name in expected)
    assert math.isclose(float(munet.linalg.det(munet.eye(3) * 2)), 8.0)
    assert LA.eig is linalg_eig.eig and LA.eigvals is linalg_eig.eigvals


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf])
def test_cond(p):
    a = randn(2, 4, 4, dtype="float64", seed=20)
    # PyTorch's own backward of cond through the inverse fails (it modifies a saved tensor), so
    # those orders are compared forward and checked by finite differences.
    through_svd = p in (None, 2, -2)
    check(lambda x: LA.cond(x, p), lambda x: torch.linalg.cond(x, p), a, grad=through_svd)
    gradcheck(lambda x: LA.cond(x, p), a[0])
    singular = np.ones((3, 3))  # LU meets an exact zero pivot on every CPU
    if p not in (None, 2, -2):
        assert float(LA.cond(munet.tensor(singular), p)) == math.inf
        # PyTorch's own answer depends on its LAPACK's kernels: inf, or beyond 1/eps where one
        # rounding left the last pivot nonzero.
        assert float(torch.linalg.cond(torch.tensor(singular), p)) >= 1 / np.finfo(np.float64).eps


def test_tensorinv_tensorsolve():
    a = randn(4, 6, 8, 3, dtype="float64", seed=21)
    check(lambda x: LA.tensorinv(x, ind=2), lambda x: torch.linalg.tensorinv(x, ind=2), a)
    b = randn(6, 4, dtype="float64", seed=22)
    c = randn(6, 4, 2, 3, 4, dtype="float64", seed=23)
    check(LA.tensorsolve, torch.linalg.tensorsolve, c, b)
    check(
        lambda x, y: LA.tensorsolve(x, y, dims=(0, 2)), lambda x, y: torch.linalg.tensorsolve(x, y, dims=(0, 2)),
        randn(6, 4, 8, 3, 4, dtype="float64", seed=24), randn(4, 3, 4, dtype="float64", seed=25),
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="linalg.tensorinv: Expected self to satisfy"):
        LA.tensorinv(munet.ones(2, 3), ind=1)


@pytest.mark.parametrize("shape,k", [((5, 3), 3), ((4, 4), 2), ((2, 6, 4), 4), ((0, 3, 2), 2)])
def test_householder_product(shape, k):
    a = randn(*shape, dtype="float64", seed=26)
    reflectors, tau = torch.geqrf(torch.tensor(a))
    r, t = reflectors.numpy(), np.ascontiguousarray(tau.numpy()[..., :k])
    check(LA.householder_product, torch.linalg.householder_product, r, t)
    check(munet.orgqr, torch.orgqr, noncontiguous(r), t)
    with pytest.raises(RuntimeError, match="must be greater than or equal to input.shape"):
        LA.householder_product(munet.ones(2, 3), munet.ones(2))
