"""Questions about objects and the running context at ``munet.*``: ``typename``, ``is_storage``,
``is_inference``, ``get_device_module`` (the ``munet.cuda``/``munet.vulkan``/``munet.cpu`` module of
a device) and ``thread_safe_generator``."""

from __future__ import annotations

import importlib

from munet._tensor import Storage, Tensor

__all__ = ["get_device_module", "is_inference", "is_storage", "thread_safe_generator", "typename"]


def typename(obj) -> str:
    """``'munet.FloatTensor'`` for a tensor (its legacy type), else the object's qualified type name."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        name = obj.__qualname__
    elif hasattr(obj, "__name__"):
        name = obj.__name__
    else:
        module, name = type(obj).__module__ or "", type(obj).__qualname__
    return name if module in ("", "builtins") else f"{module}.{name}"


def is_storage(obj) -> bool:
    return isinstance(obj, Storage)


def is_inference(input: Tensor) -> bool:
    return input.is_inference()


def get_device_module(device=None):
    """The module of ``device``'s type (``munet.cuda`` for ``"cuda:0"``); without one, that of the
    current accelerator, else ``munet.cpu``."""
    from munet import accelerator
    from munet._device import as_device

    if device is None:
        current = accelerator.current_accelerator()
        name = "cpu" if current is None else current.type
    else:
        name = as_device(device).type
    if name == "webgpu":
        name = "vulkan"
    return importlib.import_module(f"munet.{name}")


def thread_safe_generator():
    """The generator of this DataLoader *thread* worker, else None (use the default generator).
    MuNet's DataLoader workers are processes, never threads, so the answer is None, as PyTorch's in
    the main process and in process workers."""
    return None
