"""``custom_fwd`` / ``custom_bwd``: autocast for the ``forward`` and ``backward`` of a custom
``autograd.Function``, and ``is_autocast_available``, as ``torch.amp``.

``custom_fwd`` records on the ``ctx`` whether autocast was on for ``device_type`` (and its dtype);
with ``cast_inputs`` it casts the floating tensors of ``device_type`` (float64 excepted) to that
dtype and runs ``forward`` with autocast off. ``custom_bwd`` runs ``backward`` under the autocast
state ``forward`` saw.
"""

from __future__ import annotations

import collections.abc
import functools

import numpy as np

from munet import _dtype as D
from munet._tensor import Tensor
from munet.amp.autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled

__all__ = ["custom_bwd", "custom_fwd", "is_autocast_available"]

_AUTOCAST_DEVICE_TYPES = ("cpu", "cuda", "vulkan")


def is_autocast_available(device_type: str) -> bool:
    """Whether MuNet's autocast supports ``device_type`` (``cpu``, ``cuda`` and ``vulkan``)."""
    return device_type in _AUTOCAST_DEVICE_TYPES


def _check_device_type(device_type) -> None:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


def _cast(value, device_type: str, dtype):
    """``value`` with its floating tensors on ``device_type`` (not float64) cast to ``dtype``, through containers."""
    if isinstance(value, Tensor):
        eligible = value.is_floating_point() and value.device.type == device_type and value.dtype is not D.float64
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorate a custom Function's ``forward(ctx, ...)``; see the module docstring."""
    _check_device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorate a custom Function's ``backward(ctx, ...)`` to run under ``forward``'s autocast state."""
    _check_device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd
