"""Tensor creation: from Python data and NumPy, and the factory ops (full, arange, ...)."""

from __future__ import annotations

import math

import numpy as np

from munet import _dtype as D
from munet._device import default_device_if_set, factory_device
from munet.ops._registry import Meta, apply_factory, define
from munet.ops._utils import as_tuple_shape

__all__ = [
    "arange",
    "as_tensor",
    "empty",
    "empty_like",
    "eye",
    "from_dlpack",
    "from_numpy",
    "full",
    "full_like",
    "linspace",
    "logspace",
    "ones",
    "ones_like",
    "scalar_tensor",
    "tensor",
    "zeros",
    "zeros_like",
]
__tensor_methods__ = ["new_tensor", "new_zeros", "new_ones", "new_full", "new_empty"]


def _dtype_or_default(dtype, value=None):
    if dtype is not None:
        if not isinstance(dtype, D.dtype):
            raise TypeError(f"expected a munet dtype, got {dtype!r}")
        return dtype
    if value is None:
        return D.get_default_dtype()
    return D.scalar_dtype(value)


full_op = define("full", meta=lambda *, shape, value, dtype: Meta(shape, dtype))
arange_op = define("arange", meta=lambda *, start, end, step, dtype: Meta((_arange_len(start, end, step),), dtype))
linspace_op = define("linspace", meta=lambda *, start, end, steps, dtype: Meta((steps,), dtype))
eye_op = define("eye", meta=lambda *, n, m, dtype: Meta((n, m), dtype))
empty_op = define("empty", meta=lambda *, shape, dtype: Meta(shape, dtype))


def _arange_len(start, end, step) -> int:
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(
            f"arange: upper bound and larger bound inconsistent with step sign (start={start}, end={end}, step={step})"
        )
    return max(0, math.ceil((end - start) / step))


def _finish(t, requires_grad: bool):
    if requires_grad:
        t.requires_grad_(True)
    return t


def empty(*size, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    shape = as_tuple_shape(size, "empty")
    return _finish(apply_factory(empty_op, device, shape=shape, dtype=_dtype_or_default(dtype)), requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    shape = as_tuple_shape((size,), "full")
    if hasattr(fill_value, "item"):
        fill_value = fill_value.item()
    dtype = _dtype_or_default(dtype, fill_value)
    return _finish(apply_factory(full_op, device, shape=shape, value=fill_value, dtype=dtype), requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    return full(
        as_tuple_shape(size, "zeros"), 0, dtype=_dtype_or_default(dtype), device=device, requires_grad=requires_grad
    )


def ones(*size, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    return full(
        as_tuple_shape(size, "ones"), 1, dtype=_dtype_or_default(dtype), device=device, requires_grad=requires_grad
    )


def _like(input, dtype, device):
    return (dtype or input.dtype), (device if device is not None else input.device)


def empty_like(input, *, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    dtype, device = _like(input, dtype, device)
    return empty(input.shape, dtype=dtype, device=device, requires_grad=requires_grad)


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    dtype, device = _like(input, dtype, device)
    return full(input.shape, 0, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    dtype, device = _like(input, dtype, device)
    return full(input.shape, 1, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    dtype, device = _like(input, dtype, device)
    return full(input.shape, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    if end is None:
        start, end = 0, start
    start, end, step = (x.item() if hasattr(x, "item") else x for x in (start, end, step))
    if dtype is None:
        dtype = D.get_default_dtype() if any(isinstance(x, float) for x in (start, end, step)) else D.int64
    return _finish(apply_factory(arange_op, device, start=start, end=end, step=step, dtype=dtype), requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    start, end = (x.item() if hasattr(x, "item") else x for x in (start, end))
    dtype = _dtype_or_default(dtype)
    return _finish(apply_factory(linspace_op, device, start=start, end=end, steps=steps, dtype=dtype), requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None, requires_grad=False, **_ignored):
    # float64 on the host, so every device gets the same values (vulkan holds no float64)
    exps = linspace(start, end, steps, dtype=D.float64, device="cpu")
    out = (exps * math.log(base)).exp().to(_dtype_or_default(dtype)).to(factory_device(device))
    return _finish(out, requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False, **_ignored):
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError(f"eye: n and m must be non-negative, got n={n}, m={m}")
    return _finish(apply_factory(eye_op, device, n=n, m=m, dtype=_dtype_or_default(dtype)), requires_grad)


# Python data and NumPy ------------------------------------------------------------------------------


def _to_numpy_data(data, dtype):
    """Nested Python data (numbers, lists, tensors, arrays) as a NumPy array of ``dtype``."""
    from munet._tensor import Tensor

    if isinstance(data, Tensor):
        arr = np.asarray(data.detach().cpu().numpy())
    elif isinstance(data, np.ndarray):
        arr = data
    elif isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _iter_flat(data)):
        arr = np.array(_to_python(data))
    else:
        arr = np.array(data)
    if arr.dtype == object:
        raise TypeError(f"tensor: could not infer a dtype from data of type {type(data).__name__} (ragged nesting?)")
    if dtype is None:
        if arr.dtype.kind == "f" and not isinstance(data, np.ndarray):
            dtype = D.get_default_dtype()
        elif arr.dtype.kind in "iu" and not isinstance(data, np.ndarray):
            dtype = D.int64
        elif arr.dtype.kind == "c":
            raise TypeError("tensor: complex numbers are not supported")
        else:
            dtype = D.from_numpy_dtype(arr.dtype)
    return arr.astype(dtype.np, copy=False), dtype


def _iter_flat(data):
    for x in data:
        if isinstance(x, (list, tuple)):
            yield from _iter_flat(x)
        else:
            yield x


def _to_python(data):
    from munet._tensor import Tensor

    if isinstance(data, Tensor):
        return data.tolist()
    if isinstance(data, (list, tuple)):
        return [_to_python(x) for x in data]
    return data


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False):
    """A new tensor holding a copy of ``data`` (numbers, nested lists, arrays, tensors)."""
    from munet._tensor import Tensor

    arr, dtype = _to_numpy_data(data, dtype)
    arr = np.array(arr, copy=True, order="C")
    t = Tensor._from_numpy(arr, factory_device(device))
    return _finish(t, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, sharing memory when it already is one (or a NumPy array) of that dtype/device.

    Without ``device=``, data goes to the default device, and a tensor stays where it is unless
    a default is set (``set_default_device``, ``with munet.device(...)``), as in PyTorch.
    """
    from munet._tensor import Tensor

    if isinstance(data, Tensor):
        device = device if device is not None else default_device_if_set()
        return data.to(device=device if device is not None else data.device, dtype=dtype or data.dtype)
    device = factory_device(device)
    if isinstance(data, np.ndarray) and (dtype is None or D.from_numpy_dtype(data.dtype) is dtype):
        if device.type == "cpu":
            return from_numpy(data)
    arr, dtype = _to_numpy_data(data, dtype)
    if not arr.flags.c_contiguous or arr is data:
        arr = np.ascontiguousarray(arr).copy() if arr is data else np.ascontiguousarray(arr)
    return Tensor._from_numpy(arr, device)


def from_numpy(array: np.ndarray):
    """A cpu tensor sharing memory with ``array`` (writes through both ways)."""
    from munet._tensor import Tensor

    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray, got {type(array).__name__}")
    return Tensor._from_numpy(array, "cpu")


def from_dlpack(ext):
    """Zero-copy import of any DLPack-capable host array (PyTorch, NumPy, JAX, ...)."""
    try:
        array = np.from_dlpack(ext)
    except (TypeError, BufferError, RuntimeError) as exc:
        raise TypeError(f"from_dlpack: cannot import {type(ext).__name__} through DLPack: {exc}") from exc
    return from_numpy(array)


def scalar_tensor(value, *, dtype=None, device=None, requires_grad: bool = False):
    return full((), value, dtype=_dtype_or_default(dtype), device=device, requires_grad=requires_grad)


# Tensor.new_* ----------------------------------------------------------------------------------


def new_tensor(self, data, *, dtype=None, device=None, requires_grad: bool = False):
    return tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False):
    return zeros(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False):
    return ones(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False):
    return full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False):
    return empty(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)
