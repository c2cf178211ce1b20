"""Device memory of one ``cuda:N``: CuPy's memory pool behind MuNet's caching-allocator figures.

Each device has its own ``cupy.cuda.MemoryPool``: a freed block goes back to the pool and the next
allocation of its size class reuses it without ``cudaMalloc`` (which would synchronize the device).
Every allocation MuNet makes on the device goes through :meth:`Allocator.malloc`, because every
device operation runs in :meth:`Allocator.scope`, which makes it CuPy's allocator for the calling
thread (``cupy.cuda.using_allocator``); CuPy arrays the user makes outside MuNet keep CuPy's own
default pool and are not counted, as PyTorch counts only its own tensors.

The figures follow ``torch.cuda``: ``allocated`` is the bytes held by live blocks (CuPy's
``used_bytes``), ``reserved`` the bytes the pool holds from the driver (``total_bytes``), and the
peaks are recorded at each allocation, reset by :meth:`Allocator.reset_peak`. An allocation the
pool cannot satisfy even after releasing its cached blocks (CuPy retries once) raises
:class:`munet.OutOfMemoryError` with the device's figures.
"""

from __future__ import annotations

import threading

from munet import metrics
from munet._device import OutOfMemoryError

_MIB = 1 << 20


class Allocator:
    """The memory pool of one CUDA device and its counters."""

    def __init__(self, cupy, index: int, label: str):
        self.cupy = cupy
        self.index = index
        self.label = label
        with cupy.cuda.Device(index):
            self.pool = cupy.cuda.MemoryPool()
        self._lock = threading.Lock()
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.allocations = 0
        self.num_ooms = 0
        metrics.watch_allocated_bytes(label, self)

    def malloc(self, nbytes: int):
        """A ``cupy.cuda.MemoryPointer`` of ``nbytes`` on this device (CuPy's allocator interface)."""
        try:
            memory = self.pool.malloc(nbytes)
        except self.cupy.cuda.memory.OutOfMemoryError as exc:
            with self._lock:
                self.num_ooms += 1
            raise OutOfMemoryError(self._oom_message(nbytes)) from exc
        used, total = self.pool.used_bytes(), self.pool.total_bytes()
        with self._lock:
            self.allocations += 1
            self.peak_allocated = max(self.peak_allocated, used)
            self.peak_reserved = max(self.peak_reserved, total)
        return memory

    def _oom_message(self, nbytes: int) -> str:
        free, total = self.cupy.cuda.runtime.memGetInfo()
        return (
            f"{self.label}: out of memory: could not allocate {_mib(nbytes)}; tensors hold {_mib(self.allocated_bytes)}, "
            f"MuNet's pool reserves {_mib(self.reserved_bytes)}, and the device has {_mib(free)} free of "
            f"{_mib(total)} (other processes and CUDA libraries hold the rest)"
        )

    def scope(self) -> DeviceScope:
        """``with allocator.scope():`` runs the block on this device with this pool as CuPy's allocator."""
        return DeviceScope(self)

    @property
    def allocated_bytes(self) -> int:
        with self.cupy.cuda.Device(self.index):
            return self.pool.used_bytes()

    @property
    def reserved_bytes(self) -> int:
        with self.cupy.cuda.Device(self.index):
            return self.pool.total_bytes()

    def empty_cache(self) -> None:
        """Return the pool's cached (unused) blocks to the driver."""
        with self.cupy.cuda.Device(self.index):
            self.pool.free_all_blocks()

    def reset_peak(self) -> None:
        with self._lock:
            self.peak_allocated = self.allocated_bytes
            self.peak_reserved = self.reserved_bytes

    def stats(self) -> dict:
        """The figures under ``torch.cuda.memory_stats``'s names (the subset MuNet tracks)."""
        with self.cupy.cuda.Device(self.index):
            allocated, reserved = self.pool.used_bytes(), self.pool.total_bytes()
            free_blocks = self.pool.n_free_blocks()
        with self._lock:
            return {
                "allocated_bytes.all.current": allocated,
                "allocated_bytes.all.peak": max(self.peak_allocated, allocated),
                "reserved_bytes.all.current": reserved,
                "reserved_bytes.all.peak": max(self.peak_reserved, reserved),
                "inactive_split_bytes.all.current": reserved - allocated,
                "allocation.all.allocated": self.allocations,
                "num_ooms": self.num_ooms,
                "num_alloc_retries": 0,
                "free_blocks": free_blocks,
            }


class DeviceScope:
    """The device context of one operation: CuPy's current device is the allocator's, and its pool
    is CuPy's allocator in this thread. Re-entrant, per thread (CuPy keeps both stacks per thread)."""

    __slots__ = ("allocator", "_device", "_using")

    def __init__(self, allocator: Allocator):
        self.allocator = allocator
        self._device = self._using = None

    def __enter__(self) -> DeviceScope:
        cuda = self.allocator.cupy.cuda
        self._device = cuda.Device(self.allocator.index)
        self._device.__enter__()
        try:
            self._using = cuda.using_allocator(self.allocator.malloc)
            self._using.__enter__()
        except BaseException:
            self._device.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._using.__exit__(*exc)
        finally:
            self._device.__exit__(*exc)


def _mib(nbytes: int) -> str:
    return f"{nbytes / _MIB:.2f} MiB"
