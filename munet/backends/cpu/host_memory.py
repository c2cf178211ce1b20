"""glibc's malloc keeps the memory of freed tensors for the next ones, instead of returning it.

An eager step allocates and frees the same large arrays every iteration (a layer's output, its
gradient). By default glibc serves blocks above a threshold (128 KiB, raised on the fly up to 32
MiB) from fresh ``mmap`` regions, gives them back on ``free``, and trims free memory at the heap's
top beyond twice that threshold; the next step's array of the same size then starts from fresh
pages, and writing it faults every page in again. On the project's VM a fault costs ~7 us a page:
writing a fresh 9.4 MB array takes 16 ms, a reused one 0.15 ms, so a conv layer's eager forward and
backward went 20.9 -> 14.7 ms and the CNN's eager training step 33 -> 22 ms with the settings below
(docs/perf/eager.md).

:func:`configure` sets the mmap threshold to glibc's largest (32 MiB: bigger blocks still come from
``mmap``) and the trim threshold to ``TRIM_BYTES``, so up to that much freed memory stays in the
process for reuse, as a caching allocator's does. It does nothing off glibc, or where the user set
glibc's own ``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` or ``MUNET_MALLOC_TUNING=0``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_BYTES = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_BYTES = 256 << 20


def configure() -> bool:
    """Apply the settings above once per process; whether they were applied."""
    if os.environ.get("MUNET_MALLOC_TUNING", "1") == "0":
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False  # the user's own glibc tuning
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS, Windows): their allocators as they are
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_BYTES))
