"""Creation, casts, strided copies and fills: the kernels the backend itself builds on."""

from __future__ import annotations

import math

from munet import _dtype as D
from munet.backends.vulkan.copies import cast_to, clone, copy_into, new_view
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import VkView, storage_type
from munet.backends.vulkan.wgsl import Scalar, elementwise


@kernel("clone")
def clone_kernel(rt, x):
    return clone(rt, x)


@kernel("cast")
def cast(rt, x, *, dtype):
    return cast_to(rt, x, dtype)


@kernel("copy")
def copy(rt, self, src):
    return copy_into(rt, new_view(rt, self.shape, self.dtype), src)


@kernel("copy_")
def copy_(rt, out, src):
    copy_into(rt, out, src)


@kernel("fill")
def fill(rt, self, value):
    return copy_into(rt, new_view(rt, self.shape, self.dtype), _number(value))


@kernel("fill_")
def fill_(rt, out, value):
    copy_into(rt, out, _number(value))


def _number(value):
    if isinstance(value, VkView):
        raise TypeError("fill: a tensor fill value must be read on the host first")
    return value


@kernel("empty")
def empty(rt, *, shape, dtype):
    return new_view(rt, tuple(shape), dtype)  # wgpu buffers start zeroed


@kernel("full")
def full(rt, *, shape, value, dtype):
    return copy_into(rt, new_view(rt, tuple(shape), dtype), value)


@kernel("arange")
def arange(rt, *, start, end, step, dtype):
    n = max(0, int(math.ceil((end - start) / step)))
    kind = storage_type(dtype)
    out = new_view(rt, (n,), dtype)
    if kind == "f32":
        return elementwise(rt, "a + f32(idx) * b", [Scalar("f32", start), Scalar("f32", step)], out)
    return elementwise(rt, "a + i32(idx) * b", [Scalar("i32", start), Scalar("i32", step)], out)


@kernel("linspace")
def linspace(rt, *, start, end, steps, dtype):
    """The decomposition's formula (``munet/ops/creation.py``) in float32: integer dtypes convert
    ``start`` and ``end`` first, as PyTorch does, but then compute in float32 where the
    decomposition uses float64 (WGSL has none), so a long integer range may differ by one."""
    if not dtype.is_floating_point:
        start, end = int(start), int(end)
    out = new_view(rt, (steps,), D.float32)
    if steps == 1:
        copy_into(rt, out, start)
    elif steps > 1:
        step = (end - start) / (steps - 1)
        # PyTorch fills the first half from start and the second half from end.
        expr = "select(b - c * f32(d - 1u - idx), a + c * f32(idx), idx < d / 2u)"
        scalars = [Scalar("f32", start), Scalar("f32", end), Scalar("f32", step), Scalar("u32", steps)]
        elementwise(rt, expr, scalars, out)
    if dtype is D.float32:
        return out
    if storage_type(dtype) == "i32":  # PyTorch truncates toward zero
        return elementwise(rt, "i32(trunc(a))", [out], new_view(rt, (steps,), dtype))
    return cast_to(rt, out, dtype)


@kernel("eye")
def eye(rt, *, n, m, dtype):
    return elementwise(rt, "idx / a == idx % a", [Scalar("u32", m)], new_view(rt, (n, m), dtype), cond=True)


@kernel("as_strided_scatter")
def as_strided_scatter(rt, x, src, *, size, stride, storage_offset):
    out = clone(rt, x)
    copy_into(rt, VkView(out.buffer, size, stride, storage_offset, out.dtype), src)
    return out
