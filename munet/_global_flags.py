"""PyTorch's process-wide switches and build facts at ``munet.*``.

- ``set_float32_matmul_precision("highest" | "high" | "medium")``: "high" and "medium" let float32
  matmuls on cuda use TF32 (they set ``munet.backends.cuda.matmul.allow_tf32``, as in PyTorch);
  cpu and vulkan matmuls are always full float32. Setting ``allow_tf32`` directly is reflected by
  ``get_float32_matmul_precision``.
- ``set_flush_denormal(mode)``: sets the FTZ and DAZ bits of the x86 SSE control register of the
  calling thread (threads it starts later inherit them), so subnormal float32/float64 results and
  inputs of the NumPy and generated-C kernels run there become zero; returns False (and changes
  nothing) where the CPU or the C library does not allow it, as PyTorch does.
- ``set_warn_always``/``is_warn_always_enabled``: recorded. MuNet emits every warning through
  Python's ``warnings`` module at each occurrence (it has no warn-once paths), so Python's
  warning filters alone decide what is shown.
- ``set_num_interop_threads``/``get_num_interop_threads``: recorded, as PyTorch's setter, callable
  once; MuNet runs ops one after another in the calling thread and has no inter-op pool, so the
  value changes nothing (the intra-op budget is ``set_num_threads``).
- ``has_lapack``, ``has_mkl``, ``has_spectral``: what this MuNet uses, read at import (NumPy's
  LAPACK; whether NumPy's BLAS is MKL; whether ``munet.fft`` exists). Whether the generated kernels
  use OpenMP depends on the C compiler found at run time: ``munet.backends.openmp.is_available()``
  answers it (there is no ``has_openmp``, which would have to probe the compiler at import).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import importlib.util
import platform

_PRECISIONS = ("highest", "high", "medium")
_precision = ["highest"]
_warn_always = [False]
_interop: list = []  # [n] once set
# x86 MXCSR bits: FTZ (flush results to zero) and DAZ (read subnormal inputs as zero)
_MXCSR_FTZ_DAZ = 0x8040


def set_float32_matmul_precision(precision: str) -> None:
    """Internal precision of float32 matmuls: "highest" (float32), "high"/"medium" (TF32 on cuda)."""
    from munet.backends.cuda import matmul

    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: expected one of {list(_PRECISIONS)}, got {precision!r}")
    _precision[0] = precision
    matmul.allow_tf32 = precision != "highest"


def get_float32_matmul_precision() -> str:
    from munet.backends.cuda import matmul

    if matmul.allow_tf32 == (_precision[0] != "highest"):
        return _precision[0]
    return "high" if matmul.allow_tf32 else "highest"


def set_warn_always(b: bool) -> None:
    """Recorded for ``is_warn_always_enabled``; MuNet warns at every occurrence regardless."""
    _warn_always[0] = bool(b)


def is_warn_always_enabled() -> bool:
    return _warn_always[0]


class _FpMode(ctypes.Structure):
    """glibc's ``femode_t`` on x86-64: the x87 control word and the SSE control register."""

    _fields_ = [("control_word", ctypes.c_ushort), ("reserved", ctypes.c_ushort), ("mxcsr", ctypes.c_uint)]


@functools.cache
def _libm():
    """The C math library's (fegetmode, fesetmode), or None off x86-64 or without them."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    name = ctypes.util.find_library("m")
    try:
        lib = ctypes.CDLL(name)
        return lib.fegetmode, lib.fesetmode
    except (OSError, AttributeError, TypeError):
        return None


def set_flush_denormal(mode: bool) -> bool:
    """Flush subnormal floats to zero in this thread (``mode=True``) or stop (False). True when set.

    >>> munet.set_flush_denormal(True)
    True
    >>> munet.tensor([1e-323], dtype=munet.float64) * 1
    tensor([0.], dtype=munet.float64)
    """
    functions = _libm()
    if functions is None:
        return False
    get_mode, set_mode = functions
    fp = _FpMode()
    if get_mode(ctypes.byref(fp)) != 0:
        return False
    fp.mxcsr = (fp.mxcsr | _MXCSR_FTZ_DAZ) if mode else (fp.mxcsr & ~_MXCSR_FTZ_DAZ)
    return set_mode(ctypes.byref(fp)) == 0


def set_num_interop_threads(num: int) -> None:
    """Recorded (once, as PyTorch allows); MuNet has no inter-op thread pool to size."""
    if not isinstance(num, int) or isinstance(num, bool) or num < 1:
        raise RuntimeError(f"Expected positive number of threads, got {num!r}")
    if _interop:
        raise RuntimeError(
            "Error: cannot set number of interop threads after parallel work has started or "
            "set_num_interop_threads called"
        )
    _interop.append(num)


def get_num_interop_threads() -> int:
    """The recorded count; by default 1, the one thread MuNet runs ops on."""
    return _interop[0] if _interop else 1


def init_num_threads() -> None:
    """Set up the intra-op thread budget now (MuNet otherwise does it at the first kernel)."""
    from munet._threads import get_num_threads

    get_num_threads()


def _numpy_blas_name() -> str:
    import numpy as np

    try:
        return str(np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"])
    except (TypeError, KeyError, AttributeError):
        return ""


has_lapack = True  # munet.linalg's factorizations are NumPy's LAPACK
has_mkl = "mkl" in _numpy_blas_name().lower()
has_spectral = importlib.util.find_spec("munet.fft") is not None
