"""``skip_init``: build a module whose parameters the caller will overwrite."""

from __future__ import annotations

import inspect

from munet.nn.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` whose parameter values are unspecified, as ``torch.nn.utils.skip_init``.

    PyTorch builds the module on the ``meta`` device and allocates it empty; MuNet has no meta
    device, so the module is built on ``device`` and its initializers do run: the values are
    unspecified either way, and the caller must overwrite them (for example with ``load_state_dict``).
    """
    if not isinstance(module_cls, type) or not issubclass(module_cls, Module):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    kwargs.setdefault("device", "cpu")
    return module_cls(*args, **kwargs)
