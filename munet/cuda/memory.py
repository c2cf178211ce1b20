"""``munet.cuda``'s memory figures, from each device's pool (``munet/backends/cuda/memory.py``).

As in PyTorch, a device that was never used in this process (or a machine without CUDA) reports
zeros and an empty ``memory_stats()``, and ``empty_cache()`` does nothing there.
"""

from __future__ import annotations

from munet._device import device as _device
from munet._device import opened_backend
from munet.backends.cuda import discovery


def _allocator(device):
    """The pool of ``device`` (default: the current device) if it was opened, else None."""
    if not discovery.device_names():
        return None
    backend = opened_backend(_device("cuda", discovery.device_index(device)))
    return None if backend is None else backend.runtime.allocator


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
