"""``munet.cuda``'s memory figures and controls, from each device's pool (``munet/backends/cuda/memory.py``).

As in PyTorch, a device that was never used in this process (or a machine without CUDA) reports
zeros and an empty ``memory_stats()``, and ``empty_cache()`` does nothing there. The controls
(``set_per_process_memory_fraction``, ``caching_allocator_alloc``, ``MemPool``) open the device
and raise :class:`munet.DeviceError` without one.
"""

from __future__ import annotations

import contextlib
import warnings

from munet._device import device as _device
from munet._device import get_backend, opened_backend
from munet.backends.cuda import discovery
from munet.backends.cuda.memory import PrivatePool, routing


def _allocator(device):
    """The pool of ``device`` (default: the current device) if it was opened, else None."""
    if not discovery.device_names():
        return None
    backend = opened_backend(_device("cuda", discovery.device_index(device)))
    return None if backend is None else backend.runtime.allocator


def _opened_allocator(device):
    """The pool of ``device``, opening the device (raises :class:`munet.DeviceError` without CUDA)."""
    return get_backend(_device("cuda", discovery.device_index(device))).runtime.allocator


def memory_allocated(device=None) -> int:
    """Bytes held by tensors (and MuNet's temporaries) on ``device`` now."""
    allocator = _allocator(device)
    return 0 if allocator is None else allocator.allocated_bytes


def max_memory_allocated(device=None) -> int:
    """The peak of ``memory_allocated`` since the device opened or ``reset_peak_memory_stats``."""
    allocator = _allocator(device)
    return 0 if allocator is None else allocator.stats()["allocated_bytes.all.peak"]


def memory_reserved(device=None) -> int:
    """Bytes MuNet's pool holds from the driver on ``device`` (allocated plus cached)."""
    allocator = _allocator(device)
    return 0 if allocator is None else allocator.reserved_bytes


def max_memory_reserved(device=None) -> int:
    allocator = _allocator(device)
    return 0 if allocator is None else allocator.stats()["reserved_bytes.all.peak"]


def memory_stats(device=None) -> dict:
    """The pool's counters under PyTorch's key names: ``allocated_bytes.all.current``/``.peak``,
    ``reserved_bytes.all.current``/``.peak``, ``inactive_split_bytes.all.current``,
    ``allocation.all.allocated``, ``num_ooms``, ``num_alloc_retries``, and ``free_blocks``."""
    allocator = _allocator(device)
    return {} if allocator is None else dict(sorted(allocator.stats().items()))


def reset_peak_memory_stats(device=None) -> None:
    """Restart the peaks from the current figures."""
    allocator = _allocator(device)
    if allocator is not None:
        allocator.reset_peak()


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Return every opened device's cached (unused) blocks to the driver; tensors keep theirs."""
    for index in range(len(discovery.device_names())):
        backend = opened_backend(_device("cuda", index))
        if backend is not None:
            backend.runtime.allocator.empty_cache()


def mem_get_info(device=None) -> tuple[int, int]:
    """``(free, total)`` bytes of the device as the driver reports them (all processes)."""
    index = discovery.device_index(device)
    cuda = discovery.cupy_module().cuda
    with cuda.Device(index):
        free, total = cuda.runtime.memGetInfo()
    return int(free), int(total)


def memory_stats_as_nested_dict(device=None) -> dict:
    """``memory_stats`` as nested dicts (``{"allocated_bytes": {"all": {"current": ...}}}``)."""
    nested: dict = {}
    for key, value in memory_stats(device).items():
        *path, last = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return nested


def reset_accumulated_memory_stats(device=None) -> None:
    """Restart the counters that only grow (allocations, out-of-memory errors)."""
    allocator = _allocator(device)
    if allocator is not None:
        allocator.reset_accumulated()


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A readable table of ``memory_stats(device)`` (the figures MuNet tracks; see docs/cuda.md)."""
    index = discovery.device_index(device)
    stats = memory_stats(index)

    def mib(key: str) -> str:
        return f"{stats.get(key, 0) / (1 << 20):12.2f} MiB"

    rows = [
        ("Allocated memory (current)", mib("allocated_bytes.all.current")),
        ("Allocated memory (peak)", mib("allocated_bytes.all.peak")),
        ("Reserved memory (current)", mib("reserved_bytes.all.current")),
        ("Reserved memory (peak)", mib("reserved_bytes.all.peak")),
        ("Cached, not allocated", mib("inactive_split_bytes.all.current")),
    ]
    if not abbreviated:
        rows += [
            ("Allocations (total)", f"{stats.get('allocation.all.allocated', 0):16d}"),
            ("Cached free blocks", f"{stats.get('free_blocks', 0):16d}"),
            ("Out-of-memory errors", f"{stats.get('num_ooms', 0):16d}"),
        ]
    rule = "=" * 50
    lines = [rule, f" MuNet CUDA memory summary, device cuda:{index}", rule]
    lines += [f" {name:<30}{value}" for name, value in rows]
    return "\n".join([*lines, rule]) + "\n"


def memory_cached(device=None) -> int:
    """Deprecated: ``memory_reserved``."""
    warnings.warn(
        "munet.cuda.memory_cached has been renamed to munet.cuda.memory_reserved", FutureWarning, stacklevel=2
    )
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated: ``max_memory_reserved``."""
    warnings.warn(
        "munet.cuda.max_memory_cached has been renamed to munet.cuda.max_memory_reserved", FutureWarning, stacklevel=2
    )
    return max_memory_reserved(device)


def reset_max_memory_cached(device=None) -> None:
    """Deprecated: ``reset_peak_memory_stats`` (which resets every peak)."""
    warnings.warn(
        "munet.cuda.reset_max_memory_cached now calls munet.cuda.reset_peak_memory_stats, which resets /all/ "
        "peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Cap the bytes MuNet's pools may reserve on ``device`` at ``fraction`` of its memory; an
    allocation past it releases the cached blocks and, still over, raises ``OutOfMemoryError``."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    allocator = _opened_allocator(device)
    with allocator.cupy.cuda.Device(allocator.index):
        total = int(allocator.cupy.cuda.runtime.getDeviceProperties(allocator.index)["totalGlobalMem"])
    allocator.limit = None if fraction == 1 else int(fraction * total)
    allocator.fraction = fraction


def get_per_process_memory_fraction(device=None) -> float:
    """The fraction ``set_per_process_memory_fraction`` set (1.0 by default)."""
    return _opened_allocator(device).fraction


def caching_allocator_alloc(size: int, device=None, stream=None) -> int:
    """``size`` bytes from MuNet's pool of ``device`` (on ``stream``, default the current one); returns
    the device address. Free it with ``caching_allocator_delete``."""
    from munet.backends.cuda.streams import StreamContext

    allocator = _opened_allocator(device)
    with StreamContext(stream), allocator.scope():
        memory = allocator.malloc(int(size))
    allocator.raw_blocks[memory.ptr] = memory
    return memory.ptr


def caching_allocator_delete(mem_ptr: int) -> None:
    """Give back a block ``caching_allocator_alloc`` returned."""
    for index in range(len(discovery.device_names())):
        backend = opened_backend(_device("cuda", index))
        if backend is not None and backend.runtime.allocator.raw_blocks.pop(mem_ptr, None) is not None:
            return
    raise RuntimeError(f"caching_allocator_delete: {mem_ptr:#x} was not allocated by caching_allocator_alloc")


def get_allocator_backend() -> str:
    """``"native"``: MuNet's allocator is a caching pool over ``cudaMalloc`` (CuPy's ``MemoryPool``),
    what PyTorch calls its native allocator (not ``cudaMallocAsync``)."""
    discovery.cupy_module()
    return "native"


def host_memory_stats() -> dict:
    """``{}``: MuNet allocates no pinned host memory (host transfers go through pageable memory)."""
    return {}


def host_memory_stats_as_nested_dict() -> dict:
    """``{}``, as ``host_memory_stats``."""
    return {}


def reset_accumulated_host_memory_stats() -> None:
    """Nothing to reset: MuNet allocates no pinned host memory."""


def reset_peak_host_memory_stats() -> None:
    """Nothing to reset: MuNet allocates no pinned host memory."""


def ipc_collect() -> None:
    """Nothing to collect: MuNet shares no CUDA memory between processes (raises without CUDA)."""
    discovery.cupy_module()


class MemPool:
    """A private memory pool of the current device: inside ``with use_mem_pool(pool):`` MuNet's
    allocations on that device in this thread come from it; its blocks stay with it (``empty_cache``
    does not release them) until the pool and every tensor in it are gone. ``allocator`` (a
    ``CUDAPluggableAllocator``) is not supported: MuNet's pools are CuPy's."""

    def __init__(self, allocator=None, use_on_oom: bool = False, no_split: bool = False):
        if allocator is not None:
            raise ValueError("MemPool: custom allocators are not supported (MuNet's pools are CuPy's)")
        self._pool = PrivatePool(_opened_allocator(None))
        self.use_on_oom = use_on_oom
        self.no_split = no_split
        self._uses = 0

    @property
    def id(self) -> tuple[int, int]:
        """The pool's token (``CUDAGraph.capture_begin(pool=...)`` takes it too)."""
        return self._pool.handle

    @property
    def allocator(self):
        return None

    def use_count(self) -> int:
        """How many ``use_mem_pool`` blocks route to the pool now, plus one for the pool itself."""
        return 1 + self._uses

    def used_bytes(self) -> int:
        return self._pool.used_bytes()


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device=None):
    """Route this thread's allocations on ``device`` (default: the pool's) to ``pool`` in the block."""
    if device is not None and discovery.device_index(device) != pool._pool.allocator.index:
        raise ValueError(f"use_mem_pool: the pool belongs to cuda:{pool._pool.allocator.index}, not {device}")
    pool._uses += 1
    try:
        with routing(pool._pool):
            yield
    finally:
        pool._uses -= 1
