"""In-place writes of whole tensors: ``copy_``, ``fill_``, ``zero_``."""

from __future__ import annotations

from munet.ops._registry import Meta, apply_inplace, define
from munet.ops._utils import broadcast_shapes, is_tensor, reduce_grad

__all__ = []
__tensor_methods__ = ["copy_", "fill_", "zero_"]


def _copy_meta(self, src):
    broadcast_shapes(tuple(self.shape), tuple(src.shape), op="copy_")
    return Meta(self.shape, self.dtype)


def _copy_backward(ctx, g):
    return None, reduce_grad(g, ctx.input_shapes[1]) if ctx.needs_input_grad[1] else None


copy_op = define(
    "copy", inputs=("self", "src"), meta=_copy_meta, backward=_copy_backward, backward_name="CopyBackwards"
)


def copy_(self, src, non_blocking: bool = False):
    """Copy ``src`` (broadcast, cast, moved to this device) into ``self``."""
    from munet.ops.convert import cast, to_device

    if not is_tensor(src):
        from munet.ops.creation import tensor

        src = tensor(src, dtype=self.dtype, device=self.device)
    if len(src.shape) > len(self.shape) or broadcast_shapes(tuple(self.shape), tuple(src.shape), op="copy_") != tuple(
        self.shape
    ):
        raise RuntimeError(f"copy_: source of shape {list(src.shape)} cannot be broadcast to {list(self.shape)}")
    if src.device != self.device:
        src = to_device(src, self.device)
    if src.dtype is not self.dtype:
        src = cast(src, self.dtype)
    return apply_inplace(copy_op, self, src)


def _fill_backward(ctx, g):
    return None, g.sum() if len(ctx.needs_input_grad) > 1 and ctx.needs_input_grad[1] else None


fill_op = define(
    "fill", inputs=("self", "value"), meta=lambda self, value: Meta(self.shape, self.dtype), backward=_fill_backward
)


def fill_(self, value):
    """Set every element to ``value`` (a number or a 0-dim tensor)."""
    if is_tensor(value):
        if value.ndim != 0:
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
            )
        if value.dtype is not self.dtype:
            value = value.to(self.dtype)
    return apply_inplace(fill_op, self, value)


def zero_(self):
    return apply_inplace(fill_op, self, 0)
