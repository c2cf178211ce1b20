"""Linear algebra: matmul (all rank combinations, broadcasting), mm, bmm, einsum, ..."""

from __future__ import annotations

from munet.ops._registry import Meta, apply, define
from munet.ops._utils import broadcast_shapes, reduce_grad
from munet.ops.elementwise import promote_operands

__all__ = ["matmul"]
__tensor_methods__ = ["matmul"]


def _matmul_meta(a, b):
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) < 2 or len(sb) < 2:
        raise RuntimeError(f"matmul primitive expects rank >= 2 operands, got {list(sa)} and {list(sb)}")
    if sa[-1] != sb[-2]:
        raise RuntimeError(
            f"matmul: mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, sa[-2:]))} and {'x'.join(map(str, sb[-2:]))})"
        )
    batch = broadcast_shapes(sa[:-2], sb[:-2], op="matmul")
    return Meta(batch + (sa[-2], sb[-1]), a.dtype)


def _matmul_backward(ctx, g):
    need = ctx.needs_input_grad
    ga = gb = None
    if need[0]:
        ga = reduce_grad(matmul(g, ctx.saved_tensor("other").mT), ctx.input_shapes[0])
    if need[1]:
        gb = reduce_grad(matmul(ctx.saved_tensor("self").mT, g), ctx.input_shapes[1])
    return ga, gb


matmul_op = define(
    "matmul",
    inputs=("self", "other"),
    meta=_matmul_meta,
    backward=_matmul_backward,
    saves=(("self", 1), ("other", 0)),
    backward_name="MmBackward0",
)


def matmul(input, other):
    """Matrix product with NumPy/PyTorch semantics for 1-D operands and broadcast batches."""
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError(f"matmul: both arguments to matmul need to be at least 1D, but they are {input.ndim}D and {other.ndim}D")
    _, (a, b) = promote_operands("matmul", input, other)
    squeeze_front = a.ndim == 1
    squeeze_back = b.ndim == 1
    if squeeze_front:
        a = a.unsqueeze(0)
    if squeeze_back:
        b = b.unsqueeze(-1)
    out = apply(matmul_op, a, b)
    if squeeze_front:
        out = out.squeeze(-2)
    if squeeze_back:
        out = out.squeeze(-1)
    return out
