"""CPU kernels for activations and the softmax family (16-bit floats compute in float32)."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.kernels_reduce import upcast
from munet.backends.cpu.registry import kernel


def _scalar(value, x: np.ndarray):
    """A Python number as a 0-d array of ``x``'s dtype, so NumPy does not promote."""
    return np.asarray(value).astype(x.dtype)


@kernel("softmax")
def softmax(x, *, dim):
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    xf = upcast(x)
    e = np.subtract(xf, np.max(xf, axis=dim, keepdims=True), out=np.empty(xf.shape, xf.dtype))  # one temporary
    np.exp(e, out=e)
    np.divide(e, np.sum(e, axis=dim, keepdims=True), out=e)
    return e.astype(x.dtype, copy=False)


@kernel("log_softmax")
def log_softmax(x, *, dim):
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    xf = upcast(x)
    shifted = np.subtract(xf, np.max(xf, axis=dim, keepdims=True), out=np.empty(xf.shape, xf.dtype))
    np.subtract(shifted, np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True)), out=shifted)
    return shifted.astype(x.dtype, copy=False)


@kernel("relu")
def relu(x):
    return np.maximum(x, np.zeros((), x.dtype))  # NaN propagates, like PyTorch


@kernel("threshold")
def threshold(x, *, threshold, value):
    return np.where(x > _scalar(threshold, x), x, _scalar(value, x))


@kernel("hardtanh")
def hardtanh(x, *, min_val, max_val):
    return np.clip(x, _scalar(min_val, x), _scalar(max_val, x))


@kernel("leaky_relu")
def leaky_relu(x, *, negative_slope):
    xf = upcast(x)
    return np.where(xf > 0, xf, xf * _scalar(negative_slope, xf)).astype(x.dtype)


@kernel("elu")
def elu(x, *, alpha, scale, input_scale):
    xf = upcast(x)
    with np.errstate(over="ignore"):
        negative = np.expm1(np.minimum(xf, 0) * _scalar(input_scale, xf)) * _scalar(alpha * scale, xf)
    return np.where(xf > 0, xf * _scalar(scale, xf), negative).astype(x.dtype)


@kernel("softplus")
def softplus(x, *, beta, threshold):
    xf = upcast(x)
    bx = xf * _scalar(beta, xf)
    smooth = np.logaddexp(np.zeros((), xf.dtype), bx) / _scalar(beta, xf)
    return np.where(bx > threshold, xf, smooth).astype(x.dtype)


@kernel("threshold_backward")
def threshold_backward(grad, x, *, threshold):
    return np.where(x > _scalar(threshold, x), grad, np.zeros((), grad.dtype))


@kernel("hardtanh_backward")
def hardtanh_backward(grad, x, *, min_val, max_val):
    inside = (x > _scalar(min_val, x)) & (x < _scalar(max_val, x))
    return np.where(inside, grad, np.zeros((), grad.dtype))


@kernel("leaky_relu_backward")
def leaky_relu_backward(grad, x, *, negative_slope):
    gf = upcast(grad)
    return np.where(x > 0, gf, gf * _scalar(negative_slope, gf)).astype(grad.dtype)
