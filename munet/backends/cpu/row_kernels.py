"""The cpu's eager row kernels as compiled C: softmax, its gradient and ``standardize`` along the last dim.

Each function returns its kernel's result, or None when C cannot serve the call and the caller's
NumPy kernel runs: no C compiler (or ``MUNET_EAGER_C=0``, as for the formula kernels), a dtype other
than float32, a reduced dim other than the last one, an operand that is not C-contiguous, or fewer
than :data:`MIN_ELEMENTS` elements (a launch costs more than NumPy's passes over a tensor that
small). The C (``munet/compiler/codegen/c_rows.py``) computes what the NumPy kernels compute, one
sweep per row, on the thread budget's OpenMP team.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from munet import _threads
from munet.backends.cpu import compiled_formula
from munet.compiler.codegen import build
from munet.compiler.codegen.c_rows import render_rows

# Below this many elements the NumPy kernels run (tests set it to 0 to reach the C on small inputs)
MIN_ELEMENTS = 8192
_F32 = np.dtype(np.float32)
_P, _N = ctypes.c_void_p, ctypes.c_int64


@functools.cache
def _library(compiler):
    """The row kernels built by ``compiler`` (``build.find_compiler()``), their argument types set."""
    lib, _ = build.load_library(render_rows(), "munet_rows_softmax", what="munet: the eager row kernels")
    lib.munet_rows_softmax.argtypes = [_P, _P, _N, _N, _N]
    lib.munet_rows_softmax_backward.argtypes = [_P, _P, _P, _N, _N, _N]
    lib.munet_rows_standardize.argtypes = [_P, _P, _P, _N, _N, ctypes.c_float, _N, _N]
    for fn in (lib.munet_rows_softmax, lib.munet_rows_softmax_backward, lib.munet_rows_standardize):
        fn.restype = None
    return lib


def _served(dim, *arrays):
    """The library when C serves rows along ``dim`` of ``arrays`` (one shape), else None."""
    x = arrays[0]
    if x.size < MIN_ELEMENTS or dim not in (-1, x.ndim - 1):
        return None
    for a in arrays:
        if a.dtype != _F32 or not a.flags.c_contiguous or a.shape != x.shape:
            return None
    if not compiled_formula.enabled():
        return None
    try:
        return _library(build.find_compiler())
    except (build.CompilerUnavailableError, RuntimeError, OSError):
        return None


def softmax(x: np.ndarray, dim: int) -> np.ndarray | None:
    """``exp(x - max) / sum(exp(x - max))`` along ``dim``, or None."""
    lib = _served(dim, x)
    if lib is None:
        return None
    y = np.empty_like(x)
    n = x.shape[-1]
    lib.munet_rows_softmax(x.ctypes.data, y.ctypes.data, x.size // n, n, _threads.kernel_threads())
    return y


def softmax_backward(grad: np.ndarray, y: np.ndarray, dim: int) -> np.ndarray | None:
    """``grad * y - y * sum(grad * y)`` along ``dim`` (softmax's input gradient from its output ``y``), or None."""
    lib = _served(dim, grad, y)
    if lib is None:
        return None
    dx = np.empty_like(y)
    n = y.shape[-1]
    lib.munet_rows_softmax_backward(
        grad.ctypes.data, y.ctypes.data, dx.ctypes.data, y.size // n, n, _threads.kernel_threads()
    )
    return dx


def standardize(x: np.ndarray, dims: tuple, eps: float, center: bool) -> tuple | None:
    """``((x - mean) * rstd, rstd)`` over the last dim (``x * rstd`` without ``center``), or None."""
    if len(dims) != 1:
        return None
    lib = _served(dims[0], x)
    if lib is None:
        return None
    n = x.shape[-1]
    xhat = np.empty_like(x)
    rstd = np.empty((*x.shape[:-1], 1), _F32)
    lib.munet_rows_standardize(
        x.ctypes.data, xhat.ctypes.data, rstd.ctypes.data, x.size // n, n, eps, int(center), _threads.kernel_threads()
    )
    return xhat, rstd
