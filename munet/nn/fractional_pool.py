"""``F.fractional_max_pool2d/3d``: max pooling over pseudo-random windows (Graham, 2014), as PyTorch.

For each (sample, channel) plane one uniform number ``u`` per spatial dim (``_random_samples``,
shape ``(N, C, dims)``; drawn when not given) places the windows: along a dim of input size ``I``,
output size ``O`` and kernel ``K`` window ``i < O - 1`` starts at
``int((i + u) * a) - int(u * a)`` with ``a = (I - K) / (O - 1)`` (in the input's dtype) and the
last at ``I - K``, PyTorch's sequence. 2-D pooling reads ``u[0]`` for the width and ``u[1]`` for
the height; 3-D reads ``u[0], u[1], u[2]`` for depth, height and width. The maxima are a gather
over the window positions, so the gradient flows to the chosen elements. The window placement
is computed on the host (eager only).
"""

from __future__ import annotations

import itertools

import numpy as np

import munet
from munet._tensor import Tensor

__all__ = [
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
]


def _tuple(value, n: int, what: str, op: str) -> tuple:
    if value is None:
        return None
    values = (value,) * n if isinstance(value, (int, float)) else tuple(value)
    if len(values) != n:
        raise ValueError(f"{op}: expected {what} of {n} values, got {value}")
    return values


def _starts(sample: np.ndarray, input_size: int, output_size: int, pool_size: int) -> np.ndarray:
    """Window starts for each plane's ``sample`` (PyTorch's ``generate_intervals``): shape ``(planes, O)``."""
    starts = np.empty(sample.shape + (output_size,), dtype=np.int64)
    if output_size > 1:
        alpha = sample.dtype.type(input_size - pool_size) / sample.dtype.type(output_size - 1)
        steps = np.arange(output_size - 1, dtype=sample.dtype)
        starts[..., :-1] = ((steps + sample[..., None]) * alpha).astype(np.int64) - (sample * alpha).astype(np.int64)[
            ..., None
        ]
    if output_size > 0:
        starts[..., -1] = input_size - pool_size
    return starts


def _fractional_max_pool(n: int, input: Tensor, kernel_size, output_size, output_ratio, _random_samples):
    op = f"fractional_max_pool{n}d"
    if input.ndim not in (n + 1, n + 2):
        raise ValueError(f"{op}: expected a {n + 1}D or {n + 2}D input, got shape {list(input.shape)}")
    batched = input.ndim == n + 2
    x = input if batched else input.unsqueeze(0)
    spatial = tuple(x.shape[2:])
    kernel = _tuple(kernel_size, n, "kernel_size", op)
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        ratio = _tuple(output_ratio, n, "output_ratio", op)
        if not all(0 < r < 1 for r in ratio):
            raise ValueError(f"{op}: output_ratio must be between 0 and 1 (got {output_ratio})")
        output_size = tuple(int(s * r) for s, r in zip(spatial, ratio))
    out = _tuple(output_size, n, "output_size", op)
    for s, o, k in zip(spatial, out, kernel):
        if o + k - 1 > s:
            raise RuntimeError(
                f"{op}: kernel_size {kernel} and output_size {out} are too large for input size {spatial}"
            )
    planes, channels = x.shape[0], x.shape[1]
    if _random_samples is None:
        _random_samples = munet.rand(planes, channels, n, dtype=x.dtype, device=x.device)
    samples = _random_samples.detach().cpu().numpy().astype(x.dtype.np)
    if samples.shape != (planes, channels, n):
        raise RuntimeError(
            f"{op}: expected _random_samples of shape {[planes, channels, n]}, got {list(samples.shape)}"
        )
    order = list(range(n)) if n == 3 else [1, 0]  # which sample places the windows of each spatial dim
    starts = [_starts(samples[..., order[d]], spatial[d], out[d], kernel[d]) for d in range(n)]
    strides = [int(np.prod(spatial[d + 1 :])) for d in range(n)]
    # flat input position of every (output position, offset in the window) pair, per plane
    position = np.zeros((planes, channels) + out + (int(np.prod(kernel)),), dtype=np.int64)
    for k, offsets in enumerate(itertools.product(*(range(k) for k in kernel))):
        flat = np.zeros((planes, channels) + out, dtype=np.int64)
        for d in range(n):
            shape = [planes, channels] + [1] * n
            shape[2 + d] = out[d]
            flat = flat + ((starts[d] + offsets[d]) * strides[d]).reshape(shape)
        position[..., k] = flat
    index = munet.tensor(position, device=x.device)
    gathered = x.reshape(planes, channels, -1).gather(2, index.reshape(planes, channels, -1))
    values, arg = gathered.reshape(index.shape).max(-1)
    indices = index.gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    if not batched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return values, indices


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples=None):  # fmt: skip
    """``(output, indices)`` of 2-D fractional max pooling; ``indices`` are flat ``h * W + w`` positions."""
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, _random_samples)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                          _random_samples=None):  # fmt: skip
    """2-D fractional max pooling of (N, C, H, W) or (C, H, W) inputs; ``(output, indices)`` with ``return_indices``."""
    result = _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, _random_samples)
    return result if return_indices else result[0]


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples=None):  # fmt: skip
    """``(output, indices)`` of 3-D fractional max pooling; ``indices`` are flat ``(t * H + h) * W + w`` positions."""
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                          _random_samples=None):  # fmt: skip
    """3-D fractional max pooling of (N, C, T, H, W) or (C, T, H, W) inputs."""
    result = _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, _random_samples)
    return result if return_indices else result[0]
