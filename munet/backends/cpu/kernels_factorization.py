"""CPU kernels of the factorizations: NumPy's LAPACK (cholesky, qr, svd, eigh, eig, det) where NumPy
has the routine; LU with partial pivoting (blocked, as LAPACK's) and triangular substitution,
which NumPy lacks, as loops over the columns with every step vectorized over the batch (and the
right-hand sides)."""

from __future__ import annotations

import math

import numpy as np

from munet.backends.cpu.registry import kernel


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape((math.prod(a.shape[:-2]),) + a.shape[-2:])


@kernel("linalg_solve_triangular")
def solve_triangular(a, b, *, upper, left, unitriangular):
    a, b = np.asarray(a), np.asarray(b)
    if not left:  # X A = B  <=>  A^T X^T = B^T
        at, bt = np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)
        return np.swapaxes(solve_triangular(at, bt, upper=not upper, left=True, unitriangular=unitriangular), -1, -2)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    x = np.array(np.broadcast_to(b, batch + b.shape[-2:]), dtype=np.result_type(a, b))
    n = a.shape[-1]
    order = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in order:
            done = slice(i + 1, n) if upper else slice(0, i)
            row = x[..., i, :] - np.matmul(a[..., i : i + 1, done], x[..., done, :])[..., 0, :]
            x[..., i, :] = row if unitriangular else row / a[..., i, i, None]
    return x


def _cholesky_columns(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column-by-column Cholesky of a batch, recording per matrix the order of the first leading
    minor that is not positive-definite (LAPACK's info); used when NumPy's refuses the batch."""
    flat = _flat(a)
    low = np.tril(flat)
    info = np.zeros(len(flat), np.int32)
    n = flat.shape[-1]
    for j in range(n):
        d = low[:, j, j] - np.einsum("bk,bk->b", low[:, j, :j], low[:, j, :j])
        bad = ~(d > 0) & (info == 0)
        info[bad] = j + 1
        root = np.sqrt(np.where(d > 0, d, 1.0))
        low[:, j, j] = root
        below = low[:, j + 1 :, j] - np.einsum("bik,bk->bi", low[:, j + 1 :, :j], low[:, j, :j])
        low[:, j + 1 :, j] = below / root[:, None]
    return low.reshape(a.shape), info.reshape(a.shape[:-2])


@kernel("linalg_cholesky_ex")
def cholesky_ex(a):
    a = np.asarray(a)
    try:
        return np.linalg.cholesky(a), np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        return _cholesky_columns(a)


LU_BLOCK = 64  # columns per panel: the trailing update of each panel is one BLAS matmul


@kernel("linalg_lu_factor_ex")
def lu_factor_ex(a):
    """Right-looking blocked LU with partial pivoting (LAPACK's getrf): each panel of columns is
    factored column by column, its row swaps are applied to whole rows, then the rows of U to its
    right come from a unit-lower triangular solve and the trailing matrix from one matmul."""
    a = np.array(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    lu = _flat(a).copy()
    pivots = np.zeros((len(lu), k), np.int32)
    rows = np.arange(len(lu))
    for j0 in range(0, k, LU_BLOCK):
        j1 = min(j0 + LU_BLOCK, k)
        for j in range(j0, j1):
            p = j + np.argmax(np.abs(lu[:, j:, j]), axis=1)
            pivots[:, j] = p + 1
            lu[rows, j], lu[rows, p] = lu[rows, p], lu[rows, j].copy()
            pivot = lu[:, j, j]
            lu[:, j + 1 :, j] /= np.where(pivot == 0, 1, pivot)[:, None]  # a zero pivot column stays (LAPACK's)
            lu[:, j + 1 :, j + 1 : j1] -= lu[:, j + 1 :, j, None] * lu[:, j, None, j + 1 : j1]
        if j1 < n:
            panel = lu[:, j0:j1, j0:j1]
            lu[:, j0:j1, j1:] = solve_triangular(panel, lu[:, j0:j1, j1:], upper=False, left=True, unitriangular=True)
            lu[:, j1:, j1:] -= np.matmul(lu[:, j1:, j0:j1], lu[:, j0:j1, j1:])
    zero = np.diagonal(lu, axis1=-2, axis2=-1) == 0
    first = zero.argmax(-1) if k else np.zeros(len(lu), np.int64)
    info = np.where(zero.any(-1), first + 1, 0).astype(np.int32)
    batch = a.shape[:-2]
    return lu.reshape(a.shape), pivots.reshape(batch + (k,)), info.reshape(batch)


@kernel("linalg_det")
def det(a):
    return np.asarray(np.linalg.det(a), dtype=np.asarray(a).dtype)


@kernel("linalg_lu_permutation")
def lu_permutation(pivots, *, m):
    pivots = np.asarray(pivots)
    flat = pivots.reshape(math.prod(pivots.shape[:-1]), pivots.shape[-1]).astype(np.int64) - 1
    perm = np.broadcast_to(np.arange(m), (len(flat), m)).copy()
    rows = np.arange(len(flat))
    for j in range(flat.shape[-1]):
        p = flat[:, j]
        perm[rows, j], perm[rows, p] = perm[rows, p], perm[rows, j].copy()
    return perm.reshape(pivots.shape[:-1] + (m,))


def _identity_columns(batch: tuple, m: int, cols: int, dtype) -> np.ndarray:
    return np.broadcast_to(np.eye(m, cols, dtype=dtype), batch + (m, cols)).copy()


@kernel("linalg_qr")
def qr(a, *, mode):
    a = np.asarray(a)
    m, n = a.shape[-2:]
    if a.size == 0:
        k = m if mode == "complete" else min(m, n)
        q = np.zeros((0,), a.dtype) if mode == "r" else _identity_columns(a.shape[:-2], m, k, a.dtype)
        return q, np.zeros(a.shape[:-2] + (k, n), a.dtype)
    if mode == "r":
        return np.zeros((0,), a.dtype), np.linalg.qr(a, mode="r")
    return np.linalg.qr(a, mode=mode)


@kernel("linalg_svd")
def svd(a, *, full_matrices):
    a = np.asarray(a)
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    if a.size == 0:
        k = min(m, n)
        u_cols, v_rows = (m, n) if full_matrices else (k, k)
        u = _identity_columns(batch, m, u_cols, a.dtype)
        vh = _identity_columns(batch, v_rows, n, a.dtype)
        return u, np.zeros(batch + (k,), a.dtype), vh
    try:
        return tuple(np.linalg.svd(a, full_matrices=full_matrices))
    except np.linalg.LinAlgError:
        raise RuntimeError(
            "linalg.svd: The algorithm failed to converge because the input matrix contained non-finite values."
        ) from None


@kernel("linalg_eigh")
def eigh(a, *, UPLO):  # noqa: N803 - PyTorch's argument name
    a = np.asarray(a)
    if a.size == 0:
        return np.zeros(a.shape[:-1], a.dtype), np.zeros(a.shape, a.dtype)
    try:
        return tuple(np.linalg.eigh(a, UPLO=UPLO))
    except np.linalg.LinAlgError:
        raise RuntimeError(
            "linalg.eigh: The algorithm failed to converge because the input matrix is ill-conditioned or has too "
            "many repeated eigenvalues"
        ) from None


@kernel("linalg_eig")
def eig(a):
    """LAPACK's geev: complex results in the input's precision, unit-norm eigenvector columns."""
    a = np.asarray(a)
    dtype = np.result_type(a.dtype, np.complex64)
    if a.size == 0:
        return np.zeros(a.shape[:-1], dtype), np.zeros(a.shape, dtype)
    if not np.isfinite(a).all():
        raise RuntimeError("linalg.eig: input tensor should not contain infs or NaNs.")
    try:
        values, vectors = np.linalg.eig(a)
    except np.linalg.LinAlgError:
        raise RuntimeError(
            "linalg.eig: The algorithm failed to converge because the input matrix is ill-conditioned or has too "
            "many repeated eigenvalues"
        ) from None
    return values.astype(dtype, copy=False), vectors.astype(dtype, copy=False)


@kernel("linalg_matrix_exp")
def matrix_exp(a):
    """Scaling and squaring in float64: ``X = A / 2^s`` with ``||X||_1 <= 1`` per matrix, the Taylor
    polynomial of degree 18 (remainder below 1/19! < 1e-16), then ``s`` squarings."""
    a = np.asarray(a)
    x = _flat(a).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = np.abs(x).sum(-2).max(-1, initial=0.0)
        s = np.where(np.isfinite(norm) & (norm > 1), np.ceil(np.log2(np.where(norm > 1, norm, 1))), 0).astype(np.int64)
    x = x / np.exp2(s)[:, None, None]
    identity = np.eye(a.shape[-1])
    result = np.broadcast_to(identity, x.shape)
    for k in range(18, 0, -1):
        result = identity + np.matmul(x, result) / k
    for step in range(int(s.max(initial=0))):
        result = np.where((s > step)[:, None, None], np.matmul(result, result), result)
    return result.reshape(a.shape).astype(a.dtype)


@kernel("geqrf")
def geqrf(a):
    """LAPACK's geqrf through NumPy's ``qr(mode='raw')`` (which returns the factor transposed)."""
    a = np.asarray(a)
    m, n = a.shape[-2:]
    if a.size == 0:
        return a.copy(), np.zeros(a.shape[:-2] + (min(m, n),), a.dtype)
    h, tau = np.linalg.qr(a, mode="raw")
    return np.ascontiguousarray(np.swapaxes(h, -1, -2)), tau
