"""Solves, inverses, determinants and least squares: composites of the LU, Cholesky, SVD and eigh
factorizations and the triangular solve (``munet/ops/linalg_factor.py``), so their gradients
come from those ops' rules.

``solve`` and ``inv`` raise for singular matrices as PyTorch does, by reading LU's ``info`` on
the host (skipped while ``munet.compile`` traces; ``solve_ex``/``inv_ex`` never read it). ``det`` is
a primitive whose gradient (the cofactor matrix) stays finite at singular matrices; that of
``slogdet``/``logdet`` goes through LU (it is infinite there, as the log's is).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from munet import _dtype as D
from munet.ops._autocast import float32_region_under_autocast
from munet.ops._registry import Meta, apply, define
from munet.ops.creation import arange, eye, full, ones, zeros, zeros_like
from munet.ops.elementwise import clamp_min, where
from munet.ops.linalg import matmul
from munet.ops.linalg_factor import (
    check_matrix,
    eigh_op,
    lu_factor_ex_op,
    lu_permutation,
    outs,
    permutation_matrix,
    raise_for_info,
    solve_triangular,
    svd_op,
    unpack_lu,
)
from munet.ops.movement import cat, diagonal
from munet.ops.reduce import amax, prod
from munet.ops.reduce import sum as sum_

__all__ = [
    "inverse", "det", "logdet", "slogdet", "pinverse", "cholesky_solve", "cholesky_inverse",
    "triangular_solve",
]  # fmt: skip
__linalg__ = [
    "lu_solve", "solve", "solve_ex", "inv", "inv_ex", "det", "slogdet", "pinv", "matrix_rank", "lstsq",
]  # fmt: skip
__tensor_methods__ = [
    "inverse", "det", "logdet", "slogdet", "pinverse", "cholesky_solve", "cholesky_inverse",
    "triangular_solve",
]  # fmt: skip

SolveEx = namedtuple("linalg_solve_ex", "result info")
InvEx = namedtuple("linalg_inv_ex", "inverse info")
Slogdet = namedtuple("linalg_slogdet", "sign logabsdet")
Lstsq = namedtuple("linalg_lstsq", "solution residuals rank singular_values")
TriangularSolve = namedtuple("triangular_solve", "solution cloned_coefficient")


def _mT(x):
    return x.transpose(-2, -1)


# LU solves ------------------------------------------------------------------------------------------


@float32_region_under_autocast
def lu_solve(LU, pivots, B, *, left: bool = True, adjoint: bool = False, out=None):
    """Solve ``A X = B`` from ``(LU, pivots) = lu_factor(A)``; ``adjoint`` solves with ``A^T``,
    ``left=False`` solves ``X A = B``. Batch dims broadcast."""
    check_matrix("linalg.lu_solve", LU, role="LU", square=True)
    check_matrix("linalg.lu_solve", B, role="B")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(
            f"linalg.lu_solve: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
            f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})"
        )
    L, U = unpack_lu(LU)
    P = permutation_matrix(lu_permutation(pivots, n), LU.dtype)
    # A = P L U, A^T = U^T L^T P^T.
    if left and not adjoint:
        x = solve_triangular(L, matmul(_mT(P), B), upper=False, unitriangular=True)
        x = solve_triangular(U, x, upper=True)
    elif left:
        x = solve_triangular(_mT(U), B, upper=False)
        x = matmul(P, solve_triangular(_mT(L), x, upper=True, unitriangular=True))
    elif not adjoint:
        x = solve_triangular(U, B, upper=True, left=False)
        x = matmul(solve_triangular(L, x, upper=False, left=False, unitriangular=True), _mT(P))
    else:
        x = solve_triangular(_mT(L), matmul(B, P), upper=True, left=False, unitriangular=True)
        x = solve_triangular(_mT(U), x, upper=False, left=False)
    return outs(x, out)


def _is_vector_rhs(A, B) -> bool:
    """PyTorch's rule: B is a (batch of) vector(s) when 1-D or of shape ``A.shape[:-1]``."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _singular_solve(_index) -> str:
    return "The solver failed because the input matrix is singular."


@float32_region_under_autocast
def solve_ex(A, B, *, left: bool = True, check_errors: bool = False, out=None):
    """``(result, info)``: :func:`solve` with the LU ``info`` returned instead of raised."""
    check_matrix("linalg.solve", A, square=True)
    LU, pivots, info = apply(lu_factor_ex_op, A)
    if check_errors:
        raise_for_info("linalg.solve_ex", info, _singular_solve)
    vector = _is_vector_rhs(A, B)
    x = lu_solve(LU, pivots, B.unsqueeze(-1) if vector else B, left=left)
    return outs(SolveEx(x.squeeze(-1) if vector else x, info), out)


@float32_region_under_autocast
def solve(A, B, *, left: bool = True, out=None):
    """Solve ``A X = B`` (``X A = B`` when ``left=False``) for square ``A`` through LU with partial
    pivoting; B is (*, n, k) or a vector (*, n). Batch dims broadcast; singular A raises."""
    result, info = solve_ex(A, B, left=left)
    raise_for_info("linalg.solve", info, _singular_solve)
    return outs(result, out)


def _singular_inverse(index: int) -> str:
    return f"The diagonal element {index} is zero, the inversion could not be completed because the input matrix is singular."


@float32_region_under_autocast
def inv_ex(A, *, check_errors: bool = False, out=None):
    """``(inverse, info)``: the inverse through LU, with LU's ``info`` (0, or the first zero pivot)."""
    check_matrix("linalg.inv", A, square=True)
    LU, pivots, info = apply(lu_factor_ex_op, A)
    if check_errors:
        raise_for_info("linalg.inv_ex", info, _singular_inverse)
    n = A.shape[-1]
    return outs(InvEx(lu_solve(LU, pivots, eye(n, dtype=A.dtype, device=A.device)), info), out)


@float32_region_under_autocast
def inv(A, *, out=None):
    """The inverse of square ``A`` (batched); raises for a singular matrix as PyTorch does."""
    result, info = inv_ex(A)
    raise_for_info("linalg.inv", info, _singular_inverse)
    return outs(result, out)


@float32_region_under_autocast
def inverse(input, *, out=None):
    """``torch.inverse``: :func:`munet.linalg.inv`."""
    return inv(input, out=out)


# determinants ---------------------------------------------------------------------------------------


def _lu_det_parts(op: str, A):
    """``(permutation sign, U's diagonal)`` of A's LU: ``det A = sign * prod(diag)``."""
    check_matrix(op, A, square=True)
    LU, pivots, _ = apply(lu_factor_ex_op, A)
    swaps = sum_(pivots != arange(1, A.shape[-1] + 1, dtype=D.int32, device=A.device), -1)
    sign = 1 - 2 * (swaps % 2).to(A.dtype)
    return sign, diagonal(LU, 0, -2, -1)


def _det_meta(A):
    check_matrix("linalg.det", A, square=True)
    return Meta(tuple(A.shape[:-2]), A.dtype)


def _exclusive_products(S):
    """``c[..., i] = prod_{j != i} S[..., j]`` without dividing (exact where some S are 0)."""
    one = ones(tuple(S.shape[:-1]) + (1,), dtype=S.dtype, device=S.device)
    before = cat([one, S[..., :-1]], -1).cumprod(-1)
    after = cat([S[..., 1:], one], -1).flip(-1).cumprod(-1).flip(-1)
    return before * after


def _det_backward(ctx, g):
    """``g * det * A^-T`` (the cofactor matrix) through a solve; where ``det`` is exactly 0 the
    cofactors come from the SVD instead: ``det(U) det(Vh) U diag(prod_{j != i} s_j) Vh``."""
    A, d = ctx.saved_tensor("A"), ctx.saved_tensor("result")
    n = A.shape[-1]
    if n == 0:
        return zeros_like(A)
    scale = (g * d).unsqueeze(-1).unsqueeze(-1)
    invertible = solve_ex(A.mT, scale * eye(n, dtype=A.dtype, device=A.device)).result
    U, S, Vh = apply(svd_op, A, full_matrices=False)
    alpha = g * det(U) * det(Vh)
    cofactors = matmul(U * (_exclusive_products(S) * alpha.unsqueeze(-1)).unsqueeze(-2), Vh)
    return where((d == 0).unsqueeze(-1).unsqueeze(-1), cofactors, invertible)


det_op = define(
    "linalg_det",
    inputs=("A",),
    meta=_det_meta,
    backward=_det_backward,
    saves=("A", "result"),
    backward_name="LinalgDetBackward0",
)


@float32_region_under_autocast
def det(A, *, out=None):
    """The determinant of square ``A`` (1 for a 0 x 0 matrix). Its gradient is the cofactor matrix,
    finite also where ``A`` is singular."""
    return outs(apply(det_op, A), out)


@float32_region_under_autocast
def slogdet(A, *, out=None):
    """``(sign, logabsdet)`` with ``det A = sign * exp(logabsdet)``; sign 0 and logabsdet -inf for a
    singular matrix."""
    sign, diag = _lu_det_parts("linalg.slogdet", A)
    return outs(Slogdet(sign * prod(diag.sign(), -1), sum_(diag.abs().log(), -1)), out)


@float32_region_under_autocast
def logdet(input):
    """``log(det A)``: nan where the determinant is negative, -inf where it is zero."""
    sign, logabs = slogdet(input)
    return where(sign < 0, full((), math.nan, dtype=logabs.dtype, device=logabs.device), logabs)


# Cholesky solves ------------------------------------------------------------------------------------


@float32_region_under_autocast
def cholesky_solve(B, L, upper: bool = False, *, out=None):
    """Solve ``A X = B`` given the Cholesky factor of ``A``: ``A = L L^T`` (``U^T U`` when ``upper``)."""
    check_matrix("cholesky_solve", B, role="B")
    check_matrix("cholesky_solve", L, role="L", square=True)
    if upper:
        x = solve_triangular(L, solve_triangular(_mT(L), B, upper=False), upper=True)
    else:
        x = solve_triangular(_mT(L), solve_triangular(L, B, upper=False), upper=True)
    return outs(x, out)


@float32_region_under_autocast
def cholesky_inverse(L, upper: bool = False, *, out=None):
    """The inverse of ``A`` from its Cholesky factor (``A = L L^T``, or ``U^T U`` when ``upper``)."""
    check_matrix("cholesky_inverse", L, role="L", square=True)
    return outs(cholesky_solve(eye(L.shape[-1], dtype=L.dtype, device=L.device), L, upper), out)


@float32_region_under_autocast
def triangular_solve(b, A, upper: bool = True, transpose: bool = False, unitriangular: bool = False, *, out=None):
    """``torch.triangular_solve``: ``(X, A.clone())`` with ``A X = b`` (``A^T X = b`` when ``transpose``)."""
    coefficient = _mT(A) if transpose else A
    x = solve_triangular(coefficient, b, upper=bool(upper) != bool(transpose), unitriangular=unitriangular)
    return outs(TriangularSolve(x, A.clone()), out)


# pseudo-inverse, rank, least squares ----------------------------------------------------------------


def _rtol(A, atol, rtol):
    """PyTorch's default: ``eps * max(m, n)`` unless ``atol`` is given (positive), then 0."""
    if rtol is not None:
        return rtol
    atol_given = atol is not None and (not isinstance(atol, (int, float)) or atol > 0)
    return 0.0 if atol_given else _eps(A) * max(A.shape[-2:])


def _eps(A) -> float:
    return float(np.finfo(A.dtype.np).eps)


def _kept(values, largest, A, atol, rtol):
    """Mask of the singular values (or |eigenvalues|) above ``max(atol, rtol * largest)``."""
    tol = _rtol(A, atol, rtol) * largest
    if atol is not None:
        tol = clamp_min(tol, atol)
    return values > tol.unsqueeze(-1)


def _largest(values):
    if values.shape[-1] == 0:
        return zeros(values.shape[:-1], dtype=values.dtype, device=values.device)
    return amax(values, -1)


def _reciprocal_where(keep, values):
    """``1 / values`` where ``keep``, else 0; the discarded entries get no (nan) gradient."""
    ones = full((), 1.0, dtype=values.dtype, device=values.device)
    return where(keep, 1 / where(keep, values, ones), ones * 0)


def pinv(A, *, atol=None, rtol=None, hermitian: bool = False, out=None):
    """The Moore-Penrose pseudo-inverse through the SVD (through eigh when ``hermitian``),
    dropping singular values at or below ``max(atol, rtol * largest)``."""
    check_matrix("linalg.pinv", A)
    if hermitian:
        values, vectors = apply(eigh_op, A, UPLO="L")
        keep = _kept(values.abs(), _largest(values.abs()), A, atol, rtol)
        result = matmul(vectors * _reciprocal_where(keep, values).unsqueeze(-2), _mT(vectors))
    else:
        U, S, Vh = apply(svd_op, A, full_matrices=False)
        keep = _kept(S, _largest(S), A, atol, rtol)
        result = matmul(_mT(Vh) * _reciprocal_where(keep, S).unsqueeze(-2), _mT(U))
    return outs(result, out)


def pinverse(input, rcond: float = 1e-15):
    """``torch.pinverse``: :func:`munet.linalg.pinv` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond)


@float32_region_under_autocast
def matrix_rank(A, *, atol=None, rtol=None, hermitian: bool = False, out=None):
    """The number of singular values (|eigenvalues| when ``hermitian``) above
    ``max(atol, rtol * largest)``, int64."""
    check_matrix("linalg.matrix_rank", A)
    if hermitian:
        values = apply(eigh_op, A.detach(), UPLO="L")[0].abs()
    else:
        values = apply(svd_op, A.detach(), full_matrices=False)[1]
    return outs(sum_(_kept(values, _largest(values), A, atol, rtol), -1), out)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@float32_region_under_autocast
def lstsq(A, B, rcond=None, *, driver=None):
    """``(solution, residuals, rank, singular_values)`` of ``min ||A X - B||``: the minimum-norm
    solution ``pinv(A, rtol=rcond) @ B`` (rcond defaults to ``eps * max(m, n)``). As PyTorch on
    the CPU (default driver 'gelsy'): ``residuals`` (squared, per column) only when m > n, A has
    full rank and the driver is not 'gelsy'; ``rank`` for every driver but 'gels';
    ``singular_values`` for 'gelsd' and 'gelss'. The others are empty."""
    check_matrix("linalg.lstsq", A)
    driver = "gelsy" if driver is None else driver
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of {_LSTSQ_DRIVERS}, got {driver!r}")
    vector = B.ndim == A.ndim - 1
    rhs = B.unsqueeze(-1) if vector else B
    check_matrix("linalg.lstsq", rhs, role="B")
    if A.dtype is not B.dtype:
        raise RuntimeError(
            f"torch.linalg.lstsq: Expected A and B to have the same dtype, got {A.dtype.name} and {B.dtype.name}"
        )
    if rhs.shape[-2] != A.shape[-2]:
        raise RuntimeError(
            f"torch.linalg.lstsq: input.size(-2) should match other.size(-2), got {A.shape[-2]} and {rhs.shape[-2]}"
        )
    m, n = A.shape[-2:]
    rtol = _eps(A) * max(m, n) if rcond is None or rcond < 0 else rcond
    U, S, Vh = apply(svd_op, A, full_matrices=False)
    keep = _kept(S, _largest(S), A, None, rtol)
    solution = matmul(matmul(_mT(Vh) * _reciprocal_where(keep, S).unsqueeze(-2), _mT(U)), rhs)
    empty = A.flatten()[:0]  # PyTorch's empty results are part of the graph too
    rank = sum_(keep, -1) if driver != "gels" else zeros((0,), dtype=D.int64, device=A.device)
    residuals = empty
    if m > n and driver != "gelsy" and bool((sum_(keep, -1) == n).all()):
        residuals = sum_((matmul(A, solution) - rhs) ** 2, -2)
    singular_values = S if driver in ("gelsd", "gelss") else empty
    return Lstsq(solution.squeeze(-1) if vector else solution, residuals, rank, singular_values)
