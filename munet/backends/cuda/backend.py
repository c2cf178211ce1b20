"""The ``cuda:N`` device: the backend contract over CuPy.

A storage's buffer is a flat ``cupy.ndarray`` allocated from the device's pool (``memory.py``); a
tensor's data is a strided ``cupy.ndarray`` view of it (bfloat16 as its uint16 bits, see
``copies.py``). Every method that touches the device runs in the device's :class:`DeviceScope`, so
an allocation, copy or launch lands on the tensor's own device whatever device the calling thread
has current, and kernels from the table (``registry.py``) are bound to run there too.
"""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError, device
from munet.backends.bound_kernels import BoundKernels
from munet.backends.cuda import copies, pinned
from munet.backends.cuda.device_asserts import DeviceAsserts
from munet.backends.cuda.discovery import cupy_module
from munet.backends.cuda.memory import Allocator
from munet.backends.cuda.registry import KERNELS

_DLPACK_CUDA = 2  # kDLCUDA


class CudaRuntime:
    """What a kernel gets as ``rt``: the device's CuPy, pool and current stream."""

    def __init__(self, index: int):
        self.index = index
        self.label = f"cuda:{index}"
        self.cupy = cupy_module()
        self.allocator = Allocator(self.cupy, index, self.label)
        self.asserts = DeviceAsserts(self)

    def scope(self):
        """``with rt.scope():`` makes this device current and its pool CuPy's allocator."""
        return self.allocator.scope()

    @property
    def stream(self):
        """The device's current ``cupy.cuda.Stream`` in this thread (launch kernels on it)."""
        return self.cupy.cuda.get_current_stream(self.index)

    def empty(self, shape, dtype):
        """A fresh C-contiguous array of MuNet ``dtype`` on this device (call within ``scope()``)."""
        return self.cupy.empty(tuple(shape), copies.storage_dtype(dtype))

    def synchronize(self) -> None:
        """Wait for every stream of the device, then raise a device-side assert it recorded."""
        self.cupy.cuda.Device(self.index).synchronize()
        self.asserts.check()


class CudaBackend:
    """One CUDA device as a MuNet device (``cuda:N``)."""

    complex_dtypes = True  # complex64/complex128 storage, copies and casts (CuPy's complex types)

    def __init__(self, index: int):
        self.device = device("cuda", index)
        self.runtime = rt = CudaRuntime(index)
        self.cupy = rt.cupy
        self.kernels = BoundKernels(KERNELS, _bind, rt)

    # memory -------------------------------------------------------------------------------------
    def empty(self, numel: int, dtype):
        with self.runtime.scope():
            return self.runtime.empty((numel,), dtype)

    def view(self, buffer, shape, stride, offset: int, dtype=None):
        """``buffer``'s elements at ``offset + sum(i * stride)``, read as ``dtype`` (the buffer's own
        type unless a view reinterprets it, as ``view_as_real``: geometry is then in elements of ``dtype``)."""
        element = buffer.dtype if dtype is None else copies.storage_dtype(dtype)
        itemsize = element.itemsize
        if 0 in shape:
            offset = 0  # an empty view may start past the end of its storage, as in PyTorch
        memptr = buffer.data + offset * itemsize if buffer.size else buffer.data
        return self.cupy.ndarray(tuple(shape), element, memptr, tuple(s * itemsize for s in stride))

    def wrap(self, raw, np_dtype):
        """A kernel result as ``(buffer, strides, data)``; casts when the op declared another dtype."""
        cp = self.cupy
        wanted = copies.host_dtype(np_dtype)
        if (
            isinstance(raw, cp.ndarray)
            and raw.dtype == wanted
            and raw.flags.c_contiguous
            and raw.device.id == self.runtime.index
        ):
            return raw.reshape(-1), None, raw  # the common case: nothing to allocate, no device scope
        with self.runtime.scope():
            if not isinstance(raw, cp.ndarray):
                host = np.asarray(raw, dtype=np_dtype)
                raw = copies.from_host(cp, host).reshape(host.shape)
            elif raw.device.id != self.runtime.index:
                raise DeviceError(f"internal error: a {self.device} kernel returned an array on cuda:{raw.device.id}")
            if raw.dtype != wanted:
                raw = copies.cast(cp, raw, D.from_numpy_dtype(np.dtype(np_dtype)))
            if not raw.flags.c_contiguous:
                raw = cp.ascontiguousarray(raw)
        return raw.reshape(-1), None, raw

    def copy_(self, dst, src) -> None:
        with self.runtime.scope():
            copies.copy_into(self.cupy, dst, src)

    def data_ptr(self, buffer) -> int:
        return buffer.data.ptr

    def dtype_of(self, data):
        """The MuNet dtype of a cuda array (uint16 holds bfloat16)."""
        return copies.dtype_of(data)

    # host transfer ------------------------------------------------------------------------------
    non_blocking_copies = True  # from_numpy/to_numpy take ``non_blocking`` (copies.py)

    def from_numpy(self, array: np.ndarray, non_blocking: bool = False):
        with self.runtime.scope():
            return copies.from_host(self.cupy, array, non_blocking)

    def to_numpy(self, data, non_blocking: bool = False) -> np.ndarray:
        with self.runtime.scope():
            host = copies.to_host(self.cupy, data, non_blocking)
        if not non_blocking:  # a non-blocking copy reports a device-side assert at the next synchronization
            self.runtime.asserts.check()  # a device-side assert of the kernels before the read raises here
        return host

    def pin(self, array: np.ndarray) -> np.ndarray:
        """A copy of host ``array`` in pinned memory (``Tensor.pin_memory``)."""
        return pinned.copy_of(self.cupy, array)

    def is_pinned(self, array: np.ndarray) -> bool:
        """Whether host ``array`` lies in pinned memory (``Tensor.is_pinned``)."""
        return pinned.holds(self.cupy, array)

    def receive(self, source, data):
        """``data`` of another backend as a flat buffer here without a host round trip, or None
        when only the host path exists (the source is not a CUDA device)."""
        if not isinstance(source, CudaBackend) or source is self:
            return None
        return copies.copy_between_devices(self.cupy, source.runtime.scope(), self.runtime.scope(), data)

    def synchronize(self) -> None:
        self.runtime.synchronize()

    # DLPack -------------------------------------------------------------------------------------
    def dlpack_device(self) -> tuple[int, int]:
        return (_DLPACK_CUDA, self.runtime.index)

    def to_dlpack(self, data, stream=None, **kwargs):
        """A DLPack capsule of ``data`` (the consumer's ``stream`` waits for this device's current one)."""
        if copies.dtype_of(data) is D.bfloat16:
            raise RuntimeError("__dlpack__: CuPy cannot export bfloat16 through DLPack; cast with .float() first")
        with self.runtime.scope():
            return data.__dlpack__(stream=stream, **kwargs)

    def from_dlpack(self, ext):
        """``(buffer, shape, stride, data)`` sharing ``ext``'s memory on this device."""
        cp = self.cupy
        with self.runtime.scope():
            array = cp.from_dlpack(ext)
        if array.dtype == np.uint16:  # uint16 data means bfloat16 on this backend: refuse a real uint16
            raise TypeError("from_dlpack: MuNet has no uint16 dtype")
        itemsize = array.itemsize
        if array.size and any(s < 0 or s % itemsize for s in array.strides):
            raise ValueError("from_dlpack: arrays with negative or unaligned strides are not supported; pass a copy")
        stride = tuple(s // itemsize for s in array.strides)
        extent = 1 + sum((n - 1) * s for n, s in zip(array.shape, stride)) if array.size else 0
        buffer = cp.ndarray((extent,), array.dtype, array.data, (itemsize,))
        return buffer, array.shape, stride, array


def _bind(fn, rt: CudaRuntime):
    def run(*args, **attrs):
        with rt.scope():
            return fn(rt, *args, **attrs)

    run.__name__ = getattr(fn, "__name__", "kernel")
    return run
