"""``F.max_unpool1d/2d/3d``: the partial inverse of max pooling, written as one scatter."""

from __future__ import annotations

import munet
from munet._tensor import Tensor

__all__ = ["max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _tuple(value, n: int, what: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n:
        raise ValueError(f"max_unpool{n}d: expected {what} of {n} values, got {value}")
    return value


def unpooled_size(input: Tensor, kernel_size, stride, padding, output_size, n: int) -> tuple[int, ...]:
    """The spatial output size: ``(in - 1) * stride - 2 * padding + kernel``, or ``output_size``
    (which may name the batch and channel dims too) when it lies within one stride of it."""
    kernel = _tuple(kernel_size, n, "kernel_size")
    stride = kernel if stride is None else _tuple(stride, n, "stride")
    padding = _tuple(padding, n, "padding")
    spatial = tuple(input.shape[-n:])
    default = tuple((s - 1) * st - 2 * p + k for s, st, p, k in zip(spatial, stride, padding, kernel))
    if output_size is None:
        return default
    size = tuple(output_size)
    if len(size) == n + 2 or (len(size) == n + 1 and input.ndim == n + 1):
        size = size[-n:]
    if len(size) != n:
        raise ValueError(
            f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a length of '{len(size)}'"
        )
    for d, (want, base, st) in enumerate(zip(size, default, stride)):
        if not base - st < want < base + st:
            raise ValueError(f'invalid output_size "{size}" (dim {d} must be between {base - st} and {base + st})')
    return size


def _max_unpool(input: Tensor, indices: Tensor, kernel_size, stride, padding, output_size, n: int) -> Tensor:
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"max_unpool{n}d: expected input of rank {n + 1} or {n + 2}, got shape {tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(
            f"max_unpool{n}d: expected indices of the input's shape {tuple(input.shape)}, got {tuple(indices.shape)}"
        )
    size = unpooled_size(input, kernel_size, stride, padding, output_size, n)
    lead = tuple(input.shape[:-n])
    planes = input.reshape(*lead, -1)
    volume = 1
    for s in size:
        volume *= s
    out = munet.zeros(*lead, volume, dtype=input.dtype, device=input.device)
    return out.scatter(-1, indices.reshape(*lead, -1), planes).reshape(*lead, *size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """``(N, C, L)`` values placed at the flat ``indices`` of ``max_pool1d(..., return_indices=True)``."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """``(N, C, H, W)`` values placed at the flat ``indices`` of ``max_pool2d(..., return_indices=True)``."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """``(N, C, D, H, W)`` values placed at the flat ``indices`` of ``max_pool3d(..., return_indices=True)``."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3)
