"""``munet.accelerator``: the device-agnostic accelerator queries of ``torch.accelerator``.

MuNet's accelerator is the CUDA device (``cuda``) when a CUDA GPU is present, else the Vulkan
device (``vulkan``) when an adapter is, as PyTorch answers with its one non-CPU device backend
(``cuda``, ``mps``, ``xpu``); with neither, the answers are PyTorch's CPU-only ones (``False``,
``None``, ``0``).
"""

from __future__ import annotations

from munet import cuda, vulkan
from munet._device import device

__all__ = ["current_accelerator", "device_count", "is_available"]


def _module():
    """The accelerator's control module (``munet.cuda`` or ``munet.vulkan``), or None."""
    if cuda.device_count() > 0:
        return cuda
    if vulkan.device_count() > 0:
        return vulkan
    return None


def device_count() -> int:
    """The number of accelerator devices (CUDA devices, else Vulkan adapters)."""
    module = _module()
    return 0 if module is None else module.device_count()


def is_available() -> bool:
    return device_count() > 0


def current_accelerator(check_available: bool = False):
    """``munet.device('cuda')`` with a CUDA GPU, else ``munet.device('vulkan')`` with an adapter, else
    ``None``."""
    module = _module()
    return None if module is None else device("cuda" if module is cuda else "vulkan")
