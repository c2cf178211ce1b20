"""Strided copies with dtype conversion: the one place views are made contiguous or cast.

``copy_into`` is the backend's ``copy_``, the ``clone``/``cast``/``copy``/``fill`` kernels and
the compaction before a host read.
"""

from __future__ import annotations

import math

from munet._tensor import contiguous_strides
from munet.backends.vulkan.views import VkView, compute_dtype, storage_type
from munet.backends.vulkan.wgsl import Scalar, elementwise


def new_view(rt, shape, dtype) -> VkView:
    """A fresh contiguous tensor of ``shape`` and ``dtype``."""
    storage_type(dtype)
    numel = math.prod(shape)
    return VkView(rt.allocator.allocate(numel, dtype), shape, contiguous_strides(shape), 0, dtype)


def cast_expr(src: str, dst: str) -> tuple[str, bool]:
    """(WGSL expression of ``a`` converted from storage kind ``src`` to ``dst``, is it a bool)."""
    if src == dst:
        return "a", False
    if dst == "u32":  # bool
        return ("!(a == 0.0)" if src == "f32" else "a != 0"), True  # NaN is true (lavapipe's != is ordered)
    return f"{dst}(a)", False


def copy_into(rt, dst: VkView, src) -> VkView:
    """Write ``src`` (a VkView broadcastable to ``dst`` or a number) into ``dst``, converting dtype."""
    out_kind = storage_type(dst.dtype)
    if not isinstance(src, VkView):
        return elementwise(rt, "a", [Scalar(out_kind, src)], dst)
    if src.buffer is dst.buffer:  # a buffer cannot be read and written by one dispatch
        src = clone(rt, src)
    expr, cond = cast_expr(storage_type(src.dtype), out_kind)
    return elementwise(rt, expr, [src], dst, cond)


def cast_to(rt, x: VkView, dtype) -> VkView:
    return copy_into(rt, new_view(rt, x.shape, dtype), x)


def clone(rt, x):
    return copy_into(rt, new_view(rt, x.shape, x.dtype), x)


def work_copy(rt, x: VkView) -> VkView:
    """A contiguous copy of ``x`` in its compute dtype: what atomics update (they work on whole
    32-bit words, so float16 accumulates in a float32 copy and is rounded once, by the caller's cast)."""
    return cast_to(rt, x, compute_dtype(x.dtype))


def contiguous(rt, x: VkView) -> VkView:
    return x if x.is_contiguous() else clone(rt, x)
