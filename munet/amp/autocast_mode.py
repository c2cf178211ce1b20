"""``autocast``: run chosen ops in float16/bfloat16 and numerically sensitive ones in float32.

The policy itself (which op runs in which precision) lives in ``munet/ops/_autocast.py``;
this context manager switches it on for a region and one device type, as in PyTorch: under
``autocast("cpu")`` only ops on cpu tensors change precision, under ``autocast("vulkan")`` only
ops on vulkan tensors, and blocks for different device types nest independently.
"""

from __future__ import annotations

import functools
import warnings

from munet import _dtype as D
from munet._device import device_type_available
from munet.ops import _registry
from munet.ops._autocast import _cast_inputs, _State, float32_under_autocast  # noqa: F401 - re-exported

_LOW_DTYPES = (D.float16, D.bfloat16)


def _default_dtype(device_type: str):
    return D.bfloat16 if device_type == "cpu" else D.float16


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` in this thread; without one, for ``cuda`` (PyTorch)."""
    return (device_type or "cuda") in _State.dtypes


def get_autocast_dtype(device_type: str):
    """The dtype autocast uses for ``device_type``: the innermost block's, else the default
    (bfloat16 on cpu, float16 elsewhere)."""
    return _State.fast_dtypes.get(device_type) or _default_dtype(device_type)


def _check_device_type(device_type) -> str:
    """``device_type`` as autocast takes it: a str naming a device type (an index is ignored)."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    name = device_type.split(":")[0]
    if device_type_available(name) is None and name != "cuda":
        raise RuntimeError(f"autocast: unsupported device_type '{device_type}' (MuNet autocasts cpu, vulkan and cuda)")
    return name


class autocast:  # noqa: N801 - PyTorch's name
    """Mixed precision for the enclosed region: ``with munet.autocast("cpu", dtype=munet.bfloat16):``.

    As in PyTorch, a device type with no device here (``"cuda"`` without CUDA) and a dtype other
    than float16/bfloat16 disable the block with a UserWarning. Per thread, as in PyTorch: other
    threads' ops keep their precision. ``cache_enabled=False`` casts weights again at each use
    instead of once per outermost block.
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled: bool | None = None):
        device_type = _check_device_type(device_type)
        if dtype is None:
            dtype = get_autocast_dtype(device_type)
        if enabled and not device_type_available(device_type):
            warnings.warn(
                f"User provided device_type of '{device_type}', but no {device_type} device is available. "
                "Disabling autocast.",
                stacklevel=2,
            )
            enabled = False
        if enabled and dtype not in _LOW_DTYPES:
            warnings.warn(
                f"In {device_type} autocast, but the target dtype is not supported. Disabling autocast. "
                f"{device_type} autocast only supports dtypes of munet.bfloat16, munet.float16 currently "
                f"(got {dtype!r}).",
                stacklevel=2,
            )
            enabled = False
        self.device = device_type
        self.device_type = device_type
        self.fast_dtype = dtype
        self._enabled = enabled
        self._cache_enabled = True if cache_enabled is None else cache_enabled

    def __enter__(self):
        self._prev = (
            _State.depth,
            dict(_State.dtypes),
            dict(_State.fast_dtypes),
            _State.cache_enabled,
            _registry._Autocast.cast_inputs,
        )
        _State.depth += 1
        _State.fast_dtypes[self.device_type] = self.fast_dtype
        if self._enabled:
            _State.dtypes[self.device_type] = self.fast_dtype
            _State.cache_enabled = self._cache_enabled
        else:
            _State.dtypes.pop(self.device_type, None)
        _registry._Autocast.cast_inputs = _cast_inputs if _State.dtypes else None
        return self

    def __exit__(self, *exc):
        depth, dtypes, fast_dtypes, _State.cache_enabled, _registry._Autocast.cast_inputs = self._prev
        _State.depth = depth
        _State.dtypes.clear()
        _State.dtypes.update(dtypes)
        _State.fast_dtypes.clear()
        _State.fast_dtypes.update(fast_dtypes)
        if _State.depth == 0:
            _State.cache = {}
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)

        return wrapper
