"""``matmul`` (so ``mm``, ``bmm``, ``linear`` and the matmul gradients) through cuBLAS.

One ``cublasGemmStridedBatchedEx`` per call. Row-major ``C = A @ B`` is column-major
``C^T = B^T A^T``, so the operands are passed swapped; an operand whose matrices are row-major or
column-major with a uniform batch stride (including 0 for a broadcast batch) is read in place,
any other layout is copied to row-major first. float32 accumulates in float32, or in TF32 tensor
cores when ``munet.backends.cuda.matmul.allow_tf32`` is set; float16 and bfloat16 multiply on tensor
cores and accumulate in float32, and cuBLAS may reduce split-K partial sums in the output type
unless ``allow_fp16_reduced_precision_reduction`` / ``allow_bf16_reduced_precision_reduction`` is
cleared (PyTorch's flags, default True); float64 in float64. cuBLAS has no integer GEMM, so integer
matmuls raise, as in PyTorch. complex64/complex128 go through CuPy's ``matmul`` (cuBLAS's complex GEMM).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.cuda import copies, flags
from munet.backends.cuda.registry import kernel

_CUDA_TYPES = {"float32": "CUDA_R_32F", "float64": "CUDA_R_64F", "float16": "CUDA_R_16F", "bfloat16": "CUDA_R_16BF"}


def _compute(cublas, dtype):
    """(cuBLAS compute type, NumPy type of alpha and beta) for ``dtype``."""
    if dtype is D.float64:
        return cublas.CUBLAS_COMPUTE_64F, np.float64
    if dtype is D.float32 and flags.matmul.allow_tf32:
        return cublas.CUBLAS_COMPUTE_32F_FAST_TF32, np.float32
    return cublas.CUBLAS_COMPUTE_32F, np.float32


def _math_mode(cublas, dtype) -> int:
    """cuBLAS's default math (TF32 comes only through the compute type), without reductions in the
    output type for float16/bfloat16 unless ``munet.backends.cuda.matmul`` allows them (as PyTorch)."""
    allowed = {
        D.float16: flags.matmul.allow_fp16_reduced_precision_reduction,
        D.bfloat16: flags.matmul.allow_bf16_reduced_precision_reduction,
    }.get(dtype, True)
    if allowed:
        return cublas.CUBLAS_DEFAULT_MATH
    return cublas.CUBLAS_DEFAULT_MATH | cublas.CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION


def blas_operand(cp, x, batch: tuple, rows: int, cols: int):
    """``x`` broadcast to ``batch + (rows, cols)`` as ``(array, transposed, ld, batch_stride)``:
    the 3-D array cuBLAS reads, whether its matrices are column-major (so cuBLAS must transpose
    them to get the row-major operand's transpose), their leading dimension and batch stride."""
    x3 = cp.broadcast_to(x, batch + (rows, cols)).reshape((-1, rows, cols))  # a view when batch dims merge
    s0, sr, sc = (s // x3.itemsize for s in x3.strides)
    if (cols == 1 or sc == 1) and (rows == 1 or sr >= cols):
        return x3, False, (sr if rows > 1 else max(cols, 1)), s0
    if (rows == 1 or sr == 1) and (cols == 1 or sc >= rows):
        return x3, True, (sc if cols > 1 else max(rows, 1)), s0
    x3 = cp.ascontiguousarray(x3)
    return x3, False, max(cols, 1), rows * cols


class Gemm(NamedTuple):
    """The arguments of one column-major strided-batched GEMM ``C^T = op(B') @ op(A')`` computing
    the row-major ``out = a @ b`` (cuBLAS's names: its ``A`` is our ``b``, its ``B`` our ``a``)."""

    transa: bool
    transb: bool
    m: int
    n: int
    k: int
    A: object  # noqa: N815 - cuBLAS's names
    lda: int
    stride_a: int
    B: object  # noqa: N815
    ldb: int
    stride_b: int
    ldc: int
    stride_c: int
    batch_count: int


def gemm_arguments(cp, a, b, out) -> Gemm:
    """How cuBLAS computes ``out = a @ b`` (``out`` a fresh C-contiguous array, not empty, ``k > 0``)."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = tuple(out.shape[:-2])
    a3, a_t, lda, stride_a = blas_operand(cp, a, batch, m, k)
    b3, b_t, ldb, stride_b = blas_operand(cp, b, batch, k, n)
    return Gemm(b_t, a_t, n, m, k, b3, ldb, stride_b, a3, lda, stride_a, n, m * n, out.size // (m * n))


@kernel("matmul")
def matmul(rt, a, b):
    dtype = copies.dtype_of(a)
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    return matmul_into(rt, a, b, rt.empty(batch + (a.shape[-2], b.shape[-1]), dtype))


def matmul_into(rt, a, b, out):
    """``a @ b`` written into ``out`` (C-contiguous, of ``a``'s dtype and the broadcast result's shape,
    overlapping neither operand): the compiled plans' arena hands matmuls their planned memory."""
    cp = rt.cupy
    dtype = copies.dtype_of(a)
    if dtype.is_complex:  # CuPy's matmul: cuBLAS's complex GEMM (cgemm/zgemm) on the current stream
        cp.matmul(a, b, out=out)  # (the op gives both operands one dtype)
        return out
    if dtype.name not in _CUDA_TYPES:
        raise DeviceError(f"matmul: cuBLAS has no {dtype.name} GEMM on {rt.label}; use a floating dtype")
    if copies.dtype_of(b) is not dtype:
        b = copies.cast(cp, b, dtype)
    if out.size == 0:
        return out
    if a.shape[-1] == 0:
        out.fill(0)  # 0 is also bfloat16's bit pattern of 0.0
        return out
    from cupy_backends.cuda.libs import cublas  # loads libcublas: only here, on a machine with a GPU

    g = gemm_arguments(cp, a, b, out)
    cuda_type = getattr(cp.cuda.runtime, _CUDA_TYPES[dtype.name])
    compute, scalar = _compute(cublas, dtype)
    alpha, beta = np.ones((), scalar), np.zeros((), scalar)
    op = {False: cublas.CUBLAS_OP_N, True: cublas.CUBLAS_OP_T}
    handle = cp.cuda.device.get_cublas_handle()  # CuPy's handle of this device and thread
    saved = cublas.getPointerMode(handle), cublas.getMathMode(handle)
    cublas.setStream(handle, rt.stream.ptr)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    cublas.setMathMode(handle, _math_mode(cublas, dtype))
    try:
        _gemm(cublas, handle, op, g, alpha, beta, out, cuda_type, compute)
    finally:
        cublas.setPointerMode(handle, saved[0])
        cublas.setMathMode(handle, saved[1])
    return out


def _gemm(cublas, handle, op, g: Gemm, alpha, beta, out, cuda_type, compute) -> None:
    cublas.gemmStridedBatchedEx(
        handle,
        op[g.transa],
        op[g.transb],
        g.m,
        g.n,
        g.k,
        alpha.ctypes.data,
        g.A.data.ptr,
        cuda_type,
        g.lda,
        g.stride_a,
        g.B.data.ptr,
        cuda_type,
        g.ldb,
        g.stride_b,
        beta.ctypes.data,
        out.data.ptr,
        cuda_type,
        g.ldc,
        g.stride_c,
        g.batch_count,
        compute,
        cublas.CUBLAS_GEMM_DEFAULT,
    )
