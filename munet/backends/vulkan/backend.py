"""The ``vulkan`` and ``webgpu`` devices: the backend contract over a wgpu runtime.

A storage's buffer is a :class:`DeviceBuffer`; a tensor's data is a :class:`VkView`
descriptor over it. Host transfers read back exactly the elements of the view asked for.
int64 tensors are held as int32 (values are range-checked on upload); bool as u32 0/1;
float16 as f16 (2 bytes; transfers are padded to the 4-byte granularity of wgpu's copies).

``reset()`` replaces the runtime (a lost device comes back) and counts ``generation``; the
backend object, and so the device identity of tensors, stays the same, and a tensor made before
the reset raises ``DeviceLostError`` when used (``Runtime.check_owned``) unless ``restore``
gave its buffer fresh memory holding host data.
"""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet._device import device
from munet.backends.bound_kernels import BoundKernels
from munet.backends.vulkan import adapters
from munet.backends.vulkan.copies import cast_to, contiguous, copy_into
from munet.backends.vulkan.registry import KERNELS
from munet.backends.vulkan.runtime import Runtime
from munet.backends.vulkan.views import INT32_MAX, INT32_MIN, VkView, element_type, storage_type

_HOST = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32}


class VulkanBackend:
    """One wgpu adapter as a MuNet device (``vulkan:N`` or ``webgpu:N``)."""

    def __init__(self, device_type: str, index: int):
        self.device = device(device_type, index)
        self.generation = 0
        self._open()

    def _open(self) -> None:
        adapter = adapters.adapters_for(self.device.type)[self.device.index]
        self.runtime = rt = Runtime(adapter, str(self.device), self.generation)
        self.kernels = BoundKernels(KERNELS, _bind, rt)

    def reset(self) -> None:
        """Close the runtime (lost or not: its pending work and tensors are dropped) and open a new
        wgpu device on the same adapter; ``generation`` goes up by one."""
        old = self.runtime
        with old.lock:  # other threads' device work on the old runtime ends first
            if self.runtime is not old:  # another thread reset it meanwhile
                return
            old.close(f"closed by a reset of {self.device}")
            self.generation += 1
            self._open()

    def read_storage(self, buffer) -> np.ndarray:
        """Every element of ``buffer`` on the host (what ``restore`` puts back after a reset)."""
        return self.to_numpy(VkView(buffer, (buffer.numel,), (1,), 0, buffer.dtype))

    def restore(self, buffer, array: np.ndarray) -> None:
        """Give ``buffer``, made before a reset, fresh memory on this runtime holding ``array``
        (its flat contents, as ``read_storage`` returned them): every view over it works again."""
        self.runtime.allocator.adopt(buffer)
        self._upload(buffer, array)

    # memory -------------------------------------------------------------------------------------
    def empty(self, numel: int, dtype):
        storage_type(dtype, "empty")
        return self.runtime.allocator.allocate(numel, dtype)

    def view(self, buffer, shape, stride, offset: int, dtype=None) -> VkView:
        return VkView(buffer, shape, stride, offset, dtype or buffer.dtype)

    def wrap(self, raw, np_dtype):
        """A kernel result as ``(buffer, strides, data)``; casts when the op declared another dtype."""
        if not isinstance(raw, VkView):
            array = np.asarray(raw, dtype=np_dtype)
            buffer = self.from_numpy(np.ascontiguousarray(array).reshape(-1))
            raw = VkView(buffer, array.shape, tuple(s // array.itemsize for s in array.strides), 0, buffer.dtype)
        dtype = D.from_numpy_dtype(np.dtype(np_dtype))
        if raw.dtype is not dtype:
            if element_type(raw.dtype) == element_type(dtype):  # int32 <-> int64: same representation
                raw = VkView(raw.buffer, raw.shape, raw.strides, raw.offset, dtype)
            else:
                raw = cast_to(self.runtime, raw, dtype)
        return raw.buffer, (None if raw.is_contiguous() else raw.strides), raw

    def copy_(self, dst: VkView, src) -> None:
        copy_into(self.runtime, dst, src)

    def data_ptr(self, buffer) -> int:
        return buffer.block.address

    # host transfer --------------------------------------------------------------------------------
    def from_numpy(self, array: np.ndarray):
        dtype = D.from_numpy_dtype(array.dtype)
        storage_type(dtype, "to('vulkan')")
        if dtype is D.int64 and array.size:
            lo, hi = int(array.min()), int(array.max())
            if lo < INT32_MIN or hi > INT32_MAX:
                raise OverflowError(
                    f"{self.device}: int64 values must lie in the int32 range [{INT32_MIN}, {INT32_MAX}] "
                    f"(int64 is held as int32 on this backend); got values in [{lo}, {hi}]"
                )
        buffer = self.runtime.allocator.allocate(array.size, dtype)
        self._upload(buffer, array)
        return buffer

    def _upload(self, buffer, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array, dtype=_HOST[element_type(buffer.dtype)]).tobytes()
        self.runtime.write(buffer, data + b"\0" * (-len(data) % 4))

    def to_numpy(self, data: VkView) -> np.ndarray:
        """The view's elements on the host; reads back only those (a strided view is compacted first)."""
        if data.size == 0:
            return np.empty(data.shape, data.dtype.np)
        view = contiguous(self.runtime, data)
        element = _HOST[element_type(view.dtype)]
        itemsize = np.dtype(element).itemsize
        start, end = view.offset * itemsize, (view.offset + view.size) * itemsize
        aligned = start - start % 4  # wgpu reads whole 4-byte words
        raw = self.runtime.read(view.buffer, aligned, -(-end // 4) * 4 - aligned)
        host = np.frombuffer(raw, dtype=element, count=view.size, offset=start - aligned).astype(data.dtype.np)
        return host.reshape(data.shape)

    def synchronize(self) -> None:
        self.runtime.synchronize()


def _bind(fn, rt):
    def run(*args, **attrs):
        return fn(rt, *args, **attrs)

    run.__name__ = getattr(fn, "__name__", "kernel")
    return run
