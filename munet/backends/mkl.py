"""``munet.backends.mkl``: whether NumPy's BLAS (which runs MuNet's cpu matmuls) is Intel's oneMKL,
and PyTorch's ``verbose`` switch for it (MKL's own ``mkl_verbose``, found in the loaded library)."""

from __future__ import annotations

import ctypes
import functools
import re

VERBOSE_OFF = 0
VERBOSE_ON = 1


def is_available() -> bool:
    from munet._global_flags import has_mkl

    return has_mkl


@functools.cache
def _mkl_verbose():
    try:
        with open("/proc/self/maps") as f:
            paths = sorted(set(re.findall(r"(/\S*mkl\S*\.so\S*)", f.read())))
    except OSError:
        return None
    for path in paths:
        lib = ctypes.CDLL(path)
        if hasattr(lib, "mkl_verbose"):
            return lib.mkl_verbose
    return None


class verbose:  # noqa: N801 - PyTorch's name
    """``with munet.backends.mkl.verbose(munet.backends.mkl.VERBOSE_ON):`` makes MKL log its calls."""

    def __init__(self, enable: int):
        self.enable = enable

    def __enter__(self):
        if self.enable == VERBOSE_OFF:
            return self
        setter = _mkl_verbose() if is_available() else None
        if setter is None:
            raise RuntimeError("mkl.verbose: NumPy's BLAS is not oneMKL here, so MKL verbose mode is unavailable")
        setter(ctypes.c_int(self.enable))
        return self

    def __exit__(self, *exc) -> bool:
        if self.enable != VERBOSE_OFF and is_available() and _mkl_verbose() is not None:
            _mkl_verbose()(ctypes.c_int(VERBOSE_OFF))
        return False
