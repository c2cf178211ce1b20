"""Index arithmetic on integer tensors: ``unravel_index`` (flat positions to coordinates) and
``nonzero_static`` (``nonzero`` padded or cut to a fixed number of rows, so its shape does not
depend on the data)."""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet.ops.elementwise import where

__all__ = ["unravel_index", "nonzero_static"]
__tensor_methods__ = ["nonzero_static"]


def unravel_index(indices, shape):
    """The coordinates in a row-major tensor of ``shape`` of each flat position in ``indices``
    (negative positions count from the end): a tuple of int64 tensors shaped like ``indices``."""
    if indices.dtype.is_floating_point or indices.dtype is D.bool_:
        raise TypeError(f"unravel_index: expected 'indices' to be an integer tensor, but got {indices.dtype.name}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, but got {shape}")
    numel = int(np.prod(shape))
    flat = indices.to(D.int64)
    if flat.numel() and bool(((flat < -numel) | (flat >= numel)).any()):
        raise RuntimeError(f"unravel_index: index out of bounds for a tensor of shape {list(shape)}")
    flat = where(flat < 0, flat + numel, flat)
    coordinates = []
    for size in reversed(shape):
        coordinates.append(flat.remainder(size))
        flat = flat.div(size, rounding_mode="floor")
    return tuple(reversed(coordinates))


def nonzero_static(input, *, size: int, fill_value: int = -1):
    """The first ``size`` rows of ``nonzero(input)``, padded with rows of ``fill_value`` to ``size``."""
    import munet

    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got {size}")
    found = input.nonzero()
    rows = found.shape[0]
    if rows >= size:
        return found[:size]
    fill = munet.full((size - rows, input.ndim), fill_value, dtype=D.int64, device=input.device)
    return munet.cat([found, fill], 0)
