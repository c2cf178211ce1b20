"""PyTorch's function forms of the autocast state (``munet.set_autocast_enabled``, ...).

They read and write the same per-thread state as :class:`munet.autocast` blocks
(``munet/ops/_autocast.py``): ``set_autocast_enabled("cpu", True)`` makes the following cpu ops
autocast exactly as inside ``with autocast("cpu"):``, in this thread, until it is set back. A
block entered afterwards restores, on exit, what these functions had set. The ``*_cpu_*`` forms
are PyTorch's older spellings of the ``"cpu"`` calls.
"""

from __future__ import annotations

from munet.amp.autocast_mode import _LOW_DTYPES, _check_device_type, get_autocast_dtype, is_autocast_enabled
from munet.ops import _registry
from munet.ops._autocast import _cast_inputs, _State


def _arguments(op: str, args: tuple, value_type) -> tuple[str, object]:
    """(device type, value) from ``(device_type, value)`` or PyTorch's old ``(value,)`` (cuda)."""
    if len(args) == 1:
        return "cuda", args[0]
    if len(args) == 2:
        return _check_device_type(args[0]), args[1]
    raise TypeError(f"{op}() takes (device_type, {value_type}) or ({value_type},), got {len(args)} arguments")


def _publish() -> None:
    _registry._Autocast.cast_inputs = _cast_inputs if _State.dtypes else None


def set_autocast_enabled(*args) -> None:
    """``set_autocast_enabled(device_type, enabled)``: autocast on or off for ops on that device type."""
    device_type, enabled = _arguments("set_autocast_enabled", args, "enabled")
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autocast_enabled: enabled must be a bool, got {type(enabled).__name__}")
    if enabled:
        _State.dtypes[device_type] = get_autocast_dtype(device_type)
    else:
        _State.dtypes.pop(device_type, None)
    _publish()


def set_autocast_dtype(device_type: str, dtype) -> None:
    """The dtype autocast uses for ``device_type`` (float16 or bfloat16)."""
    device_type = _check_device_type(device_type)
    if dtype not in _LOW_DTYPES:
        raise RuntimeError(
            f"set_autocast_dtype: {device_type} autocast supports munet.float16 and munet.bfloat16, got {dtype!r}"
        )
    _State.fast_dtypes[device_type] = dtype
    if device_type in _State.dtypes:
        _State.dtypes[device_type] = dtype


def is_autocast_cpu_enabled() -> bool:
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled: bool) -> None:
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype():
    return get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype) -> None:
    set_autocast_dtype("cpu", dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether weight casts are cached within the outermost autocast block."""
    return _State.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autocast_cache_enabled: expected a bool, got {type(enabled).__name__}")
    _State.cache_enabled = enabled


def clear_autocast_cache() -> None:
    """Drop the cached casts of weights (the outermost autocast block does it on exit)."""
    _State.cache = {}
