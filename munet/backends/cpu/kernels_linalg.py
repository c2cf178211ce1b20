"""CPU kernels for linear algebra: straight to NumPy's BLAS."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.kernels_reduce import LOW_PRECISION, acc_dtype
from munet.backends.cpu.registry import kernel


@kernel("matmul")
def matmul(a, b):
    if a.dtype in LOW_PRECISION:
        acc = acc_dtype(a)
        return np.matmul(a.astype(acc), b.astype(acc)).astype(a.dtype)
    return np.matmul(a, b)
