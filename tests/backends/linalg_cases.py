"""Inputs of the cuda linalg tests (``test_cuda_linalg_emulated.py`` on the fake CuPy,
``test_cuda_gpu_linalg.py`` on a GPU)."""

from __future__ import annotations

import numpy as np

import munet


def matrices(kind: str, shape: tuple, dtype: str, seed: int = 0) -> np.ndarray:
    """Random matrices of ``shape`` suited to ``kind``: spd, symmetric, triangular (well conditioned),
    small (norm about 1) or general."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    n = shape[-1]
    if kind == "spd":
        x = x @ np.swapaxes(x, -1, -2) + n * np.eye(n)
    elif kind == "symmetric":
        x = x + np.swapaxes(x, -1, -2)
    elif kind == "triangular":
        x = x + 3 * np.eye(n) * np.sign(np.diagonal(x, axis1=-2, axis2=-1))[..., None]
    elif kind == "small":
        x = x / n
    return x.astype(dtype)


def pair(values: np.ndarray, layout: str = "transposed", device: str = "cuda:0"):
    """``values`` as a cpu tensor and as a cuda tensor: contiguous, or (``transposed``) a
    transposed view of the transposed matrices, so the cuda operand is not contiguous."""
    if layout == "transposed":
        host = munet.tensor(np.ascontiguousarray(np.swapaxes(values, -1, -2)))
        return host.mT, host.to(device).mT
    host = munet.tensor(values)
    return host, host.to(device)


def close(got, want, rtol: float, exact: bool = False) -> None:
    """A cuda result equals the cpu's (``exact``) or is within ``rtol`` (and as much absolute)."""
    assert got.device.type == "cuda" and got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    if exact:
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    else:
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=rtol, atol=rtol)


def gradient_pair(fn, values: np.ndarray, seed: int = 9) -> tuple:
    """``A.grad`` of ``sum(fn(A) * w)`` (``w`` random) on the cpu and on cuda:0."""
    grads = []
    for device in ("cpu", "cuda:0"):
        A = munet.tensor(values, device=device, requires_grad=True)
        out = fn(A)
        weights = munet.tensor(np.random.default_rng(seed).standard_normal(tuple(out.shape)), device=device)
        (out * weights).sum().backward()
        grads.append(A.grad)
    return tuple(grads)
