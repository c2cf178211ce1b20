"""``munet.cpu``: the cpu device's module, as ``torch.cpu`` (what ``munet.get_device_module("cpu")``
returns). The cpu is always there, runs ops in the calling thread and has one device."""

from __future__ import annotations

__all__ = ["current_device", "device_count", "is_available", "synchronize"]


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    return "cpu"


def synchronize(device=None) -> None:
    """Nothing to wait for: cpu ops are done when they return."""
