"""Matrix products split into tasks on MuNet's OpenMP team, each task one single-threaded BLAS call.

:func:`run` computes a float32 or float64 ``a @ b`` as products that write disjoint parts of the
result (each product of a batch, or blocks of rows or columns of each) in one OpenMP loop with a
dynamic schedule: each thread of the team claims the next product when it is free and calls
OpenBLAS's ``cblas_?gemm`` (NumPy's library, found by name) with OpenBLAS held at one thread. The
team is the one the generated kernels and OpenBLAS's own jobs use (``munet._blas_threads``), so no
third pool of threads competes for the cores, and the threads meet once per call, where NumPy's
matmul and OpenBLAS's threading meet at every product and every panel of the inner dimension.

Nothing runs here (:func:`run` returns False and the caller uses ``np.matmul``) without a C
compiler with OpenMP or with ``MUNET_EAGER_C=0`` (as for the other eager C kernels), without
OpenBLAS's CBLAS in the process, or for an operand whose layout is not one BLAS reads directly (a
unit stride along its rows or its columns). The results are OpenBLAS's at one thread.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from munet import _blas_threads, _threads
from munet.backends.cpu import compiled_formula
from munet.compiler.codegen.c_team import TEAM_TASKS

# (exported name, integer width) of NumPy's OpenBLAS CBLAS products, the 64-bit-index build first
_GEMMS = {
    np.dtype(np.float32): (("scipy_cblas_sgemm64_", 64), ("cblas_sgemm64_", 64), ("scipy_cblas_sgemm", 32), ("cblas_sgemm", 32)),
    np.dtype(np.float64): (("scipy_cblas_dgemm64_", 64), ("cblas_dgemm64_", 64), ("scipy_cblas_dgemm", 32), ("cblas_dgemm", 32)),
}  # fmt: skip

_SOURCE = (
    TEAM_TASKS
    + r"""
#include <stdint.h>

typedef {index} blas_int;
typedef void (*gemm_fn)(int order, int trans_a, int trans_b, blas_int m, blas_int n, blas_int k, {real} alpha,
                        const {real} *a, blas_int lda, const {real} *b, blas_int ldb, {real} beta, {real} *c,
                        blas_int ldc);

/* products i in [0, count): c[i] (m[i] x n[i], row stride ldc) = a[i] (m[i] x k) @ b[i] (k x n[i]) */
void munet_gemm_tasks(void *fn, int64_t count, const int64_t *m, const int64_t *n, int64_t k,
                      char *const *a, char *const *b, char *const *c, int64_t trans_a, int64_t lda,
                      int64_t trans_b, int64_t ldb, int64_t ldc, int64_t threads) {
    gemm_fn gemm = (gemm_fn)fn;
    long done = 0;
    #pragma omp parallel num_threads(threads)
    {
        #pragma omp for schedule(dynamic, 1) nowait
        for (int64_t i = 0; i < count; i++) {
            gemm(101, trans_a ? 112 : 111, trans_b ? 112 : 111, m[i], n[i], k, 1, (const {real} *)a[i], lda,
                 (const {real} *)b[i], ldb, 0, ({real} *)c[i], ldc);
            munet_task_done(&done);
        }
        munet_wait_awake(&done, count);
    }
}
"""
)


@functools.cache
def cblas_gemm(dtype: np.dtype):
    """``(address, integer width)`` of NumPy's OpenBLAS ``cblas_?gemm`` for float32 or float64
    ``dtype``, where a C compiler with OpenMP can build the callers of it (this module's and
    ``column_tasks``'s), else None."""
    from munet.compiler.codegen import build

    compiler = build.find_compiler()
    if dtype not in _GEMMS or compiler is None or "-fopenmp" not in compiler[2]:
        return None
    paths = _threads.openblas_paths()
    found = ((_blas_threads.openblas_function(paths, (name,)), width) for name, width in _GEMMS[dtype])
    gemm, width = next(((fn, width) for fn, width in found if fn is not None), (None, None))
    return None if gemm is None else (ctypes.cast(gemm, ctypes.c_void_p).value, width)


def load_with_cblas(source: str, name: str, dtype: np.dtype, what: str):
    """``(the function name of source, the CBLAS function's address)``, or None (``cblas_gemm``):
    ``source`` built with ``{index}`` replaced by CBLAS's integer type and ``{real}`` by ``dtype``'s."""
    from munet.compiler.codegen import build

    found = cblas_gemm(dtype)
    if found is None:
        return None
    gemm, width = found
    source = source.replace("{index}", "int64_t" if width == 64 else "int32_t")
    source = source.replace("{real}", "float" if dtype == np.float32 else "double")
    library, _ = build.load_library(source, name, what=what)
    fn = getattr(library, name)
    fn.restype = None
    return fn, gemm


@functools.cache
def _library(dtype: np.dtype):
    """``(munet_gemm_tasks, the CBLAS function)`` for ``dtype``, or None where they cannot be had."""
    found = load_with_cblas(_SOURCE, "munet_gemm_tasks", dtype, "munet: matrix products on the OpenMP team")
    if found is None:
        return None
    fn, gemm = found
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.argtypes += [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 6
    return fn, ctypes.c_void_p(gemm)


def available(dtype: np.dtype) -> bool:
    """Whether products of ``dtype`` can run here (a C compiler with OpenMP and OpenBLAS's CBLAS)."""
    return dtype in _GEMMS and compiled_formula.enabled() and _library(dtype) is not None


def _layout(x: np.ndarray):
    """``(transposed, leading dimension)`` of the matrices in ``x``'s last two dims as BLAS reads
    them (row-major), or None when neither of its strides is a unit one."""
    rows, cols = x.shape[-2:]
    s0, s1 = (s // x.itemsize for s in x.strides[-2:])
    if (s1 == 1 or cols == 1) and s0 >= max(1, cols) and s0 * x.itemsize == x.strides[-2]:
        return False, s0
    if (s0 == 1 or rows == 1) and s1 >= max(1, rows) and s1 * x.itemsize == x.strides[-1]:
        return True, s1
    return None


def _batch_addresses(x: np.ndarray) -> np.ndarray:
    """The byte address of each matrix of ``x``'s batch (its dims but the last two), flat, int64."""
    batch = x.shape[:-2]
    address = np.full(batch, x.ctypes.data, np.int64)
    for d, stride in enumerate(x.strides[:-2]):
        address += (np.arange(batch[d], dtype=np.int64) * stride).reshape(
            [-1 if e == d else 1 for e in range(len(batch))]
        )
    return address.reshape(-1)


def run(out: np.ndarray, a: np.ndarray, b: np.ndarray, pieces: int, by_rows: bool, threads: int) -> bool:
    """``out = a @ b`` (``a`` and ``b`` broadcast to ``out``'s batch already) as tasks on ``threads``
    threads: every product of the batch, each cut into ``pieces`` blocks of rows (``by_rows``) or
    columns of its result. False, with nothing written, where this module cannot run them."""
    if not (a.dtype == b.dtype == out.dtype and available(out.dtype)) or not (
        a.flags.aligned and b.flags.aligned and out.flags.aligned
    ):
        return False
    la, lb, lc = _layout(a), _layout(b), _layout(out)
    if la is None or lb is None or lc is None or lc[0]:
        return False
    (m, k), n = a.shape[-2:], b.shape[-1]
    size = m if by_rows else n
    bounds = np.array([size * i // pieces for i in range(pieces + 1)], np.int64)
    start, extent = bounds[:-1], np.diff(bounds)
    if by_rows:
        shift_a, shift_b, shift_c = start * a.strides[-2], np.zeros(pieces, np.int64), start * out.strides[-2]
    else:
        shift_a, shift_b, shift_c = np.zeros(pieces, np.int64), start * b.strides[-1], start * out.strides[-1]
    pa, pb, pc = (
        (_batch_addresses(x)[:, None] + shift[None, :]).reshape(-1)
        for x, shift in ((a, shift_a), (b, shift_b), (out, shift_c))
    )
    count = len(pc)
    ms = np.tile(extent if by_rows else np.full(pieces, m, np.int64), count // pieces)
    ns = np.tile(np.full(pieces, n, np.int64) if by_rows else extent, count // pieces)
    fn, gemm = _library(out.dtype)
    with _threads.single_threaded_blas():
        fn(gemm, count, ms.ctypes.data, ns.ctypes.data, k, pa.ctypes.data, pb.ctypes.data, pc.ctypes.data,
           int(la[0]), la[1], int(lb[0]), lb[1], lc[1], threads)  # fmt: skip
    return True
