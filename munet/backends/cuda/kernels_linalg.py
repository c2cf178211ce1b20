"""The linalg primitives on cuda: cuSOLVER through CuPy (``docs/cuda.md``, "Linear algebra").

The factorizations are BLAS-like primitives (DESIGN): each backend calls its LAPACK, and on cuda
that is cuSOLVER. Where CuPy's public function returns everything the op returns, it is called
on the whole batch (``cupy.linalg.qr``, ``svd``, ``eigh``, ``det``); where CuPy drops LAPACK's
``info`` (Cholesky, LU) cuSOLVER is called directly on CuPy's handle of the device and thread, as
``kernels_blas.py`` calls cuBLAS: ``potrfBatched`` for the whole batch, ``getrf`` once per
matrix (cuSOLVER has no batched LU of rectangular matrices). The triangular solve is
``cupyx.scipy.linalg.solve_triangular`` (cuBLAS ``trsm``) once per matrix of the batch, and the
matrix exponential is ``cupyx.scipy.linalg.expm``. LAPACK reads column-major matrices, so a
row-major operand is either passed as its own transpose (the symmetric input of ``potrf``: the
other triangle is named) or transposed into a column-major copy first (``getrf``).

Everything runs inside the device's scope (``registry.py``): CuPy's current device is the operand's,
its current stream is MuNet's current stream of that device (cuSOLVER's handle is set to it), and
every allocation, workspaces included, comes from the device's pool; results are CuPy's fresh
arrays, which the backend adopts. Inputs are float32 or float64 (the ops' shape rules refuse the
rest). ``linalg_eig`` needs ``cupy.linalg.eig`` (cuSOLVER's ``Xgeev``), which only recent CuPy
releases have: with an older one it raises ``DeviceError`` saying so.
"""

from __future__ import annotations

import math

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.cuda import copies
from munet.backends.cuda.registry import kernel

_PREFIX = {D.float32: "s", D.float64: "d"}


def _lapack_prefix(rt, op: str, a) -> str:
    dtype = copies.dtype_of(a)
    if dtype not in _PREFIX:
        raise DeviceError(f"{op}: cuSOLVER on {rt.label} takes float32 or float64 matrices, got {dtype.name}")
    return _PREFIX[dtype]


def _batched(cp, a):
    """``a`` as a fresh C-contiguous ``(count, rows, cols)`` array (cuSOLVER writes its input)."""
    return cp.array(a, copy=True, order="C").reshape((math.prod(a.shape[:-2]),) + a.shape[-2:])


def _cusolver(rt):
    """cuSOLVER and CuPy's dense handle of this device and thread, set to MuNet's current stream."""
    from cupy_backends.cuda.libs import cusolver  # loads libcusolver: only here, on a machine with a GPU

    handle = rt.cupy.cuda.device.get_cusolver_handle()
    cusolver.setStream(handle, rt.stream.ptr)
    return cusolver, handle


def _identity_columns(cp, batch: tuple, rows: int, cols: int, dtype):
    eye = cp.eye(rows, cols, dtype=copies.storage_dtype(dtype))
    return cp.ascontiguousarray(cp.broadcast_to(eye, batch + (rows, cols)))


@kernel("linalg_cholesky_ex")
def cholesky_ex(rt, a):
    """``potrfBatched``: the row-major matrix is read as the column-major transpose, whose upper
    triangle is the row-major lower one (PyTorch reads the lower triangle), so L lands in the lower
    triangle; ``info`` is cuSOLVER's per matrix, on the device (no synchronisation)."""
    cp = rt.cupy
    prefix = _lapack_prefix(rt, "linalg.cholesky_ex", a)
    batch, n = a.shape[:-2], a.shape[-1]
    x = _batched(cp, a)
    count = x.shape[0]
    info = cp.zeros((count,), cp.int32)
    if count and n:
        from cupy_backends.cuda.libs import cublas

        cusolver, handle = _cusolver(rt)
        pointers = cp.arange(count, dtype=cp.uint64) * np.uint64(n * n * x.itemsize) + np.uint64(x.data.ptr)
        potrf = getattr(cusolver, f"{prefix}potrfBatched")
        potrf(handle, cublas.CUBLAS_FILL_MODE_UPPER, n, pointers.data.ptr, n, info.data.ptr, count)
    rows, cols = cp.arange(n).reshape((n, 1)), cp.arange(n).reshape((1, n))
    lower = cp.where(cols <= rows, x, x.dtype.type(0))  # the upper triangle still holds A's values
    return lower.reshape(a.shape), info.reshape(batch)


@kernel("linalg_lu_factor_ex")
def lu_factor_ex(rt, a):
    """cuSOLVER's ``getrf`` (LAPACK's: partial pivoting, 1-based pivots, ``info`` the first exactly
    zero pivot) once per matrix, on a column-major copy of the batch."""
    cp = rt.cupy
    prefix = _lapack_prefix(rt, "linalg.lu_factor_ex", a)
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    count = math.prod(batch)
    # (count, n, m): a column-major copy (getrf overwrites it; a transposed view may already be laid out so)
    columns = cp.array(cp.swapaxes(a.reshape((count, m, n)), -1, -2), copy=True, order="C")
    pivots = cp.zeros((count, k), cp.int32)
    info = cp.zeros((count,), cp.int32)
    if count and k:
        cusolver, handle = _cusolver(rt)
        getrf = getattr(cusolver, f"{prefix}getrf")
        lwork = getattr(cusolver, f"{prefix}getrf_bufferSize")(handle, m, n, columns.data.ptr, m)
        work = cp.empty((max(lwork, 1),), columns.dtype)
        for i in range(count):
            getrf(handle, m, n, columns[i].data.ptr, m, work.data.ptr, pivots[i].data.ptr, info[i : i + 1].data.ptr)
    lu = cp.ascontiguousarray(cp.swapaxes(columns, -1, -2)).reshape(a.shape)
    return lu, pivots.reshape(batch + (k,)), info.reshape(batch)


@kernel("linalg_lu_permutation")
def lu_permutation(rt, pivots, *, m):
    """The permutation LAPACK's row swaps make, applied to ``arange(m)`` one swap after another for
    every matrix of the batch at once (``k`` small device steps)."""
    cp = rt.cupy
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    count = math.prod(batch)
    swaps = cp.ascontiguousarray(pivots.reshape((count, k))).astype(cp.int64) - 1
    perm = cp.empty((count, m), cp.int64)
    perm[...] = cp.arange(m, dtype=cp.int64)
    rows = cp.arange(count, dtype=cp.int64)
    for j in range(k):
        p = swaps[:, j]
        at_j, at_p = perm[rows, j].copy(), perm[rows, p].copy()
        perm[rows, j] = at_p
        perm[rows, p] = at_j
    return perm.reshape(batch + (m,))


@kernel("linalg_solve_triangular")
def solve_triangular(rt, a, b, *, upper, left, unitriangular):
    """``cupyx.scipy.linalg.solve_triangular`` (cuBLAS ``trsm``) per matrix of the broadcast batch;
    ``X A = B`` is solved as ``A^T X^T = B^T``."""
    cp = rt.cupy
    _lapack_prefix(rt, "linalg.solve_triangular", a)
    if not left:
        at, bt = cp.swapaxes(a, -1, -2), cp.swapaxes(b, -1, -2)
        x = solve_triangular(rt, at, bt, upper=not upper, left=True, unitriangular=unitriangular)
        return cp.ascontiguousarray(cp.swapaxes(x, -1, -2))
    from cupyx.scipy import linalg

    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    n, r = a.shape[-1], b.shape[-1]
    out = rt.empty(batch + (n, r), copies.dtype_of(a))
    if out.size == 0:
        return out
    a3 = cp.broadcast_to(a, batch + (n, n)).reshape((-1, n, n))
    b3 = cp.broadcast_to(b, batch + (n, r)).reshape((-1, n, r))
    out3 = out.reshape((-1, n, r))
    for i in range(out3.shape[0]):
        solved = linalg.solve_triangular(a3[i], b3[i], lower=not upper, unit_diagonal=unitriangular)
        out3[i] = solved
    return out


@kernel("linalg_det")
def det(rt, a):
    """``cupy.linalg.det`` (cuBLAS's batched LU); 1 for 0 x 0 matrices."""
    cp = rt.cupy
    _lapack_prefix(rt, "linalg.det", a)
    batch, n = a.shape[:-2], a.shape[-1]
    if n == 0 or math.prod(batch) == 0:
        return cp.ones(batch, a.dtype)
    return cp.linalg.det(cp.ascontiguousarray(a))


@kernel("linalg_qr")
def qr(rt, a, *, mode):
    """``cupy.linalg.qr`` (cuSOLVER ``geqrf`` + ``orgqr``, batched); ``mode='r'`` returns an empty Q."""
    cp = rt.cupy
    _lapack_prefix(rt, "linalg.qr", a)
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    dtype = copies.dtype_of(a)
    if a.size == 0:
        k = m if mode == "complete" else min(m, n)
        q = rt.empty((0,), dtype) if mode == "r" else _identity_columns(cp, batch, m, k, dtype)
        return q, cp.zeros(batch + (k, n), a.dtype)
    if mode == "r":
        return rt.empty((0,), dtype), cp.linalg.qr(cp.ascontiguousarray(a), mode="r")
    return tuple(cp.linalg.qr(cp.ascontiguousarray(a), mode=mode))


@kernel("geqrf")
def geqrf(rt, a):
    """``cupy.linalg.qr(mode='raw')``: cuSOLVER's ``geqrf`` (``h`` comes transposed, as NumPy's)."""
    cp = rt.cupy
    _lapack_prefix(rt, "geqrf", a)
    m, n = a.shape[-2:]
    if a.size == 0:
        return cp.array(a, copy=True, order="C"), cp.zeros(a.shape[:-2] + (min(m, n),), a.dtype)
    h, tau = cp.linalg.qr(cp.ascontiguousarray(a), mode="raw")
    return cp.ascontiguousarray(cp.swapaxes(h, -1, -2)), tau


@kernel("linalg_svd")
def svd(rt, a, *, full_matrices):
    """``cupy.linalg.svd`` (cuSOLVER ``gesvdj`` batched / ``gesvd``)."""
    cp = rt.cupy
    _lapack_prefix(rt, "linalg.svd", a)
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    if a.size == 0:
        k = min(m, n)
        u_cols, v_rows = (m, n) if full_matrices else (k, k)
        dtype = copies.dtype_of(a)
        u = _identity_columns(cp, batch, m, u_cols, dtype)
        vh = _identity_columns(cp, batch, v_rows, n, dtype)
        return u, cp.zeros(batch + (k,), a.dtype), vh
    return tuple(cp.linalg.svd(cp.ascontiguousarray(a), full_matrices=full_matrices, compute_uv=True))


@kernel("linalg_eigh")
def eigh(rt, a, *, UPLO):  # noqa: N803 - PyTorch's argument name
    """``cupy.linalg.eigh`` (cuSOLVER ``syevj`` batched / ``syevd``): ascending eigenvalues."""
    cp = rt.cupy
    _lapack_prefix(rt, "linalg.eigh", a)
    if a.size == 0:
        return cp.zeros(a.shape[:-1], a.dtype), cp.zeros(a.shape, a.dtype)
    return tuple(cp.linalg.eigh(cp.ascontiguousarray(a), UPLO=UPLO))


@kernel("linalg_eig")
def eig(rt, a):
    """``cupy.linalg.eig`` (cuSOLVER ``Xgeev``: unit-norm eigenvector columns, complex results in the
    input's precision) where this CuPy has it: only recent releases do, and older ones raise here."""
    cp = rt.cupy
    _lapack_prefix(rt, "linalg.eig", a)
    general = getattr(cp.linalg, "eig", None)
    if general is None:
        raise DeviceError(
            f"linalg_eig: no kernel for device '{rt.label}': this CuPy ({getattr(cp, '__version__', '?')}) lacks "
            "cupy.linalg.eig (cuSOLVER's geev; recent CuPy releases have it); eigh covers symmetric matrices, "
            "or move A to the cpu"
        )
    if a.size == 0:
        dtype = copies.dtype_of(a).to_complex().np
        return cp.zeros(a.shape[:-1], dtype), cp.zeros(a.shape, dtype)
    return tuple(general(cp.ascontiguousarray(a)))


@kernel("linalg_matrix_exp")
def matrix_exp(rt, a):
    """``cupyx.scipy.linalg.expm`` (scaling and squaring with a Pade approximant, cuBLAS GEMMs)."""
    cp = rt.cupy
    _lapack_prefix(rt, "linalg.matrix_exp", a)
    n = a.shape[-1]
    if a.size == 0:
        return cp.zeros(a.shape, a.dtype)
    from cupyx.scipy import linalg

    x = cp.ascontiguousarray(a).reshape((-1, n, n))
    out = cp.empty(x.shape, x.dtype)
    for i in range(x.shape[0]):
        out[i] = linalg.expm(x[i])
    return out.reshape(a.shape)
