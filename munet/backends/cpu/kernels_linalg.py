"""CPU kernels for linear algebra: straight to NumPy's BLAS."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.kernels_reduce import acc_dtype
from munet.backends.cpu.registry import kernel


@kernel("matmul")
def matmul(a, b):
    acc = acc_dtype(a)
    if acc is not None:
        return np.matmul(a.astype(acc), b.astype(acc)).astype(a.dtype)
    return np.matmul(a, b)
