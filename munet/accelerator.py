"""``munet.accelerator``: the device-agnostic accelerator queries of ``torch.accelerator``.

MuNet's accelerator is the Vulkan device (``vulkan``) when an adapter is present, as PyTorch
answers with its one non-CPU device backend (``cuda``, ``mps``, ``xpu``); with none, the answers are
PyTorch's CPU-only ones (``False``, ``None``, ``0``).
"""

from __future__ import annotations

from munet import vulkan
from munet._device import device

__all__ = ["current_accelerator", "device_count", "is_available"]


def device_count() -> int:
    """The number of accelerator devices (Vulkan adapters)."""
    return vulkan.device_count()


def is_available() -> bool:
    return device_count() > 0


def current_accelerator(check_available: bool = False):
    """``munet.device('vulkan')`` when an adapter is present, else ``None``."""
    return device("vulkan") if is_available() else None
