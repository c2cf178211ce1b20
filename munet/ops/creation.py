"""Tensor creation: from Python data and NumPy, and the factory ops (full, arange, ...)."""

from __future__ import annotations

import math

import numpy as np

from munet import _dtype as D
from munet._device import default_device_if_set, factory_device, host_device
from munet.ops._registry import Meta, apply_factory, define
from munet.ops._utils import as_tuple_shape, check_factory_options, factory_shape

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
    "tril_indices",
    "triu_indices",
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


def _linspace_decomposition(*, start, end, steps, dtype, device):
    """PyTorch's formula: ``start`` and ``end`` converted to ``dtype``, ``step = (end - start) /
    (steps - 1)``; the first ``steps // 2`` values are ``start + i * step``, the rest ``end - (steps
    - 1 - i) * step`` (so both ends are exact). float32 and float64 compute in their own precision
    (PyTorch's scalar formula; its vectorized loop rounds some entries differently, by an ulp),
    integer dtypes in float64 and truncate, other floating dtypes in float32 and round."""
    from munet.ops.elementwise import where

    if steps == 1:
        return full((1,), start, dtype=dtype, device=device)
    work = dtype if dtype in (D.float32, D.float64) else (D.float32 if dtype.is_floating_point else D.float64)
    lo, hi = (np.dtype((work if dtype.is_floating_point else D.int64).np).type(v) for v in (start, end))
    rounded = np.dtype(work.np).type
    step = float(rounded((rounded(hi) - rounded(lo)) / rounded(steps - 1)))
    i = arange(steps, dtype=work, device=device)
    out = where(i < steps // 2, i * step + float(lo), float(hi) - (steps - 1 - i) * step)
    return out if work is dtype else out.to(dtype)


def _eye_decomposition(*, n, m, dtype, device):
    """1 where the row equals the column: ``arange(n)[:, None] == arange(m)``."""
    return (arange(n, device=device).reshape(n, 1) == arange(m, device=device)).to(dtype)


linspace_op = define(
    "linspace", meta=lambda *, start, end, steps, dtype: Meta((steps,), dtype), decomposition=_linspace_decomposition
)
eye_op = define("eye", meta=lambda *, n, m, dtype: Meta((n, m), dtype), decomposition=_eye_decomposition)
empty_op = define("empty", meta=lambda *, shape, dtype: Meta(shape, dtype))


def _arange_len(start, end, step) -> int:
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(
            f"arange: upper bound and larger bound inconsistent with step sign (start={start}, end={end}, step={step})"
        )
    return max(0, math.ceil((end - start) / step))


def finish_factory(t, requires_grad: bool, out=None):
    """A factory's result with ``requires_grad`` set, or copied into ``out`` when given."""
    if requires_grad:
        t.requires_grad_(True)
    if out is not None:
        from munet.ops.elementwise import _out

        return _out(t, out)
    return t


def empty(
    *size_args,
    size=None,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory: bool = False,
    memory_format=None,
):
    check_factory_options("empty", layout=layout, pin_memory=pin_memory, memory_format=memory_format)
    shape = factory_shape(size_args, size, "empty")
    t = apply_factory(empty_op, device, shape=shape, dtype=_dtype_or_default(dtype))
    return finish_factory(t, requires_grad, out)


def full(
    size,
    fill_value,
    *,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory: bool = False,
):
    check_factory_options("full", layout=layout, pin_memory=pin_memory)
    shape = as_tuple_shape((size,), "full")
    if hasattr(fill_value, "item"):
        fill_value = fill_value.item()
    dtype = _dtype_or_default(dtype, fill_value)
    return finish_factory(
        apply_factory(full_op, device, shape=shape, value=fill_value, dtype=dtype), requires_grad, out
    )


def zeros(
    *size_args,
    size=None,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory: bool = False,
):
    check_factory_options("zeros", layout=layout, pin_memory=pin_memory)
    shape = factory_shape(size_args, size, "zeros")
    return full(
        shape,
        0,
        out=out,
        dtype=_dtype_or_default(dtype),
        layout=layout,
        device=device,
        requires_grad=requires_grad,
        pin_memory=pin_memory,
    )


def ones(
    *size_args,
    size=None,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory: bool = False,
):
    check_factory_options("ones", layout=layout, pin_memory=pin_memory)
    shape = factory_shape(size_args, size, "ones")
    return full(
        shape,
        1,
        out=out,
        dtype=_dtype_or_default(dtype),
        layout=layout,
        device=device,
        requires_grad=requires_grad,
        pin_memory=pin_memory,
    )


def _like(op: str, input, dtype, device, layout, pin_memory, memory_format):
    check_factory_options(op, layout=layout, pin_memory=pin_memory, memory_format=memory_format)
    return (dtype or input.dtype), (device if device is not None else input.device)


def empty_like(
    input, *, dtype=None, layout=None, device=None, requires_grad: bool = False, pin_memory=False, memory_format=None
):
    dtype, device = _like("empty_like", input, dtype, device, layout, pin_memory, memory_format)
    return empty(input.shape, dtype=dtype, device=device, requires_grad=requires_grad)


def zeros_like(
    input, *, dtype=None, layout=None, device=None, requires_grad: bool = False, pin_memory=False, memory_format=None
):
    dtype, device = _like("zeros_like", input, dtype, device, layout, pin_memory, memory_format)
    return full(input.shape, 0, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(
    input, *, dtype=None, layout=None, device=None, requires_grad: bool = False, pin_memory=False, memory_format=None
):
    dtype, device = _like("ones_like", input, dtype, device, layout, pin_memory, memory_format)
    return full(input.shape, 1, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(
    input,
    fill_value,
    *,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory=False,
    memory_format=None,
):
    dtype, device = _like("full_like", input, dtype, device, layout, pin_memory, memory_format)
    return full(input.shape, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


def arange(
    start,
    end=None,
    step=1,
    *,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory: bool = False,
):
    check_factory_options("arange", layout=layout, pin_memory=pin_memory)
    if end is None:
        start, end = 0, start
    start, end, step = (x.item() if hasattr(x, "item") else x for x in (start, end, step))
    if dtype is None:
        dtype = D.get_default_dtype() if any(isinstance(x, float) for x in (start, end, step)) else D.int64
    t = apply_factory(arange_op, device, start=start, end=end, step=step, dtype=dtype)
    return finish_factory(t, requires_grad, out)


def linspace(
    start,
    end,
    steps: int,
    *,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory: bool = False,
):
    check_factory_options("linspace", layout=layout, pin_memory=pin_memory)
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    start, end = (x.item() if hasattr(x, "item") else x for x in (start, end))
    dtype = _dtype_or_default(dtype)
    t = apply_factory(linspace_op, device, start=start, end=end, steps=steps, dtype=dtype)
    return finish_factory(t, requires_grad, out)


def logspace(
    start,
    end,
    steps: int,
    base: float = 10.0,
    *,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory: bool = False,
):
    check_factory_options("logspace", layout=layout, pin_memory=pin_memory)
    # float64 on the host, so every device gets the same values (vulkan holds no float64)
    exps = linspace(start, end, steps, dtype=D.float64, device=host_device())
    t = (exps * math.log(base)).exp().to(_dtype_or_default(dtype)).to(factory_device(device))
    return finish_factory(t, requires_grad, out)


def eye(
    n: int,
    m: int | None = None,
    *,
    out=None,
    dtype=None,
    layout=None,
    device=None,
    requires_grad: bool = False,
    pin_memory: bool = False,
):
    check_factory_options("eye", layout=layout, pin_memory=pin_memory)
    m = n if m is None else m
    if n < 0 or m < 0:
        raise RuntimeError(f"eye: n and m must be non-negative, got n={n}, m={m}")
    return finish_factory(apply_factory(eye_op, device, n=n, m=m, dtype=_dtype_or_default(dtype)), requires_grad, out)


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
        elif arr.dtype.kind == "c" and not isinstance(data, np.ndarray):
            dtype = D.get_default_dtype().to_complex()
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
    return finish_factory(t, requires_grad)


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
        if device == host_device():  # shares memory, as torch.as_tensor on the cpu
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
    return Tensor._from_numpy(array, host_device())


_DLPACK_CUDA = 2  # kDLCUDA in DLPack's device types


def from_dlpack(ext):
    """Zero-copy import of any DLPack-capable array: host arrays (PyTorch, NumPy, JAX, ...) become
    cpu tensors, CUDA arrays (``torch.cuda``, CuPy) ``cuda:N`` tensors sharing their memory."""
    device_of = getattr(ext, "__dlpack_device__", None)
    if device_of is not None and device_of()[0] == _DLPACK_CUDA:
        return _from_cuda_dlpack(ext, device_of()[1])
    try:
        array = np.from_dlpack(ext)
    except (TypeError, BufferError, RuntimeError) as exc:
        raise TypeError(f"from_dlpack: cannot import {type(ext).__name__} through DLPack: {exc}") from exc
    return from_numpy(array)


def _from_cuda_dlpack(ext, index: int):
    from munet._device import device, get_backend
    from munet._tensor import Storage, Tensor

    backend = get_backend(device("cuda", index))
    try:
        buffer, shape, stride, data = backend.from_dlpack(ext)
    except (TypeError, BufferError, ValueError) as exc:
        raise TypeError(f"from_dlpack: cannot import {type(ext).__name__} through DLPack: {exc}") from exc
    dtype = backend.dtype_of(data)
    return Tensor._make(Storage(buffer, backend), shape, stride, 0, dtype, backend.view(buffer, shape, stride, 0))


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


def _triangle_indices(op: str, row: int, col: int, offset: int, dtype, device, layout, upper: bool):
    check_factory_options(op, layout=layout)
    if row < 0 or col < 0:
        raise RuntimeError(f"{op}: row and col must be non-negative, got row={row}, col={col}")
    if dtype not in (D.int32, D.int64):
        raise RuntimeError(f'"{op}" not implemented for {dtype.name!r}: expected int32 or int64')
    pick = np.triu_indices if upper else np.tril_indices
    rows, cols = pick(row, offset, col)
    return tensor(np.stack([rows, cols]).astype(dtype.np), dtype=dtype, device=device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=D.int64, device=None, layout=None):
    """The 2 x N (row, column) indices of the upper triangle (on and above diagonal ``offset``)
    of a ``row`` x ``col`` matrix, in row-major order."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, layout, upper=True)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=D.int64, device=None, layout=None):
    """The 2 x N (row, column) indices of the lower triangle (on and below diagonal ``offset``)
    of a ``row`` x ``col`` matrix, in row-major order."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, layout, upper=False)
