"""CPU kernels for reductions; float16/bfloat16 accumulate in float32 like PyTorch."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.registry import kernel

LOW_PRECISION = ("float16", "bfloat16")


def acc_dtype(x: np.ndarray):
    """The accumulation dtype for ``x``: float32 for 16-bit floats, else ``x``'s own."""
    return np.float32 if x.dtype.name in LOW_PRECISION else None


@kernel("sum")
def sum_(x, *, dims, keepdim, dtype=None):
    return np.sum(x, axis=dims, keepdims=keepdim, dtype=acc_dtype(x)).astype(x.dtype, copy=False)
