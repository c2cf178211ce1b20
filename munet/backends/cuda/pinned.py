"""Page-locked (pinned) host memory for cuda transfers, from CuPy's pinned memory pool.

A pinned array is a NumPy array over a ``cupy.cuda.PinnedMemoryPointer`` (what
``cupyx.empty_pinned`` makes): the DMA engine reads and writes it directly, so a copy from or to it
can run asynchronously on a stream, and it is faster than pageable memory, which the driver stages.
CuPy's pool keeps freed blocks for reuse, as PyTorch's caching host allocator does.

``Tensor.pin_memory()`` copies a cpu tensor into such an array; ``Tensor.is_pinned()`` asks
:func:`holds`; ``copies.from_host``/``to_host`` take the asynchronous path for a ``non_blocking``
transfer (see ``docs/cuda.md``, "Host transfers").
"""

from __future__ import annotations

import math

import numpy as np


def empty(cp, shape, np_dtype) -> np.ndarray:
    """A C-contiguous host array of ``shape``/``np_dtype`` in pinned memory from CuPy's pool."""
    dtype = np.dtype(np_dtype)
    memory = cp.cuda.alloc_pinned_memory(max(math.prod(shape) * dtype.itemsize, 1))
    return np.ndarray(tuple(shape), dtype, buffer=memory)


def copy_of(cp, array: np.ndarray) -> np.ndarray:
    """A pinned C-contiguous copy of host ``array``."""
    out = empty(cp, array.shape, array.dtype)
    np.copyto(out, array)
    return out


def holds(cp, array) -> bool:
    """Whether host ``array`` (or the array it views) lies in pinned memory from CuPy."""
    pinned = cp.cuda.PinnedMemoryPointer
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, pinned)
