"""CPU kernels for linear algebra: straight to NumPy's BLAS.

A batch of products (attention's ``q @ k.mT`` over batch and heads) is split over the thread budget:
NumPy's matmul loops over the batch and OpenBLAS splits each small product over its threads and
joins them again, once per product; run as tasks of whole products (``munet._threads.run_tasks``,
single-threaded BLAS each), the threads meet once per call. On the 2-core benchmark machine at two
threads, (64, 128, 64) @ (64, 64, 128) took 6-850 ms through ``np.matmul`` and 2.3-2.8 ms as tasks
(PyTorch's ``bmm``: 2.9-9.4 ms; docs/perf/eager.md).
"""

from __future__ import annotations

import math

import numpy as np

from munet._threads import kernel_threads, run_tasks
from munet.backends.cpu.kernels_reduce import LOW_PRECISION, acc_dtype
from munet.backends.cpu.registry import kernel

_BLAS_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))
_MIN_TASK_MACS = 1 << 18  # multiply-adds per task below which handing it to another thread costs more than it saves
_TASKS_PER_THREAD = 4  # more tasks than threads: a thread the machine does not schedule delays only its share


@kernel("matmul")
def matmul(a, b):
    if a.dtype in LOW_PRECISION:
        acc = acc_dtype(a)
        return np.matmul(a.astype(acc), b.astype(acc)).astype(a.dtype)
    if min(a.ndim, b.ndim) >= 2 and max(a.ndim, b.ndim) > 2:
        return _batched_matmul(a, b)
    return np.matmul(a, b)


def _batched_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b)`` for operands with batch dims (broadcast), its leading batch dim split
    into tasks on the thread budget where the products are big enough to pay for it."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    threads = kernel_threads()
    lead = batch[0]
    tasks = min(lead, threads * _TASKS_PER_THREAD, math.prod(batch) * m * k * n // _MIN_TASK_MACS)
    if threads <= 1 or tasks < 2 or a.dtype not in _BLAS_DTYPES or b.dtype not in _BLAS_DTYPES:
        return np.matmul(a, b)
    out = np.empty((*batch, m, n), np.result_type(a, b))
    a = np.broadcast_to(a, (*batch, m, k))
    b = np.broadcast_to(b, (*batch, k, n))
    bounds = [lead * i // tasks for i in range(tasks + 1)]
    run_tasks(
        [lambda lo=lo, hi=hi: np.matmul(a[lo:hi], b[lo:hi], out=out[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    )
    return out
