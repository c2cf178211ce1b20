"""Elementwise ops: arithmetic, math functions, comparisons, logical and bitwise ops.

Binary ops promote their operands to one dtype first (PyTorch's rules, with differentiable
casts), so every primitive here sees operands of a single dtype; Python numbers stay
scalars (rank-0 constants), never data-shaped temporaries.
"""

from __future__ import annotations

from munet import _dtype as D
from munet.ops._registry import Meta, apply, apply_inplace, define
from munet.ops._utils import broadcast_shapes, is_tensor, reduce_grad, shape_of

__all__ = ["add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "neg", "negative", "exp", "rsub"]
__tensor_methods__ = [
    "add", "add_", "sub", "sub_", "subtract", "mul", "mul_", "multiply", "div", "div_", "divide",
    "true_divide", "neg", "neg_", "negative", "exp", "exp_",
]


# promotion ------------------------------------------------------------------------------------------


def promote_operands(op_name: str, *operands, dtype=None):
    """Cast tensor operands to their common dtype (or ``dtype``); numbers pass through."""
    from munet.ops.convert import cast

    target = dtype if dtype is not None else D.result_type(*operands)
    return target, tuple(cast(x, target) if is_tensor(x) and x.dtype is not target else x for x in operands)


def _binary_meta(a, b, **_):
    t = a if is_tensor(a) else b
    return Meta(broadcast_shapes(shape_of(a), shape_of(b), op="elementwise op"), t.dtype)


def _unary_meta(x, **_):
    return Meta(x.shape, x.dtype)


def binary(op, a, b, **attrs):
    """Apply a binary primitive after promotion; ``a`` or ``b`` may be a Python number."""
    if not is_tensor(a) and not is_tensor(b):
        raise TypeError(f"{op.name}: expected at least one tensor operand, got {type(a).__name__} and {type(b).__name__}")
    _, (a, b) = promote_operands(op.name, a, b)
    return apply(op, a, b, **attrs)


def binary_inplace(op, self, other, **attrs):
    from munet.ops.convert import cast

    result = D.result_type(self, other)
    if not D.can_cast(result, self.dtype):
        raise RuntimeError(f"{op.name}_: result type {result.name} can't be cast to the desired output type {self.dtype.name}")
    if is_tensor(other) and other.dtype is not self.dtype:
        other = cast(other, self.dtype)
    return apply_inplace(op, self, other, **attrs)


def _grads(ctx, ga, gb):
    """Reduce the gradients of a broadcasting binary op to each input's shape."""
    return (
        reduce_grad(ga, ctx.input_shapes[0]) if ga is not None and ctx.needs_input_grad[0] else None,
        reduce_grad(gb, ctx.input_shapes[1]) if gb is not None and len(ctx.needs_input_grad) > 1 and ctx.needs_input_grad[1] else None,
    )


# arithmetic -------------------------------------------------------------------------------------------

add_op = define("add", inputs=("self", "other"), meta=_binary_meta, backward=lambda ctx, g: _grads(ctx, g, g))
sub_op = define("sub", inputs=("self", "other"), meta=_binary_meta, backward=lambda ctx, g: _grads(ctx, g, -g if ctx.needs_input_grad[-1] else None))


def _mul_backward(ctx, g):
    need = ctx.needs_input_grad
    ga = g * _other(ctx) if need[0] else None
    gb = g * ctx.saved_tensor("self") if len(need) > 1 and need[1] else None
    return _grads(ctx, ga, gb)


def _other(ctx):
    """The saved ``other`` operand (a tensor or the Python number it was)."""
    return ctx.saved_tensor("other")


mul_op = define(
    "mul", inputs=("self", "other"), meta=_binary_meta, backward=_mul_backward, saves=(("self", 1), ("other", 0))
)


def _div_backward(ctx, g):
    need = ctx.needs_input_grad
    other = _other(ctx)
    ga = g / other if need[0] else None
    gb = None
    if len(need) > 1 and need[1]:
        gb = -g * ctx.saved_tensor("self") / (other * other)
    return _grads(ctx, ga, gb)


div_op = define(
    "div", inputs=("self", "other"), meta=_binary_meta, backward=_div_backward, saves=(("self", 1), "other")
)


def add(input, other, *, alpha=1, out=None):
    if alpha != 1:
        other = other * alpha
    if not is_tensor(input):
        input, other = other, input
    return _out(binary(add_op, input, other), out)


def sub(input, other, *, alpha=1, out=None):
    if alpha != 1:
        other = other * alpha
    if not is_tensor(input):
        return _out(binary(add_op, neg(other), input), out)
    return _out(binary(sub_op, input, other), out)


subtract = sub


def rsub(input, other, *, alpha=1):
    return sub(other, input, alpha=alpha)


def mul(input, other, *, out=None):
    if not is_tensor(input):
        input, other = other, input
    return _out(binary(mul_op, input, other), out)


multiply = mul


def div(input, other, *, rounding_mode=None, out=None):
    """True division (ints become floats), or rounded with ``rounding_mode`` 'trunc' / 'floor'."""
    if rounding_mode is not None:
        from munet.ops.elementwise_math import div_rounded

        return _out(div_rounded(input, other, rounding_mode), out)
    target = D.result_type(input, other)
    if not target.is_floating_point:
        target = D.get_default_dtype()
    if not is_tensor(input):
        from munet.ops.creation import full

        input = full((), input, dtype=target, device=other.device)
    _, (a, b) = promote_operands("div", input, other, dtype=target)
    return _out(apply(div_op, a, b), out)


divide = true_divide = div


def add_(self, other, *, alpha=1):
    if alpha != 1:
        other = other * alpha
    return binary_inplace(add_op, self, other)


def sub_(self, other, *, alpha=1):
    if alpha != 1:
        other = other * alpha
    return binary_inplace(sub_op, self, other)


def mul_(self, other):
    return binary_inplace(mul_op, self, other)


def div_(self, other, *, rounding_mode=None):
    if rounding_mode is not None:
        from munet.ops.elementwise_math import div_rounded

        return self.copy_(div_rounded(self, other, rounding_mode))
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"div_: result type Float can't be cast to the desired output type {self.dtype.name}")
    return binary_inplace(div_op, self, other)


def _out(result, out):
    """Support PyTorch's ``out=`` argument: copy into ``out`` (same shape required)."""
    if out is None:
        return result
    if tuple(out.shape) != tuple(result.shape):
        raise RuntimeError(f"out=: expected a tensor of shape {list(result.shape)}, got {list(out.shape)}")
    return out.copy_(result)


# unary -----------------------------------------------------------------------------------------------

neg_op = define("neg", meta=_unary_meta, backward=lambda ctx, g: -g)
exp_op = define("exp", meta=_unary_meta, backward=lambda ctx, g: g * ctx.saved_tensor("result"), saves=("result",))


def _float_input(x, name: str):
    """Integer inputs of float-valued functions are computed in the default float dtype."""
    if x.dtype.is_floating_point:
        return x
    from munet.ops.convert import cast

    return cast(x, D.get_default_dtype())


def neg(input):
    if input.dtype is D.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. Use `~` or logical_not() instead.")
    return apply(neg_op, input)


negative = neg


def neg_(self):
    return apply_inplace(neg_op, self)


def exp(input):
    return apply(exp_op, _float_input(input, "exp"))


def exp_(self):
    return apply_inplace(exp_op, self)
