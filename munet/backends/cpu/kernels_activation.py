"""CPU kernels of the softmax family (16-bit floats compute in float32; float32 rows along the last dim
run as compiled C, ``row_kernels.py``); elementwise activations are rendered from their scalar
formulas (``kernels_formula.py``)."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu import row_kernels
from munet.backends.cpu.kernels_reduce import upcast
from munet.backends.cpu.registry import kernel


@kernel("softmax")
def softmax(x, *, dim):
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    fast = row_kernels.softmax(x, dim)
    if fast is not None:
        return fast
    xf = upcast(x)
    e = np.subtract(xf, np.max(xf, axis=dim, keepdims=True), out=np.empty(xf.shape, xf.dtype))  # one temporary
    np.exp(e, out=e)
    np.divide(e, np.sum(e, axis=dim, keepdims=True), out=e)
    return e.astype(x.dtype, copy=False)


@kernel("softmax_backward")
def softmax_backward(grad, y, *, dim):
    fast = row_kernels.softmax_backward(grad, y, dim)
    if fast is not None:
        return fast
    # the decomposition's ops, each rounded to the dtype as the separate ops round (16-bit floats)
    dtype = y.dtype
    gy = (upcast(grad) * upcast(y)).astype(dtype, copy=False)
    total = np.sum(upcast(gy), axis=dim, keepdims=True).astype(dtype, copy=False)
    return (upcast(gy) - (upcast(y) * upcast(total)).astype(dtype, copy=False)).astype(dtype, copy=False)


@kernel("log_softmax")
def log_softmax(x, *, dim):
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    xf = upcast(x)
    shifted = np.subtract(xf, np.max(xf, axis=dim, keepdims=True), out=np.empty(xf.shape, xf.dtype))
    np.subtract(shifted, np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True)), out=shifted)
    return shifted.astype(x.dtype, copy=False)
