"""Reusable temporaries for cpu kernels that work in cache-sized blocks.

A kernel asks ``work(role, shape, dtype)`` for an uninitialized array it uses only during the
call and never returns; the memory is kept per role and thread and reused by the next call.
Fresh multi-megabyte NumPy arrays on every call cost page faults that, on the loaded VMs of
docs/perf/cpu.md, rival the copies themselves. Temporaries above ``LIMIT`` bytes are allocated
per call instead of being kept; ``release()`` drops this thread's pool.
"""

from __future__ import annotations

import math
import threading

import numpy as np

LIMIT = 8 << 20  # at most a few roles are in use, so a thread keeps a few times this
_local = threading.local()


def work(role: str, shape, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array of ``shape``, valid until the next ``work(role, ...)``
    in this thread (two live temporaries of one call need two roles)."""
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if size > LIMIT:
        return np.empty(shape, dtype)
    pool = _local.__dict__.setdefault("pool", {})
    buf = pool.get(role)
    if buf is None or buf.size < size:
        buf = pool[role] = np.empty(max(size, 1 << 16), np.uint8)
    return buf[:size].view(dtype).reshape(shape)


def release() -> None:
    """Free this thread's kept temporaries (the next kernel call allocates them again)."""
    _local.__dict__.pop("pool", None)
