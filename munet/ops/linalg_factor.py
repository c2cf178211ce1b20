"""Matrix factorizations and the triangular solve: the primitives of ``munet.linalg``.

Each op here has a CPU kernel (NumPy's LAPACK where NumPy has the routine, a batched
column loop where it has not: LU and triangular substitution) and a gradient rule written
with public ops, derived from the factorization's differential:

- ``solve_triangular``: ``X = A^-1 B`` gives ``gB = A^-T gX`` and ``gA = -gB X^T`` kept on A's triangle.
- ``cholesky``: ``gA = sym(L^-T Phi(L^T gL) L^-1)``, ``Phi`` the lower triangle with a halved diagonal.
- ``lu_factor``: ``gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T`` for square A; a wide or tall
  A is the square case of its leading block plus the solve that gives the rest.
- ``qr``: ``gA = (gQ + Q copyltu(M)) R^-T`` with ``M = R gR^T - gQ^T Q`` (A with at least as many rows
  as columns); a wide A is its leading square block plus ``Q^T`` of the rest.
- ``svd`` and ``eigh``: the eigenvector terms divide by ``s_j^2 - s_i^2`` (``l_j - l_i``), so the
  gradient is finite only for distinct singular values (eigenvalues), as in PyTorch.

Inputs and results are real (float32, float64); the eigendecomposition of a general matrix, whose
results are complex, is ``linalg_eig.py``. The cuda backend runs these ops through cuSOLVER (CuPy); on
vulkan they raise ``DeviceError`` naming the op and the device (docs/linalg.md).
"""

from __future__ import annotations

from collections import namedtuple

from munet import _dtype as D
from munet.ops._autocast import float32_region_under_autocast
from munet.ops._registry import Meta, apply, define
from munet.ops._utils import broadcast_shapes, reduce_grad
from munet.ops.checks import LinAlgError, check_values
from munet.ops.creation import eye, zeros
from munet.ops.linalg import matmul
from munet.ops.movement import cat, diag_embed, diagonal, tril, triu

__linalg__ = [
    "solve_triangular", "cholesky", "cholesky_ex", "lu_factor", "lu_factor_ex", "lu", "qr", "svd", "svdvals",
    "eigh", "eigvalsh", "LinAlgError",
]  # fmt: skip
__all__ = ["lu_unpack"]


def check_matrix(op: str, A, role: str = "A", square: bool = False) -> None:
    """PyTorch's checks of a linalg input: rank >= 2, float32/float64, square when asked."""
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {role} must have at least 2 dimensions.")
    if A.dtype not in (D.float32, D.float64):
        if A.dtype.is_complex:
            raise RuntimeError(
                f"{op}: {A.dtype.name} input is not supported (in munet.linalg only eig and eigvals take "
                "complex matrices)"
            )
        if A.dtype in (D.float16, D.bfloat16):
            raise RuntimeError(f"{op}: Low precision dtypes not supported. Got {A.dtype.name}")
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {A.dtype.name}")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            f"{op}: {role} must be batches of square matrices, but they are {A.shape[-2]} by {A.shape[-1]} matrices"
        )


def _mT(x):
    return x.transpose(-2, -1)


def _zeros_if_none(g, like):
    return zeros(like.shape, dtype=like.dtype, device=like.device) if g is None else g


# triangular solve -----------------------------------------------------------------------------------


def _solve_triangular_meta(A, B, *, upper, left, unitriangular):
    op = "linalg.solve_triangular"
    check_matrix(op, A, square=True)
    check_matrix(op, B, role="B")
    if A.dtype is not B.dtype:
        raise RuntimeError(
            f"{op}: Expected A and B to have the same dtype, but found A of type {A.dtype.name} "
            f"and B of type {B.dtype.name} instead"
        )
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        side = "rows" if left else "columns"
        raise RuntimeError(
            f"{op}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
            f"({A.shape[-2]}x{n} and {B.shape[-2]}x{B.shape[-1]}): B must have {n} {side}"
        )
    batch = broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]), op=op)
    return Meta(batch + tuple(B.shape[-2:]), A.dtype)


def _triangle(x, upper: bool, unitriangular: bool):
    offset = int(unitriangular)
    return triu(x, offset) if upper else tril(x, -offset)


def _solve_triangular_backward(ctx, gX):
    A, X = ctx.saved_tensor("A"), ctx.saved_tensor("result")
    upper, left, unit = ctx.attrs["upper"], ctx.attrs["left"], ctx.attrs["unitriangular"]
    gB = solve_triangular(_mT(A), gX, upper=not upper, left=left, unitriangular=unit)
    gA = None
    if ctx.needs_input_grad[0]:
        gA = -(matmul(gB, _mT(X)) if left else matmul(_mT(X), gB))
        gA = reduce_grad(_triangle(gA, upper, unit), ctx.input_shapes[0])
    return gA, reduce_grad(gB, ctx.input_shapes[1]) if ctx.needs_input_grad[1] else None


solve_triangular_op = define(
    "linalg_solve_triangular",
    inputs=("A", "B"),
    meta=_solve_triangular_meta,
    backward=_solve_triangular_backward,
    saves=("A", ("result", 0)),
    backward_name="LinalgSolveTriangularBackward0",
)


@float32_region_under_autocast
def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False, out=None):
    """Solve ``A X = B`` (``X A = B`` when ``left=False``) for triangular ``A``: only the triangle
    ``upper`` names is read, and its diagonal is taken as ones when ``unitriangular``. Batch dims
    broadcast; a zero on the diagonal gives inf/nan, not an error (as PyTorch's)."""
    attrs = dict(upper=bool(upper), left=bool(left), unitriangular=bool(unitriangular))
    return outs(apply(solve_triangular_op, A, B, **attrs), out)


# cholesky -------------------------------------------------------------------------------------------


def _cholesky_meta(A):
    check_matrix("linalg.cholesky", A, square=True)
    return Meta(tuple(A.shape), A.dtype), Meta(tuple(A.shape[:-2]), D.int32)


def _cholesky_backward(ctx, gL, _ginfo=None):
    L = ctx.saved_tensor("L")
    phi = tril(matmul(_mT(L), tril(gL)))
    phi = phi - 0.5 * diag_embed(diagonal(phi, 0, -2, -1))
    gA = solve_triangular(_mT(L), phi, upper=True)
    gA = solve_triangular(L, gA, upper=False, left=False)
    return 0.5 * (gA + _mT(gA))


cholesky_ex_op = define(
    "linalg_cholesky_ex",
    inputs=("A",),
    outputs=("L", "info"),
    meta=_cholesky_meta,
    backward=_cholesky_backward,
    saves=("L",),
    nondiff_outputs=(1,),
    backward_name="LinalgCholeskyExBackward0",
)


# LU -------------------------------------------------------------------------------------------------


def _lu_factor_meta(A):
    check_matrix("linalg.lu_factor", A)
    batch = tuple(A.shape[:-2])
    k = min(A.shape[-2:])
    return Meta(tuple(A.shape), A.dtype), Meta(batch + (k,), D.int32), Meta(batch, D.int32)


def _pivots_meta(pivots, *, m):
    if pivots.dtype is not D.int32:
        raise RuntimeError(f"lu_unpack: LU_pivots is expected to be an int32 tensor, got {pivots.dtype.name}")
    return Meta(tuple(pivots.shape[:-1]) + (m,), D.int64)


lu_permutation_op = define("linalg_lu_permutation", inputs=("pivots",), meta=_pivots_meta)


def lu_permutation(pivots, m: int):
    """The row permutation ``perm`` (int64, length ``m``) that LAPACK's ``pivots`` encode:
    ``P^T A = A[..., perm, :]`` for ``A = P L U``."""
    return apply(lu_permutation_op, pivots, m=int(m))


def permutation_matrix(perm, dtype):
    """``P`` with ``P[perm[i], i] = 1``, so that ``P @ X`` puts row ``i`` of ``X`` at row ``perm[i]``."""
    from munet.ops.creation import arange

    rows = arange(perm.shape[-1], device=perm.device).unsqueeze(-1)
    return (perm.unsqueeze(-2) == rows).to(dtype)


def unpack_lu(LU):
    """``L`` (unit lower, m x k) and ``U`` (upper, k x n) packed in ``LU`` (m x n)."""
    m, n = LU.shape[-2:]
    k = min(m, n)
    L = tril(LU[..., :, :k], -1) + eye(m, k, dtype=LU.dtype, device=LU.device)
    return L, triu(LU[..., :k, :])


def _lu_square_backward(L, U, gL, gU):
    """Gradient of the rows-permuted A = L U for square L, U (``gL`` strictly lower, ``gU`` upper)."""
    phi = tril(matmul(_mT(L), gL), -1) + triu(matmul(gU, _mT(U)))
    x = solve_triangular(_mT(L), phi, upper=True, unitriangular=True)
    return solve_triangular(_mT(U), x, upper=False, left=False)


def lu_backward(L, U, perm, gL, gU):
    """Gradient of A = P L U from those of L and U, for any m x n A of full rank."""
    m, n = L.shape[-2], U.shape[-1]
    gL, gU = tril(gL, -1), triu(gU)
    if m == n:
        g = _lu_square_backward(L, U, gL, gU)
    elif m < n:  # A = P L [U1 U2]: U2 = L^-1 P^T A2, so gA2 = P L^-T gU2 and L's gradient gains a term
        U1, U2, gU1, gU2 = U[..., :m], U[..., m:], gU[..., :m], gU[..., m:]
        gA2 = solve_triangular(_mT(L), gU2, upper=True, unitriangular=True)
        gL = tril(gL - matmul(gA2, _mT(U2)), -1)
        g = cat([_lu_square_backward(L, U1, gL, gU1), gA2], -1)
    else:  # P^T A = [L1; L2] U: L2 = B2 U^-1, so gB2 = gL2 U^-T and U's gradient gains a term
        L1, L2, gL1, gL2 = L[..., :n, :], L[..., n:, :], gL[..., :n, :], gL[..., n:, :]
        gB2 = solve_triangular(_mT(U), gL2, upper=False, left=False)
        gU = triu(gU - matmul(_mT(L2), gB2))
        g = cat([_lu_square_backward(L1, U, gL1, gU), gB2], -2)
    return matmul(permutation_matrix(perm, g.dtype), g)


def _lu_factor_backward(ctx, gLU, _gpivots=None, _ginfo=None):
    LU, pivots = ctx.saved_tensor("LU"), ctx.saved_tensor("pivots")
    L, U = unpack_lu(LU)
    k = min(LU.shape[-2:])
    return lu_backward(L, U, lu_permutation(pivots, LU.shape[-2]), gLU[..., :, :k], gLU[..., :k, :])


lu_factor_ex_op = define(
    "linalg_lu_factor_ex",
    inputs=("A",),
    outputs=("LU", "pivots", "info"),
    meta=_lu_factor_meta,
    backward=_lu_factor_backward,
    saves=("LU", "pivots"),
    nondiff_outputs=(1, 2),
    backward_name="LinalgLuFactorExBackward0",
)


# QR -------------------------------------------------------------------------------------------------

QR_MODES = ("reduced", "complete", "r")


def _qr_meta(A, *, mode):
    check_matrix("linalg.qr", A)
    if mode not in QR_MODES:
        raise RuntimeError(
            f"linalg.qr: qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'"
        )
    batch, (m, n) = tuple(A.shape[:-2]), tuple(A.shape[-2:])
    k = m if mode == "complete" else min(m, n)
    q_shape = (0,) if mode == "r" else batch + (m, k)
    return Meta(q_shape, A.dtype), Meta(batch + (k, n), A.dtype)


def _copyltu(M):
    return tril(M) + _mT(tril(M, -1))


def _qr_tall_backward(Q, R, gQ, gR):
    """A = Q R with R square (m >= n)."""
    M = matmul(R, _mT(gR)) - matmul(_mT(gQ), Q)
    return solve_triangular(_mT(R), gQ + matmul(Q, _copyltu(M)), upper=False, left=False)


def _qr_backward(ctx, gQ, gR):
    mode = ctx.attrs["mode"]
    Q, R = ctx.saved_tensor("Q"), ctx.saved_tensor("R")
    m, n = ctx.input_shapes[0][-2:]
    if mode == "r":
        raise RuntimeError(
            "linalg.qr: The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
            "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr."
        )
    if mode == "complete" and m > n:
        raise RuntimeError(
            "linalg.qr: The QR decomposition is not differentiable when mode='complete' and nrows > ncols."
        )
    gQ, gR = _zeros_if_none(gQ, Q), _zeros_if_none(gR, R)
    if m >= n:
        return _qr_tall_backward(Q, R, gQ, gR)
    # A = Q [U V]: the leading square block is a QR of its own, and V = Q^T A2.
    U, V, gU, gV = R[..., :m], R[..., m:], gR[..., :m], gR[..., m:]
    gQ = gQ + matmul(matmul(Q, V), _mT(gV))
    return cat([_qr_tall_backward(Q, U, gQ, gU), matmul(Q, gV)], -1)


qr_op = define(
    "linalg_qr",
    inputs=("A",),
    outputs=("Q", "R"),
    meta=_qr_meta,
    backward=_qr_backward,
    saves=("Q", "R"),
    backward_name="LinalgQrBackward0",
)


# SVD ------------------------------------------------------------------------------------------------


def _svd_meta(A, *, full_matrices):
    check_matrix("linalg.svd", A)
    batch, (m, n) = tuple(A.shape[:-2]), tuple(A.shape[-2:])
    k = min(m, n)
    u_cols, v_rows = (m, n) if full_matrices else (k, k)
    return Meta(batch + (m, u_cols), A.dtype), Meta(batch + (k,), A.dtype), Meta(batch + (v_rows, n), A.dtype)


def _svd_backward(ctx, gU, gS, gVh):
    U, S, Vh = ctx.saved_tensor("U"), ctx.saved_tensor("S"), ctx.saved_tensor("Vh")
    m, n = ctx.input_shapes[0][-2:]
    k = S.shape[-1]
    # With full_matrices the extra columns of U (rows of Vh) span a null space: their gradient is dropped.
    U, Vh = U[..., :, :k], Vh[..., :k, :]
    gU = None if gU is None else gU[..., :, :k]
    gVh = None if gVh is None else gVh[..., :k, :]
    gS = _zeros_if_none(gS, S)
    if gU is None and gVh is None:
        return matmul(U * gS.unsqueeze(-2), Vh)
    gU, gVh = _zeros_if_none(gU, U), _zeros_if_none(gVh, Vh)
    UtgU, VtgV = matmul(_mT(U), gU), matmul(Vh, _mT(gVh))
    J, K = UtgU - _mT(UtgU), VtgV - _mT(VtgV)
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye(k, dtype=S.dtype, device=S.device)  # s_j^2 - s_i^2, 1 on the diagonal
    inner = (J * S.unsqueeze(-2) + S.unsqueeze(-1) * K) / E + diag_embed(gS)
    gA = matmul(matmul(U, inner), Vh)
    if m > k:
        gA = gA + matmul((gU - matmul(U, UtgU)) / S.unsqueeze(-2), Vh)
    if n > k:
        gA = gA + matmul(U, (gVh - matmul(_mT(VtgV), Vh)) / S.unsqueeze(-1))
    return gA


svd_op = define(
    "linalg_svd",
    inputs=("A",),
    outputs=("U", "S", "Vh"),
    meta=_svd_meta,
    backward=_svd_backward,
    saves=("U", "S", "Vh"),
    backward_name="LinalgSvdBackward0",
)


# eigh -----------------------------------------------------------------------------------------------


def _eigh_meta(A, *, UPLO):
    check_matrix("linalg.eigh", A, square=True)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"linalg.eigh: Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return Meta(tuple(A.shape[:-1]), A.dtype), Meta(tuple(A.shape), A.dtype)


def _eigh_backward(ctx, gL, gV):
    L, V = ctx.saved_tensor("eigenvalues"), ctx.saved_tensor("eigenvectors")
    gL = _zeros_if_none(gL, L)
    if gV is None:
        return matmul(V * gL.unsqueeze(-2), _mT(V))
    n = L.shape[-1]
    VtgV = matmul(_mT(V), gV)
    E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye(n, dtype=L.dtype, device=L.device)  # l_j - l_i, 1 on the diagonal
    inner = 0.5 * (VtgV - _mT(VtgV)) / E + diag_embed(gL)
    return matmul(matmul(V, inner), _mT(V))


eigh_op = define(
    "linalg_eigh",
    inputs=("A",),
    outputs=("eigenvalues", "eigenvectors"),
    meta=_eigh_meta,
    backward=_eigh_backward,
    saves=("eigenvalues", "eigenvectors"),
    backward_name="LinalgEighBackward0",
)


# public functions -----------------------------------------------------------------------------------


def _return_type(name: str, fields: str):
    return namedtuple(name, fields.split())


CholeskyEx = _return_type("linalg_cholesky_ex", "L info")
LuFactor = _return_type("linalg_lu_factor", "LU pivots")
LuFactorEx = _return_type("linalg_lu_factor_ex", "LU pivots info")
Lu = _return_type("linalg_lu", "P L U")
LuUnpack = _return_type("lu_unpack", "P L U")
Qr = _return_type("linalg_qr", "Q R")
Svd = _return_type("linalg_svd", "U S Vh")
Eigh = _return_type("linalg_eigh", "eigenvalues eigenvectors")


def raise_for_info(op: str, info, describe, error: type[Exception] = LinAlgError) -> None:
    """Raise PyTorch's error for the first failed matrix of a batch (``info > 0``); ``describe(i)``
    says what info value ``i`` means (it is called with the placeholder ``"{value}"``). A ``check``
    op (``ops/checks.py``), so it holds in eager mode and in compiled programs alike."""
    where = "(Batch element {index}): " if info.ndim else ""
    check_values(info <= 0, f"{op}: {where}{describe('{value}')}", error, info)


def _not_positive_definite(order: int) -> str:
    return (
        "The factorization could not be completed because the input is not positive-definite "
        f"(the leading minor of order {order} is not positive-definite)."
    )


@float32_region_under_autocast
def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False, out=None):
    """``(L, info)``: the Cholesky factor of symmetric positive-definite ``A`` (lower triangle read;
    the upper one with ``upper=True``, which returns ``U = L^T``), and per matrix 0 or the order of
    the first leading minor that is not positive-definite (then ``L`` is unspecified)."""
    check_matrix("linalg.cholesky_ex", A, square=True)
    L, info = apply(cholesky_ex_op, _mT(A) if upper else A)
    if check_errors:
        raise_for_info("linalg.cholesky_ex", info, _not_positive_definite)
    return outs(CholeskyEx(_mT(L) if upper else L, info), out)


@float32_region_under_autocast
def cholesky(A, *, upper: bool = False, out=None):
    """The Cholesky factor ``L`` (``A = L L^T``) of symmetric positive-definite ``A``; raises when
    ``A`` is not positive-definite. ``upper=True`` reads the upper triangle and returns ``L^T``."""
    check_matrix("linalg.cholesky", A, square=True)
    L, info = apply(cholesky_ex_op, _mT(A) if upper else A)
    raise_for_info("linalg.cholesky", info, _not_positive_definite)
    return outs(_mT(L) if upper else L, out)


@float32_region_under_autocast
def lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False, out=None):
    """``(LU, pivots, info)``: LU with partial pivoting packed as LAPACK's ``getrf`` packs it;
    ``info`` is 0 or the 1-based index of the first zero on U's diagonal."""
    _check_pivot("linalg.lu_factor_ex", pivot)
    LU, pivots, info = apply(lu_factor_ex_op, A)
    if check_errors:
        raise_for_info("linalg.lu_factor_ex", info, singular_u, RuntimeError)  # not a LinAlgError in PyTorch
    return outs(LuFactorEx(LU, pivots, info), out)


def singular_u(index) -> str:
    return (
        f"U[{index},{index}] is zero and using it on lu_solve would result in a division by zero. If you still want "
        "to perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
    )


def _check_pivot(op: str, pivot) -> None:
    if not pivot:
        raise RuntimeError(f"{op}: LU without pivoting is not implemented on the CPU (PyTorch has it only on CUDA)")


@float32_region_under_autocast
def lu_factor(A, *, pivot: bool = True, out=None):
    """``(LU, pivots)`` of ``A = P L U`` (see :func:`lu_factor_ex`); raises for singular square ``A``."""
    _check_pivot("linalg.lu_factor", pivot)
    LU, pivots, info = apply(lu_factor_ex_op, A)
    if A.shape[-1] == A.shape[-2]:
        raise_for_info("linalg.lu_factor", info, singular_u, RuntimeError)
    return outs(LuFactor(LU, pivots), out)


@float32_region_under_autocast
def lu_unpack(LU_data, LU_pivots, unpack_data: bool = True, unpack_pivots: bool = True, *, out=None):  # noqa: N803 - PyTorch's names
    """``(P, L, U)`` from :func:`lu_factor`'s ``(LU, pivots)``; the parts not asked for are empty."""
    check_matrix("lu_unpack", LU_data, role="LU_data")
    m = LU_data.shape[-2]
    empty = zeros((0,), dtype=LU_data.dtype, device=LU_data.device)
    P = permutation_matrix(lu_permutation(LU_pivots, m), LU_data.dtype) if unpack_pivots else empty
    L, U = unpack_lu(LU_data) if unpack_data else (empty, empty)
    return outs(LuUnpack(P, L, U), out)


@float32_region_under_autocast
def lu(A, *, pivot: bool = True, out=None):
    """``(P, L, U)`` with ``A = P L U``: L unit lower (m x k), U upper (k x n), ``k = min(m, n)``."""
    _check_pivot("linalg.lu", pivot)
    LU, pivots, _ = apply(lu_factor_ex_op, A)
    return outs(Lu(*lu_unpack(LU, pivots)), out)


@float32_region_under_autocast
def qr(A, mode: str = "reduced", *, out=None):
    """``(Q, R)`` with ``A = Q R``: ``mode='reduced'`` (Q is m x k), ``'complete'`` (Q is m x m) or
    ``'r'`` (Q empty). Signs follow LAPACK's Householder QR (R's diagonal may be negative)."""
    return outs(Qr(*apply(qr_op, A, mode=mode)), out)


@float32_region_under_autocast
def svd(A, full_matrices: bool = True, *, driver=None, out=None):
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``, S descending. The gradient is finite only for
    distinct nonzero singular values when U or Vh is used; with ``full_matrices`` the extra
    columns of U (rows of Vh) get no gradient, as in PyTorch."""
    _check_driver("linalg.svd", driver)
    return outs(Svd(*apply(svd_op, A, full_matrices=bool(full_matrices))), out)


def _check_driver(op: str, driver) -> None:
    if driver is not None:
        raise RuntimeError(
            f"{op}: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend, got driver={driver!r}"
        )


@float32_region_under_autocast
def svdvals(A, *, driver=None, out=None):
    """The singular values of ``A``, descending; differentiable everywhere they are distinct."""
    _check_driver("linalg.svdvals", driver)
    return outs(apply(svd_op, A, full_matrices=False)[1], out)


@float32_region_under_autocast
def eigh(A, UPLO: str = "L", *, out=None):  # noqa: N803 - PyTorch's argument name
    """``(eigenvalues, eigenvectors)`` of symmetric ``A`` (only the ``UPLO`` triangle is read),
    eigenvalues ascending. Eigenvector signs are LAPACK's."""
    return outs(Eigh(*apply(eigh_op, A, UPLO=UPLO)), out)


@float32_region_under_autocast
def eigvalsh(A, UPLO: str = "L", *, out=None):  # noqa: N803 - PyTorch's argument name
    """The eigenvalues of symmetric ``A``, ascending."""
    return outs(apply(eigh_op, A, UPLO=UPLO)[0], out)


def outs(result, out):
    """Copy ``result`` (a tensor or a tuple of them) into ``out`` when given."""
    if out is None:
        return result
    from munet.ops.linalg import _out

    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"out= must be a tuple of {len(result)} tensors, got {type(out).__name__}")
        return type(result)(*(_out(r, o) for r, o in zip(result, out)))
    return _out(result, out)
