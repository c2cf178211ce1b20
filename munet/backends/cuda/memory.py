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

Private pools (:class:`PrivatePool`: a CUDA graph's pool, a ``munet.cuda.MemPool``) are further
CuPy pools of the same device. While one is *routed* in a thread (:func:`routing`: during a graph
capture, inside ``use_mem_pool``), that thread's allocations on the device come from it, so a
captured graph's memory is never handed to work outside the graph; their bytes count in the
device's figures. ``limit`` (``set_per_process_memory_fraction``) caps the bytes all of the
device's pools reserve: an allocation that would pass it releases the cached blocks and, still
over, raises ``OutOfMemoryError``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref

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
        self.limit: int | None = None  # bytes all pools may reserve (set_per_process_memory_fraction)
        self.fraction = 1.0
        self.raw_blocks: dict = {}  # address -> block of munet.cuda.caching_allocator_alloc
        self.private_pools: weakref.WeakSet = weakref.WeakSet()
        metrics.watch_allocated_bytes(label, self)

    def pools(self) -> list:
        """The device's CuPy pools: its own, then the live private ones."""
        return [self.pool, *(p.pool for p in list(self.private_pools))]

    def malloc(self, nbytes: int):
        """A ``cupy.cuda.MemoryPointer`` of ``nbytes`` on this device (CuPy's allocator interface),
        from the private pool routed in this thread if any, else the device's own pool."""
        routed = _routed(self.index)
        pool = self.pool if routed is None else routed.pool
        try:
            memory = pool.malloc(nbytes)
            if self.limit is not None and self.reserved_bytes > self.limit:
                memory = None  # over the fraction: release the cached blocks and try once more
                self.empty_cache()
                memory = pool.malloc(nbytes)
        except self.cupy.cuda.memory.OutOfMemoryError as exc:
            self._count_oom()
            raise OutOfMemoryError(self._oom_message(nbytes)) from exc
        if self.limit is not None and self.reserved_bytes > self.limit:
            memory = None
            self.empty_cache()
            self._count_oom()
            raise OutOfMemoryError(self._oom_message(nbytes))
        pools = self.pools() if self.private_pools else (self.pool,)  # the caller's scope made the device current
        used, total = sum(p.used_bytes() for p in pools), sum(p.total_bytes() for p in pools)
        with self._lock:
            self.allocations += 1
            self.peak_allocated = max(self.peak_allocated, used)
            self.peak_reserved = max(self.peak_reserved, total)
        return memory

    def _count_oom(self) -> None:
        with self._lock:
            self.num_ooms += 1

    def _oom_message(self, nbytes: int) -> str:
        free, total = self.cupy.cuda.runtime.memGetInfo()
        limit = (
            ""
            if self.limit is None
            else f" (this process may reserve {_mib(self.limit)}: set_per_process_memory_fraction)"
        )
        return (
            f"{self.label}: out of memory: could not allocate {_mib(nbytes)}; tensors hold {_mib(self.allocated_bytes)}, "
            f"MuNet's pool reserves {_mib(self.reserved_bytes)}{limit}, and the device has {_mib(free)} free of "
            f"{_mib(total)} (other processes and CUDA libraries hold the rest)"
        )

    def scope(self) -> DeviceScope:
        """``with allocator.scope():`` runs the block on this device with this pool as CuPy's allocator."""
        return DeviceScope(self)

    @property
    def allocated_bytes(self) -> int:
        with self.cupy.cuda.Device(self.index):
            return sum(p.used_bytes() for p in self.pools())

    @property
    def reserved_bytes(self) -> int:
        with self.cupy.cuda.Device(self.index):
            return sum(p.total_bytes() for p in self.pools())

    def empty_cache(self) -> None:
        """Return the device pool's cached (unused) blocks to the driver (private pools keep theirs:
        a captured graph may still use them)."""
        with self.cupy.cuda.Device(self.index):
            self.pool.free_all_blocks()

    def reset_accumulated(self) -> None:
        """Restart the counters that only grow (``reset_accumulated_memory_stats``)."""
        with self._lock:
            self.allocations = 0
            self.num_ooms = 0

    def reset_peak(self) -> None:
        with self._lock:
            self.peak_allocated = self.allocated_bytes
            self.peak_reserved = self.reserved_bytes

    def stats(self) -> dict:
        """The figures under ``torch.cuda.memory_stats``'s names (the subset MuNet tracks)."""
        allocated, reserved = self.allocated_bytes, self.reserved_bytes
        with self.cupy.cuda.Device(self.index):
            free_blocks = sum(p.n_free_blocks() for p in self.pools())
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


class PrivatePool:
    """A CuPy pool of one device that only routed allocations use (a graph's or a ``MemPool``'s).

    ``handle`` is the ``(int, int)`` token PyTorch hands out for pools (``graph_pool_handle()``,
    ``CUDAGraph.pool()``, ``MemPool.id``); :meth:`for_handle` gives the live pool of a handle on a
    device, creating it at first use.
    """

    _ids = itertools.count(1)
    _live: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # (handle, device) -> pool

    def __init__(self, allocator: Allocator, handle: tuple | None = None):
        self.allocator = allocator
        self.handle = handle if handle is not None else new_handle()
        with allocator.cupy.cuda.Device(allocator.index):
            self.pool = allocator.cupy.cuda.MemoryPool()
        allocator.private_pools.add(self)
        PrivatePool._live[(self.handle, allocator.index)] = self

    @classmethod
    def for_handle(cls, allocator: Allocator, handle: tuple | None) -> PrivatePool:
        if handle is not None:
            if not (isinstance(handle, tuple) and len(handle) == 2 and all(isinstance(i, int) for i in handle)):
                raise TypeError(f"munet.cuda: a pool handle is an (int, int) tuple, got {handle!r}")
            live = cls._live.get((handle, allocator.index))
            if live is not None:
                return live
        return cls(allocator, handle)

    def used_bytes(self) -> int:
        with self.allocator.cupy.cuda.Device(self.allocator.index):
            return self.pool.used_bytes()


def new_handle() -> tuple[int, int]:
    """A fresh pool token (``graph_pool_handle()``)."""
    return (next(PrivatePool._ids), 0)


_routes = threading.local()  # device index -> stack of the private pools routed in this thread


def _routed(index: int):
    stack = getattr(_routes, "pools", {}).get(index)
    return stack[-1] if stack else None


@contextlib.contextmanager
def routing(pool: PrivatePool):
    """``with routing(pool):`` this thread's allocations on ``pool``'s device come from it."""
    if not hasattr(_routes, "pools"):
        _routes.pools = {}
    stack = _routes.pools.setdefault(pool.allocator.index, [])
    stack.append(pool)
    try:
        yield pool
    finally:
        stack.remove(pool)


def _mib(nbytes: int) -> str:
    return f"{nbytes / _MIB:.2f} MiB"
