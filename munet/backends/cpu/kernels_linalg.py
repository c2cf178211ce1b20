"""CPU kernels for linear algebra: straight to NumPy's BLAS.

At a thread budget above one, a float32/float64 product big enough to pay for it runs as tasks on
the OpenMP team (``gemm_tasks``), each one single-threaded BLAS call: every product of a batch, and
where the batch is smaller than the team, blocks of rows or columns of each product (its longer
side: the other operand is read whole by every block). NumPy's matmul loops over a batch, and
OpenBLAS splits each product over its threads and meets them again at every panel of the inner
dimension, so on a loaded machine every meeting can wait a timeslice for a descheduled thread; as
tasks the threads meet once per call. Figures: docs/perf/eager.md (2026-12-03).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from munet._threads import kernel_threads
from munet.backends.cpu import gemm_tasks
from munet.backends.cpu.fp_errors import DEFAULT, IGNORING_DEFAULT, call_ignoring, get_state, ignore, restore, set_state
from munet.backends.cpu.kernels_reduce import LOW_PRECISION, acc_dtype
from munet.backends.cpu.registry import kernel

_MIN_MACS = 1 << 19  # multiply-adds of a call below which starting the team costs more than it saves
_MIN_TASK_MACS = 1 << 14  # multiply-adds per task below which a BLAS call's own overhead dominates
_MIN_BLOCK = 64  # rows or columns per block of one product: thinner blocks leave the BLAS kernel's tiles half empty
_BLOCKS_PER_THREAD = 2  # blocks of one product per thread: a thread that runs late takes fewer of them


# ndarray.dot of two such matrices makes np.matmul's one BLAS call (gemm, or syrk for a @ a.T) bit for
# bit, at a third of its cost on a small product; other strides (which np.matmul may loop over without
# BLAS) and dtypes keep np.matmul
_DOT_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


@kernel("matmul")
def matmul(a, b):
    fa, fb = a.flags, b.flags  # (a and b have a layout BLAS reads directly: contiguous either way)
    if (
        a.ndim == 2
        and b.ndim == 2
        and a.dtype in _DOT_DTYPES
        and (fa.c_contiguous or fa.f_contiguous)
        and (fb.c_contiguous or fb.f_contiguous)
    ):
        if a.size * b.shape[1] < _MIN_MACS or kernel_threads() == 1:
            # np.matmul's own BLAS call, without the gufunc's dispatch (see _DOT_DTYPES); dot reports the
            # floating-point flags BLAS raised (inf or NaN operands), np.matmul does not
            token = set_state(IGNORING_DEFAULT) if get_state() is DEFAULT else ignore()  # call_ignoring, inline
            try:
                return a.dot(b)
            finally:
                restore(token)
    elif a.dtype in LOW_PRECISION:
        acc = acc_dtype(a)
        return call_ignoring(np.matmul, a.astype(acc), b.astype(acc)).astype(a.dtype)
    if max(a.size * b.shape[-1], b.size * a.shape[-2]) < _MIN_MACS or kernel_threads() == 1:
        # one thread, or too small to share: no shape work on the small-op path. np.matmul's loops for
        # other layouts report inf/NaN operands as RuntimeWarnings, which PyTorch never gives
        return call_ignoring(np.matmul, a, b)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = np.empty((*batch, a.shape[-2], b.shape[-1]), np.result_type(a, b))
    matmul_into(out, a, b)
    return out


def matmul_into(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """``np.matmul(a, b, out=out)`` for operands of rank 2 or more (batch dims broadcast), as tasks on
    the thread budget where it is big enough (see the module docstring)."""
    batch, (m, k), n = out.shape[:-2], a.shape[-2:], b.shape[-1]
    products = math.prod(batch)
    macs = products * m * k * n
    if macs >= _MIN_MACS:  # (a small product never touches the thread budget)
        threads = kernel_threads()
        by_rows = m >= n
        wanted = _BLOCKS_PER_THREAD * -(-threads // products)  # none where the batch alone gives every thread work
        pieces = 1 if products >= threads else max(1, min(wanted, (m if by_rows else n) // _MIN_BLOCK))
        tasks = products * pieces
        if threads > 1 and tasks > 1 and macs >= tasks * _MIN_TASK_MACS:
            a, b = np.broadcast_to(a, (*batch, m, k)), np.broadcast_to(b, (*batch, k, n))
            if gemm_tasks.run(out, a, b, pieces, by_rows, threads):
                return
    call_ignoring(functools.partial(np.matmul, out=out), a, b)
