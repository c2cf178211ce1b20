"""The synchronisation debug mode (``munet.cuda.set_sync_debug_mode``): a warning or an error at
every operation that makes the host wait for the device (``copies.to_host``)."""

from __future__ import annotations

import warnings

_MODES = {"default": 0, "warn": 1, "error": 2}
_mode = 0


def set_mode(debug_mode) -> None:
    global _mode
    if isinstance(debug_mode, str):
        if debug_mode not in _MODES:
            raise RuntimeError('invalid value of debug_mode, expected one of "default", "warn", "error"')
        debug_mode = _MODES[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1 or 2, got {debug_mode!r}")
    _mode = int(debug_mode)


def mode() -> int:
    return _mode


def synchronizing(what: str) -> None:
    """Called before ``what`` waits for the device on the host."""
    if _mode == 1:
        warnings.warn(f"called a synchronizing CUDA operation ({what})", UserWarning, stacklevel=3)
    elif _mode == 2:
        raise RuntimeError(f"called a synchronizing CUDA operation ({what})")
