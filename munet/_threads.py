"""``munet.set_num_threads`` / ``get_num_threads``: the CPU backend's BLAS thread count.

NumPy's bundled OpenBLAS is found among the loaded libraries and its thread-count setter is
called directly, so the setting takes effect at once (``OPENBLAS_NUM_THREADS`` only works
before NumPy is imported). On a busy machine, fewer threads than cores avoids spin-waiting
BLAS threads, which can make small matrix products two orders of magnitude slower.
"""

from __future__ import annotations

import ctypes
import os
import re

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
            "openblas_set_num_threads")  # fmt: skip
_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads64_",
            "openblas_get_num_threads")  # fmt: skip


def _openblas():
    """The loaded OpenBLAS library (NumPy's), or None when it cannot be found."""
    import numpy  # noqa: F401 - makes sure NumPy's BLAS is loaded

    try:
        with open("/proc/self/maps") as f:
            paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", f.read())))
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(lib, n) for n in _SETTERS if hasattr(lib, n)), None)
        getter = next((getattr(lib, n) for n in _GETTERS if hasattr(lib, n)), None)
        if setter is not None and getter is not None:
            return setter, getter
    return None


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for the CPU backend's BLAS calls (matmul, convolution)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    blas = _openblas()
    if blas is None:
        raise RuntimeError(
            "set_num_threads: NumPy's OpenBLAS library was not found in this process; set OPENBLAS_NUM_THREADS "
            "before starting Python instead"
        )
    blas[0](ctypes.c_int(n))


def get_num_threads() -> int:
    """The CPU backend's BLAS thread count."""
    blas = _openblas()
    if blas is None:
        return int(os.environ.get("OPENBLAS_NUM_THREADS", os.cpu_count() or 1))
    return int(blas[1]())
