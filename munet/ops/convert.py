"""Dtype casts and device transfers (``Tensor.to``, ``.float()``, ``.cpu()``, ...)."""

from __future__ import annotations

import builtins

from munet import _dtype as D
from munet._device import DeviceError, as_device, get_backend
from munet._memory_format import check_memory_format, preserve_format, suggest_memory_format
from munet.ops._registry import Meta, Op, apply, apply_transfer, define, holds_complex
from munet.ops.view import copy_in_memory_format

__all__ = []
__tensor_methods__ = [
    "to",
    "cpu",
    "cuda",
    "float",
    "double",
    "half",
    "bfloat16",
    "long",
    "int",
    "short",
    "bool",
    "byte",
    "char",
    "type_as",
]


def _cast_backward(ctx, grad):
    return grad.to(ctx.input_dtypes[0])


def _cast_meta(x, *, dtype):
    return Meta(x.shape, dtype)


# Casts between floating types are differentiable; a cast to an integer type has no gradient
# (its output cannot require grad), which record_history enforces by output dtype.
cast_op = define("cast", meta=_cast_meta, backward=_cast_backward, backward_name="ToCopyBackward0")


def cast(x, dtype):
    if x.dtype is dtype:
        return x
    if dtype.is_complex and not holds_complex(x._storage.backend):
        raise DeviceError(f"to: {dtype.name} tensors are not supported on {x.device} (cpu and cuda hold them)")
    return apply(cast_op, x, dtype=dtype)


def _transfer_backward(ctx, grad):
    return to_device(grad, ctx.attrs["source"])


# A host transfer is not a kernel (backends only provide to_numpy/from_numpy), so this op is
# not registered in OPS; it exists to record autograd history.
transfer_op = Op(
    "to_device",
    meta=lambda x, **_: Meta(x.shape, x.dtype),
    backward=_transfer_backward,
    backward_name="ToCopyBackward0",
)


def to_device(x, device, non_blocking: bool = False):
    """Copy ``x`` to ``device`` through host memory; differentiable. ``non_blocking`` as PyTorch's:
    from pinned memory to cuda the copy is queued on the device's stream and the call returns at
    once; from cuda to the cpu the result is pinned memory, valid after synchronizing the device;
    any other copy is synchronous."""
    target = get_backend(as_device(device))
    if target is x._storage.backend:
        return x
    return apply_transfer(transfer_op, x, target, builtins.bool(non_blocking), source=x.device)


def _parse_to_args(args, kwargs):
    from munet._tensor import Tensor

    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    non_blocking = kwargs.pop("non_blocking", False)
    memory_format = check_memory_format(kwargs.pop("memory_format", None), "to")
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    flags = []  # PyTorch's positional (non_blocking, copy) after the device or dtype
    for a in args:
        if isinstance(a, D.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, builtins.bool):
            flags.append(a)
        elif a is not None:
            device = a
    if flags:
        non_blocking = flags[0]
    if len(flags) > 1:
        copy = flags[1]
    return device, dtype, copy, non_blocking, memory_format


def to(self, *args, **kwargs):
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``; returns self when nothing changes.
    ``non_blocking``: see :func:`to_device`."""
    device, dtype, copy, non_blocking, memory_format = _parse_to_args(args, dict(kwargs))
    out = self
    if device is not None:
        out = to_device(out, device, non_blocking)
    if dtype is not None:
        out = cast(out, dtype)
    if memory_format is not preserve_format and suggest_memory_format(out.shape, out.stride()) is not memory_format:
        out = copy_in_memory_format(out, memory_format, "to")  # PyTorch copies only to change the format
    if copy and out is self:
        out = copy_in_memory_format(self, memory_format, "to")
    return out


def cpu(self):
    return to_device(self, "cpu")


def cuda(self, device=None, non_blocking: bool = False, memory_format=None):
    """A copy on ``device`` (default: the current CUDA device), or self when it is there already.
    ``non_blocking``: see :func:`to_device` (asynchronous from pinned memory)."""
    target = "cuda" if device is None else f"cuda:{device}" if isinstance(device, builtins.int) else device
    out = to_device(self, target, non_blocking)
    if memory_format is not None:
        out = to(out, memory_format=memory_format)
    return out


def float(self):  # noqa: A001 - PyTorch's method name
    return cast(self, D.float32)


def double(self):
    return cast(self, D.float64)


def half(self):
    return cast(self, D.float16)


def bfloat16(self):
    return cast(self, D.bfloat16)


def long(self):
    return cast(self, D.int64)


def int(self):  # noqa: A001
    return cast(self, D.int32)


def short(self):
    return cast(self, D.int16)


def bool(self):  # noqa: A001
    return cast(self, D.bool_)


def byte(self):
    return cast(self, D.uint8)


def char(self):
    return cast(self, D.int8)


def type_as(self, other):
    return cast(self, other.dtype)
