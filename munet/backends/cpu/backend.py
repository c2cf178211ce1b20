"""CPU device: memory, host transfer and the kernel table.

A storage buffer is a flat NumPy array; a tensor's data is a strided ``numpy.ndarray`` view
of it. Kernels (``kernels_*.py``) take those views and return new arrays; in-place kernels
(named ``op_``) write into their first argument.
"""

from __future__ import annotations

import numpy as np

from munet._device import device
from munet.backends.cpu import (
    host_memory,
    kernels_core,  # noqa: F401 - registers kernels
)
from munet.backends.cpu.registry import KERNELS, load_kernel_modules

host_memory.configure()

# (strides in elements, itemsize) -> strides in bytes: a view of a layout met before costs one lookup
_BYTE_STRIDES: dict[tuple, tuple] = {}


def _byte_strides(stride, itemsize: int) -> tuple:
    strides = tuple([s * itemsize for s in stride])
    if type(stride) is tuple and len(_BYTE_STRIDES) < 4096:
        _BYTE_STRIDES[stride, itemsize] = strides
    return strides


class CpuBackend:
    """The ``cpu`` device (NumPy)."""

    def __init__(self, index: int = 0):
        self.device = device("cpu")
        load_kernel_modules()
        self.kernels = KERNELS

    # memory -------------------------------------------------------------------------------
    def empty(self, numel: int, dtype) -> np.ndarray:
        return np.empty(numel, dtype.np)

    def view(self, buffer: np.ndarray, shape, stride, offset: int, dtype=None) -> np.ndarray:
        """``buffer``'s elements at ``offset + sum(i * stride)``, read as ``dtype`` (the buffer's own
        type unless a ``view(dtype)`` reinterprets it: geometry is then in elements of ``dtype``)."""
        if dtype is None:
            np_dtype = buffer.dtype
            itemsize = np_dtype.itemsize
        else:
            np_dtype = dtype.np
            itemsize = dtype.itemsize
        if 0 in shape:
            offset = 0  # an empty view may start past the end of its storage, as in PyTorch
        strides = _BYTE_STRIDES.get((stride, itemsize)) if type(stride) is tuple else None
        if strides is None:
            strides = _byte_strides(stride, itemsize)
        # positional arguments and a tuple of strides: keywords cost more than the view itself
        return np.ndarray(shape, np_dtype, buffer, offset * itemsize, strides)

    def wrap(self, array, np_dtype):
        """A kernel result as ``(buffer, strides, data)``; copies only when it must."""
        if type(array) is not np.ndarray:
            array = np.asarray(array)
        if array.dtype is not np_dtype and array.dtype != np_dtype:  # NumPy's builtin dtypes are singletons
            array = array.astype(np_dtype)
        flags = array.flags
        if not flags.writeable:
            array = array.copy()
            flags = array.flags
        if flags.c_contiguous:
            return array.ravel(), None, array  # (a view: the array is C-contiguous)
        if flags.f_contiguous:
            itemsize = array.itemsize
            return array.ravel(order="K"), tuple(s // itemsize for s in array.strides), array
        array = np.ascontiguousarray(array)
        return array.reshape(-1), None, array

    def copy_(self, dst: np.ndarray, src) -> None:
        np.copyto(dst, src, casting="unsafe")

    def data_ptr(self, buffer: np.ndarray) -> int:
        return buffer.ctypes.data

    # host transfer ------------------------------------------------------------------------
    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_numpy(self, data: np.ndarray) -> np.ndarray:
        return data

    def synchronize(self) -> None:
        return None


def _list_devices():
    return [(0, "NumPy " + np.__version__, "CPU")]
