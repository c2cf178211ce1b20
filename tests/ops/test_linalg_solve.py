"""munet.linalg solves vs torch.linalg: solve(_ex), lu_solve, inv(_ex), det, slogdet, pinv,
matrix_rank, lstsq, and the torch-level inverse, logdet, pinverse, cholesky_solve,
cholesky_inverse, triangular_solve; forward and gradients, broadcasting, size-0 batches, errors."""

import numpy as np
import pytest
import torch

import munet
from tests.ops.test_linalg_factor import DTYPES, ref, solve_amplification, spd, well_conditioned
from tests.reference import check, gradcheck, noncontiguous, randn

LA = munet.linalg


SOLVE_SHAPES = [((4, 4), (4, 2)), ((2, 1, 3, 3), (4, 3, 2)), ((0, 3, 3), (0, 3, 1))]
VECTOR_SHAPES = [((4, 4), (4,)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3))]  # B is a (batch of) vector(s)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "sa,sb,left", [(a, b, True) for a, b in SOLVE_SHAPES + VECTOR_SHAPES] + [(a, b, False) for a, b in SOLVE_SHAPES]
)
def test_solve(dtype, sa, sb, left):
    a = randn(*sa, dtype=dtype, seed=1)  # general (pivoting) matrices
    b = randn(*sb, dtype=dtype, seed=2)
    if not left:
        b = np.swapaxes(b, -1, -2).copy()
    kw = ref(dtype, solve_amplification(a, 2))  # A's gradient, -A^-T g X^T, takes a second solve
    check(lambda x, y: LA.solve(x, y, left=left), lambda x, y: torch.linalg.solve(x, y, left=left), a, b, **kw)
    check(
        lambda x, y: LA.solve_ex(x, y, left=left)[0],
        lambda x, y: torch.linalg.solve_ex(x, y, left=left)[0],
        noncontiguous(a),
        noncontiguous(b),
        **kw,
    )


def test_solve_gradcheck_and_singular():
    gradcheck(lambda a, b: LA.solve(a, b), randn(3, 3, dtype="float64", seed=3), randn(3, 2, dtype="float64", seed=4))
    with pytest.raises(RuntimeError, match=r"^linalg.solve: The solver failed because the input matrix is singular"):
        LA.solve(munet.ones(3, 3), munet.ones(3))
    with pytest.raises(RuntimeError, match=r"\(Batch element 1\): The solver failed"):
        LA.solve(munet.stack([munet.eye(3), munet.ones(3, 3)]), munet.ones(3))
    assert LA.solve_ex(munet.ones(3, 3), munet.ones(3)).info.item() == 2
    with pytest.raises(RuntimeError, match="must be batches of square matrices"):
        LA.solve(munet.ones(2, 3), munet.ones(2))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(dtype, left, adjoint):
    a = randn(2, 4, 4, dtype=dtype, seed=5)
    b = randn(2, 4, 3, dtype=dtype, seed=6) if left else randn(2, 3, 4, dtype=dtype, seed=6)
    kw = dict(left=left, adjoint=adjoint)

    def run(linalg):
        def f(x, y):
            lu, piv = linalg.lu_factor(x)
            return linalg.lu_solve(lu, piv, y, **kw)

        return f

    check(run(LA), run(torch.linalg), a, b, **ref(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (0, 2, 2), (1, 1), (3, 0, 0)])
def test_inv_det_slogdet(dtype, shape):
    a = randn(*shape, dtype=dtype, seed=7)
    kw = ref(dtype)
    check(LA.inv, torch.linalg.inv, a, **kw)
    check(lambda x: LA.inv_ex(x).inverse, lambda x: torch.linalg.inv_ex(x).inverse, noncontiguous(a), **kw)
    check(LA.det, torch.linalg.det, a, **kw)
    check(LA.slogdet, torch.linalg.slogdet, noncontiguous(a), **kw)
    check(munet.inverse, torch.inverse, a, **kw)
    check(munet.det, torch.det, a, **kw)
    check(lambda x: x.slogdet(), lambda x: x.slogdet(), a, **kw)
    spd_a = spd(*shape, dtype=dtype, seed=8)
    check(munet.logdet, torch.logdet, spd_a, **kw)
    check(lambda x: x.logdet(), lambda x: x.logdet(), a, grad=False, rtol=1e-4)  # negative determinants: nan


def test_inv_det_gradcheck_and_singular():
    a = randn(3, 3, dtype="float64", seed=9)
    gradcheck(LA.inv, a)
    gradcheck(LA.det, a)
    gradcheck(lambda x: LA.slogdet(x).logabsdet, a)
    with pytest.raises(RuntimeError, match=r"^linalg.inv: The diagonal element 2 is zero"):
        LA.inv(munet.ones(3, 3))
    singular = munet.ones(2, 2, 2)
    assert np.all(LA.det(singular).numpy() == 0)
    # At a singular matrix the gradient of det is still the cofactor matrix (PyTorch returns zeros here).
    rank2 = munet.tensor(
        [[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], [[2.0, 0, 0], [0, 3.0, 0], [0, 0, 0]]],
        dtype=munet.float64,
        requires_grad=True,
    )
    LA.det(rank2).sum().backward()
    cofactors = [[[4, 4, -4], [-2, -2, 2], [0, 0, 0]], [[0, 0, 0], [0, 0, 0], [0, 0, 6]]]
    np.testing.assert_allclose(rank2.grad.numpy(), cofactors, atol=1e-12)
    sign, logabs = LA.slogdet(singular)
    assert np.all(sign.numpy() == 0) and np.all(logabs.numpy() == -np.inf)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse(dtype, upper):
    a = spd(2, 4, 4, dtype=dtype, seed=10)
    b = randn(2, 4, 3, dtype=dtype, seed=11)
    check(
        lambda x, y: munet.cholesky_solve(y, LA.cholesky(x, upper=upper), upper),
        lambda x, y: torch.cholesky_solve(y, torch.linalg.cholesky(x, upper=upper), upper),
        a, b, **ref(dtype),
    )  # fmt: skip
    check(
        lambda x: LA.cholesky(x, upper=upper).cholesky_inverse(upper),
        lambda x: torch.linalg.cholesky(x, upper=upper).cholesky_inverse(upper),
        a, **ref(dtype),
    )  # fmt: skip


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("transpose", [False, True])
def test_triangular_solve(upper, transpose):
    a = well_conditioned(2, 4, 4, seed=12)
    b = randn(2, 4, 3, dtype="float64", seed=13)
    check(
        lambda y, x: munet.triangular_solve(y, x, upper, transpose),
        lambda y, x: torch.triangular_solve(y, x, upper, transpose),
        b, a,
    )  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 3, 4, 2), (0, 3, 2)])
@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv(dtype, shape, hermitian):
    if hermitian:
        shape = shape[:-1] + (shape[-2],)
        x = randn(*shape, dtype="float64", seed=14)
        a = (x + np.swapaxes(x, -1, -2)).astype(dtype)
    else:
        a = randn(*shape, dtype=dtype, seed=14)
    # With hermitian=True the gradient is the one along symmetric directions (docs/decisions.md);
    # PyTorch's is that of the general pseudo-inverse. Both agree on symmetric A's value.
    grad = not hermitian
    check(
        lambda x: LA.pinv(x, hermitian=hermitian),
        lambda x: torch.linalg.pinv(x, hermitian=hermitian),
        a,
        grad=grad,
        **ref(dtype),
    )
    check(munet.pinverse, torch.pinverse, noncontiguous(a), **ref(dtype))


def test_pinv_rank_deficient_and_tolerances():
    a = randn(4, 2, dtype="float64", seed=15) @ randn(2, 5, dtype="float64", seed=16)  # rank 2
    check(LA.pinv, torch.linalg.pinv, a, grad=False)
    for kw in [dict(atol=0.5), dict(rtol=0.3), dict(atol=0.1, rtol=0.2)]:
        check(
            lambda x: LA.pinv(x, **kw),
            lambda x: torch.linalg.pinv(x, **kw),
            randn(3, 4, 4, dtype="float64", seed=17),
            grad=False,
        )
        check(
            lambda x: LA.matrix_rank(x, **kw),
            lambda x: torch.linalg.matrix_rank(x, **kw),
            randn(3, 4, 4, dtype="float64", seed=17),
        )
    gradcheck(LA.pinv, randn(4, 3, dtype="float64", seed=18))


@pytest.mark.parametrize("hermitian", [False, True])
def test_matrix_rank(hermitian):
    x = randn(3, 5, 2, dtype="float64", seed=19)
    a = x @ np.swapaxes(x, -1, -2)  # 5 x 5 of rank 2
    a[1] = np.eye(5)
    for arr in (a, a.astype(np.float32), np.zeros((0, 3, 3))):
        check(
            lambda t: LA.matrix_rank(t, hermitian=hermitian),
            lambda t: torch.linalg.matrix_rank(t, hermitian=hermitian),
            arr,
        )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", [None, "gels", "gelsd", "gelss"])
@pytest.mark.parametrize("sa,sb", [((6, 3), (6, 2)), ((3, 5), (3, 2)), ((2, 5, 4), (2, 5, 1)), ((6, 3), (6,))])
def test_lstsq(dtype, driver, sa, sb):
    if driver == "gels" and sa[-2] < sa[-1]:
        pytest.skip("gels solves a wide system differently (it is for full-rank tall A)")
    a, b = randn(*sa, dtype=dtype, seed=20), randn(*sb, dtype=dtype, seed=21)
    fm = lambda x, y: tuple(LA.lstsq(x, y, driver=driver))  # noqa: E731
    ft = lambda x, y: tuple(torch.linalg.lstsq(x, y, driver=driver))  # noqa: E731
    check(fm, ft, a, b, **ref(dtype))


def test_lstsq_errors():
    with pytest.raises(RuntimeError, match="driver"):
        LA.lstsq(munet.ones(3, 2), munet.ones(3, 1), driver="gelsx")
    with pytest.raises(RuntimeError, match="should match"):
        LA.lstsq(munet.ones(3, 2), munet.ones(4, 1))
