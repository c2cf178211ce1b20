"""Shared-memory blocks for ``Tensor.share_memory_()``: a POSIX shared-memory segment per storage.

The process that moves a storage into shared memory owns the segment and unlinks its name when
the storage is garbage-collected; processes that receive the tensor through ``multiprocessing``
(a ``Queue``, ``Process`` arguments under the spawn start method, a DataLoader worker's result)
attach to the same segment, so writes are seen by all of them. Forked children share the mapping
without any pickling. A plain ``pickle.dumps`` still holds the values (see ``Tensor.__reduce_ex__``).
"""

from __future__ import annotations

import weakref
from multiprocessing import shared_memory

import numpy as np


class SharedBlock:
    """One shared-memory segment viewed as a flat array of ``numel`` elements of ``np_dtype``."""

    def __init__(self, segment: shared_memory.SharedMemory, numel: int, np_dtype, owner: bool):
        self.segment = segment
        self.name = segment.name
        self.array = np.ndarray((numel,), dtype=np_dtype, buffer=segment.buf)
        if owner:
            weakref.finalize(self, _unlink, segment)

    def __reduce__(self):
        raise TypeError("a shared-memory block travels as its name (munet._shared_memory.attach), not pickled")


def _unlink(segment: shared_memory.SharedMemory) -> None:
    try:
        segment.unlink()
    except FileNotFoundError:
        pass


def allocate(values: np.ndarray) -> SharedBlock:
    """A new segment holding a copy of the flat array ``values``; this process owns it."""
    segment = shared_memory.SharedMemory(create=True, size=max(1, values.nbytes))
    block = SharedBlock(segment, values.shape[0], values.dtype, owner=True)
    block.array[...] = values
    return block


def attach(name: str, numel: int, np_dtype) -> SharedBlock:
    """The segment ``name`` that another process of this job allocated."""
    return SharedBlock(shared_memory.SharedMemory(name=name), numel, np.dtype(np_dtype), owner=False)
