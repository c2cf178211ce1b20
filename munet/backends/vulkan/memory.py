"""Device memory: ``DeviceBuffer`` (a storage's buffer) and the caching allocator.

Buffer sizes are rounded up to size classes (powers of two up to 1 MiB, then multiples of
1 MiB) and a freed block goes back to a free list of its class for the next allocation of
that class: eager code allocates a temporary per op, and creating a wgpu buffer costs far
more than reusing one. An allocation takes the lowest-address free block of its class, so a
loop that allocates the same sizes in the same order (a training step, a compiled call) gets
the same blocks every time and the runtime's bind groups, keyed by buffers, are reused. A
block is freed when its ``DeviceBuffer`` is garbage collected (a weakref finalizer); blocks
freed while commands that may use them are still being recorded are held back until those
commands are submitted, because later queue writes would otherwise overtake them.

Every method runs under the runtime's lock except :meth:`Allocator.release`, the finalizer: it
only queues the block (a deque append is atomic), and the next locked call files it, so the
garbage collector never blocks one thread on another's device work. Each block names the
runtime that owns it, so a buffer made before its device was reset is recognised
(``Runtime.check_owned``); :meth:`Allocator.adopt` gives such a buffer fresh memory.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import weakref

from munet import _dtype as D
from munet import metrics
from munet._device import DeviceError, OutOfMemoryError
from munet.backends.vulkan.views import element_bytes

_MIB = 1 << 20
_MIN_BLOCK = 256


def size_class(nbytes: int) -> int:
    """The block size an allocation of ``nbytes`` gets."""
    if nbytes <= _MIN_BLOCK:
        return _MIN_BLOCK
    if nbytes <= _MIB:
        return 1 << (nbytes - 1).bit_length()
    return -(-nbytes // _MIB) * _MIB


class Block:
    __slots__ = ("gpu", "size", "address", "owner")

    def __init__(self, gpu, size: int, address: int, owner):
        self.gpu, self.size, self.address, self.owner = gpu, size, address, owner

    def __lt__(self, other: Block) -> bool:  # free lists are heaps by address
        return self.address < other.address


class DeviceBuffer:
    """A storage's flat device buffer: ``numel`` elements of ``dtype`` in one block."""

    __slots__ = ("block", "numel", "dtype", "__weakref__")

    def __init__(self, block: Block, numel: int, dtype):
        self.block, self.numel, self.dtype = block, numel, dtype

    @property
    def gpu(self):
        return self.block.gpu

    @property
    def nbytes(self) -> int:
        return self.numel * element_bytes(self.dtype)


class Allocator:
    """Caching allocator over one wgpu device."""

    def __init__(self, runtime):
        self.runtime = runtime
        self.free: dict[int, list[Block]] = {}
        self.deferred: list[Block] = []
        self.released: collections.deque[Block] = collections.deque()  # freed, not yet filed (see release)
        self._addresses = itertools.count(1 << 32, 1 << 32)
        self._allocated_bytes = 0
        self.reserved_bytes = 0
        self.peak_allocated_bytes = 0
        self.counts = {"device_allocations": 0, "cache_hits": 0, "frees": 0}
        metrics.watch_allocated_bytes(runtime.label, self)

    @property
    def allocated_bytes(self) -> int:
        """Bytes of the blocks live buffers hold (counting the buffers freed since the last call)."""
        with self.runtime.lock:
            self._file_released()
            return self._allocated_bytes

    def allocate(self, numel: int, dtype) -> DeviceBuffer:
        if dtype is D.float16 and not self.runtime.has_f16:
            raise DeviceError(
                f"{self.runtime.label}: float16 needs the adapter feature shader-f16, which this adapter "
                "lacks; cast to float32 with .float() first"
            )
        nbytes = -(-max(numel, 1) * element_bytes(dtype) // 4) * 4  # bindings and copies are 4-byte aligned
        limit = self.runtime.max_binding
        if nbytes > limit:
            raise RuntimeError(
                f"{self.runtime.label}: a tensor of {numel} elements ({nbytes} bytes) exceeds this device's "
                f"max_storage_buffer_binding_size ({limit} bytes), the largest buffer one kernel can bind"
            )
        buffer = DeviceBuffer(None, numel, dtype)
        self._attach(buffer, min(size_class(nbytes), limit))
        return buffer

    def adopt(self, buffer: DeviceBuffer) -> None:
        """Give ``buffer`` (of an earlier runtime of this device) a fresh block of this one; its
        contents are undefined until written. Views over it see the new memory."""
        nbytes = -(-max(buffer.numel, 1) * element_bytes(buffer.dtype) // 4) * 4
        self._attach(buffer, min(size_class(nbytes), self.runtime.max_binding))

    def _attach(self, buffer: DeviceBuffer, size: int) -> None:
        with self.runtime.lock:
            self.runtime.check_alive()
            self._file_released()
            cached = self.free.get(size)
            if cached:
                block = heapq.heappop(cached)
                self.counts["cache_hits"] += 1
            else:
                block = Block(self._create(size), size, next(self._addresses), self.runtime)
                self.reserved_bytes += size
                self.counts["device_allocations"] += 1
            self._allocated_bytes += size
            self.peak_allocated_bytes = max(self.peak_allocated_bytes, self._allocated_bytes)
            buffer.block = block
        weakref.finalize(buffer, self.release, block).atexit = False

    def _create(self, size: int):
        wgpu = self.runtime.wgpu
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        for attempt in range(2):
            try:
                return self.runtime.device.create_buffer(size=size, usage=usage)
            except Exception as exc:
                self.runtime.check_lost(exc)
                if attempt == 0:
                    self.empty_cache()
                    continue
                raise OutOfMemoryError(
                    f"{self.runtime.label}: could not allocate {size} bytes; {self._allocated_bytes} bytes are "
                    f"allocated by tensors and {self.reserved_bytes} bytes reserved in total ({exc})"
                ) from exc
        raise AssertionError("unreachable")

    def release(self, block: Block) -> None:
        """The finalizer of a buffer: queue its block for the next locked call (takes no lock)."""
        self.released.append(block)

    def _file_released(self) -> None:
        """Move queued blocks to the free lists, or hold them while commands are being recorded."""
        while self.released:
            block = self.released.popleft()
            self._allocated_bytes -= block.size
            self.counts["frees"] += 1
            if self.runtime.recording:
                self.deferred.append(block)
            else:
                heapq.heappush(self.free.setdefault(block.size, []), block)

    def after_submit(self) -> None:
        """The runtime submitted every recorded command (called under its lock): held blocks are free."""
        with self.runtime.lock:
            self._file_released()
            for block in self.deferred:
                heapq.heappush(self.free.setdefault(block.size, []), block)
            self.deferred.clear()

    def empty_cache(self) -> None:
        """Destroy every cached (free) block."""
        with self.runtime.lock:
            self.runtime.check_alive()
            self._file_released()
            self.runtime.forget_bind_groups()
            for blocks in self.free.values():
                for block in blocks:
                    self.reserved_bytes -= block.size
                    block.gpu.destroy()
            self.free.clear()

    def stats(self) -> dict:
        self._file_released()
        return {
            "allocated_bytes": self._allocated_bytes,
            "reserved_bytes": self.reserved_bytes,
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "cached_blocks": sum(len(b) for b in self.free.values()) + len(self.deferred),
            **self.counts,
        }
