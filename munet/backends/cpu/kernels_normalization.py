"""CPU kernels for normalization: the fused ``standardize`` (mean, variance, scale) primitive."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.kernels_reduce import acc_dtype
from munet.backends.cpu.registry import kernel


@kernel("standardize")
def standardize(x, *, dims, eps, center):
    xf = x.astype(acc_dtype(x) or x.dtype, copy=False)
    kept = tuple(1 if i in dims else n for i, n in enumerate(x.shape))
    if xf.size == 0 or any(x.shape[d] == 0 for d in dims):
        return np.empty(x.shape, x.dtype), np.full(kept, np.nan, x.dtype)
    centered = xf - np.mean(xf, axis=dims, keepdims=True) if center else xf
    var = np.mean(centered * centered, axis=dims, keepdims=True)
    rstd = 1.0 / np.sqrt(var + np.asarray(eps, dtype=xf.dtype))
    return (centered * rstd).astype(x.dtype), rstd.astype(x.dtype)
