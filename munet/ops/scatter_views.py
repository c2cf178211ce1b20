"""The ``*_scatter`` ops of PyTorch's views: ``select_scatter``, ``slice_scatter`` and
``diagonal_scatter`` return a copy of ``input`` whose view region is ``src``.

Each one is ``as_strided_scatter`` with the view's sizes, strides and offset on ``input``'s
row-major layout, so forward, gradients (to ``input`` outside the region, to ``src`` inside it)
and every device come from that one op."""

from __future__ import annotations

from munet.ops._utils import wrap_dim
from munet.ops.view import as_strided_scatter

__all__ = ["select_scatter", "slice_scatter", "diagonal_scatter"]
__tensor_methods__ = ["select_scatter", "slice_scatter", "diagonal_scatter"]


def _row_major_strides(shape) -> list:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def _scatter(name: str, input, src, size, stride, offset: int):
    if tuple(src.shape) != tuple(size):
        raise RuntimeError(f"{name}: expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(size)}")  # fmt: skip
    return as_strided_scatter(input, src, tuple(size), tuple(stride), offset)


def select_scatter(input, src, dim: int, index: int):
    """``input`` with ``input.select(dim, index)`` replaced by ``src``."""
    if input.ndim == 0:
        raise IndexError("select_scatter: select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, input.ndim, "select_scatter")
    n = input.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select_scatter: index {index} out of range for tensor of size {list(input.shape)} "
                         f"at dimension {d}")  # fmt: skip
    index %= n
    strides = _row_major_strides(input.shape)
    size = [s for i, s in enumerate(input.shape) if i != d]
    stride = [s for i, s in enumerate(strides) if i != d]
    return _scatter("select_scatter", input, src, size, stride, index * strides[d])


def slice_scatter(input, src, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1):
    """``input`` with ``input[..., start:end:step, ...]`` (along ``dim``) replaced by ``src``."""
    if step <= 0:
        raise RuntimeError(f"slice_scatter: slice step must be positive, got {step}")
    d = wrap_dim(dim, max(input.ndim, 1), "slice_scatter")
    start, end, _ = slice(start, end, step).indices(input.shape[d])
    length = max(0, (end - start + step - 1) // step)
    strides = _row_major_strides(input.shape)
    size = list(input.shape)
    size[d] = length
    stride = list(strides)
    stride[d] = strides[d] * step
    return _scatter("slice_scatter", input, src, size, stride, start * strides[d] if length else 0)


def diagonal_scatter(input, src, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """``input`` with ``input.diagonal(offset, dim1, dim2)`` replaced by ``src``."""
    d1 = wrap_dim(dim1, input.ndim, "diagonal_scatter")
    d2 = wrap_dim(dim2, input.ndim, "diagonal_scatter")
    if d1 == d2:
        raise RuntimeError(f"diagonal_scatter: diagonal dimensions cannot be identical {dim1}, {dim2}")
    strides = _row_major_strides(input.shape)
    if offset >= 0:
        length = max(0, min(input.shape[d1], input.shape[d2] - offset))
        start = offset * strides[d2]
    else:
        length = max(0, min(input.shape[d1] + offset, input.shape[d2]))
        start = -offset * strides[d1]
    size = [s for i, s in enumerate(input.shape) if i not in (d1, d2)] + [length]
    stride = [s for i, s in enumerate(strides) if i not in (d1, d2)] + [strides[d1] + strides[d2]]
    return _scatter("diagonal_scatter", input, src, size, stride, start if length else 0)
