"""``autocast``: run chosen ops in float16/bfloat16 and numerically sensitive ones in float32.

The policy itself (which op runs in which precision) lives in ``munet/ops/_autocast.py``;
this context manager switches it on for a region.
"""

from __future__ import annotations

import functools

from munet import _dtype as D
from munet._device import as_device
from munet.ops import _registry
from munet.ops._autocast import _cast_inputs, _State, float32_under_autocast  # noqa: F401 - re-exported


def is_autocast_enabled(device_type: str | None = None) -> bool:
    return _State.depth > 0 and _State.dtype is not None and (device_type is None or device_type == _State.device_type)


def get_autocast_dtype(device_type: str = "cpu"):
    return _State.dtype if _State.dtype is not None else D.bfloat16


class autocast:  # noqa: N801 - PyTorch's name
    """Mixed precision for the enclosed region: ``with munet.autocast("cpu", dtype=munet.bfloat16):``.

    Per thread, as in PyTorch: other threads' ops keep their precision. ``cache_enabled=False``
    casts weights again at each use instead of once per outermost block.
    """

    def __init__(self, device_type: str = "cpu", dtype=None, enabled: bool = True, cache_enabled: bool = True):
        device_type = as_device(device_type).type
        if dtype is None:
            dtype = D.bfloat16 if device_type == "cpu" else D.float16
        if dtype not in (D.float16, D.bfloat16):
            raise ValueError(f"autocast: dtype must be munet.float16 or munet.bfloat16, got {dtype!r}")
        self.device_type = device_type
        self.fast_dtype = dtype
        self.enabled = enabled
        self.cache_enabled = cache_enabled

    def __enter__(self):
        self._prev = (
            _State.depth,
            _State.dtype,
            _State.device_type,
            _State.cache_enabled,
            _registry._Autocast.cast_inputs,
        )
        if self.enabled:
            _State.depth += 1
            _State.dtype = self.fast_dtype
            _State.device_type = self.device_type
            _State.cache_enabled = self.cache_enabled
            _registry._Autocast.cast_inputs = _cast_inputs
        else:
            _State.depth = 0
            _State.dtype = None
            _registry._Autocast.cast_inputs = None
        return self

    def __exit__(self, *exc):
        _State.depth, _State.dtype, _State.device_type, _State.cache_enabled, _registry._Autocast.cast_inputs = (
            self._prev
        )
        if _State.depth == 0:
            _State.cache = {}
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled, self.cache_enabled):
                return fn(*args, **kwargs)

        return wrapper
