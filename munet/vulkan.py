"""``munet.vulkan``: the Vulkan/WebGPU devices' runtime controls (like ``torch.cuda``).

>>> munet.vulkan.is_available()
True
>>> munet.vulkan.memory_stats()["submits"]
3

Once a device is lost, every call here except ``reset()`` (and the adapter queries
``get_device_name``, ``is_f16_supported``) raises :class:`munet.DeviceLostError`.
"""

from __future__ import annotations

from munet._device import DeviceError, as_device, get_backend, reset_backend

__all__ = [
    "is_available",
    "device_count",
    "synchronize",
    "memory_stats",
    "empty_cache",
    "get_device_name",
    "is_f16_supported",
    "reset",
]


def _device(device=None):
    dev = as_device("vulkan" if device is None else f"vulkan:{device}" if isinstance(device, int) else device)
    if dev.type not in ("vulkan", "webgpu"):
        raise DeviceError(f"munet.vulkan: expected a vulkan or webgpu device, got '{dev}'")
    return dev


def _backend(device=None):
    return get_backend(_device(device))


def device_count() -> int:
    """The number of Vulkan adapters (``vulkan:0`` .. ``vulkan:N-1``)."""
    from munet.backends.vulkan import adapters

    return len(adapters.list_devices("vulkan"))


def is_available() -> bool:
    return device_count() > 0


def get_device_name(device=None) -> str:
    return _backend(device).runtime.adapter.info.get("device", "")


def is_f16_supported(device=None) -> bool:
    """Whether the adapter has ``shader-f16``, so float16 tensors can live on it (else they raise
    ``DeviceError``; like ``torch.cuda.is_bf16_supported``)."""
    return _backend(device).runtime.has_f16


def synchronize(device=None) -> None:
    """Submit the recorded kernels and wait for the device to finish them."""
    _backend(device).synchronize()


def memory_stats(device=None) -> dict:
    """Allocator and queue counters: ``allocated_bytes``, ``reserved_bytes``, ``peak_allocated_bytes``,
    ``cached_blocks``, ``device_allocations``, ``cache_hits``, ``frees``, ``dispatches``, ``submits``,
    ``pipelines``, ``readbacks``, ``uploads``, ``pending_dispatches``."""
    return _backend(device).runtime.stats()


def empty_cache(device=None) -> None:
    """Release the allocator's cached (unused) blocks to the driver."""
    _backend(device).runtime.empty_cache()


def reset(device=None) -> None:
    """Drop the device's runtime, lost or not, and open a fresh wgpu device on the same adapter.

    Afterwards new tensors on the device work; tensors made before the reset raise
    ``munet.DeviceLostError`` ("a tensor made before the device was reset ...") when used, and
    work recorded but not yet submitted is dropped. Compiled functions made with
    ``munet.compile(..., recover="rebuild")`` do this themselves when a call meets a lost device.

    >>> munet.vulkan.reset()          # after a DeviceLostError
    >>> munet.ones(2, device="vulkan").sum().item()
    2.0
    """
    reset_backend(_device(device))
