"""CPU kernels for normalization: the fused ``standardize`` (mean, variance, scale) composite (float32
along the last dim as compiled C, ``row_kernels.py``)."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu import row_kernels
from munet.backends.cpu.kernels_reduce import acc_dtype
from munet.backends.cpu.registry import kernel


@kernel("standardize")
def standardize(x, *, dims, eps, center):
    xf = x.astype(acc_dtype(x) or x.dtype, copy=False)
    kept = tuple(1 if i in dims else n for i, n in enumerate(x.shape))
    if xf.size == 0 or any(x.shape[d] == 0 for d in dims):
        return np.empty(x.shape, x.dtype), np.full(kept, np.nan, x.dtype)
    fast = row_kernels.standardize(x, dims, eps, center)
    if fast is not None:
        return fast
    centered = (
        np.subtract(xf, np.mean(xf, axis=dims, keepdims=True), out=np.empty(xf.shape, xf.dtype)) if center else xf
    )
    var = np.mean(np.square(centered), axis=dims, keepdims=True)
    rstd = 1.0 / np.sqrt(var + np.asarray(eps, dtype=xf.dtype))
    out = centered if center else np.empty_like(xf)  # the centered temporary becomes the output
    np.multiply(centered, rstd, out=out)
    return out.astype(x.dtype, copy=False), rstd.astype(x.dtype)
