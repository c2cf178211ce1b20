"""Elementwise ops: arithmetic, math functions, comparisons, logical and bitwise ops.

Binary ops promote their operands to one dtype first (PyTorch's rules, with differentiable
casts), so every primitive here sees operands of a single dtype; Python numbers stay
scalars (rank-0 constants), never data-shaped temporaries.
"""

from __future__ import annotations

from munet import _dtype as D
from munet._memory_format import LayoutError
from munet._tensor import Tensor
from munet.ops import _scalar as S
from munet.ops._registry import Meta, apply, apply_inplace, define
from munet.ops._scalar import BOOL, FLOAT, Const, kind, scalar
from munet.ops._utils import broadcast_shapes, is_tensor, reduce_grad, shape_of

__all__ = [
    "add",
    "sub",
    "subtract",
    "mul",
    "multiply",
    "div",
    "divide",
    "true_divide",
    "neg",
    "negative",
    "exp",
    "rsub",
    "positive",
    "abs",
    "absolute",
    "sign",
    "sgn",
    "signbit",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
    "equal",
    "isclose",
    "allclose",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "isnan",
    "isinf",
    "isposinf",
    "isneginf",
    "isfinite",
    "isreal",
    "nan_to_num",
    "where",
    "clamp",
    "clip",
    "clamp_min",
    "clamp_max",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
]
__tensor_methods__ = [
    "add",
    "add_",
    "sub",
    "sub_",
    "subtract",
    "subtract_",
    "mul",
    "mul_",
    "multiply",
    "multiply_",
    "div",
    "div_",
    "divide",
    "divide_",
    "true_divide",
    "true_divide_",
    "neg",
    "neg_",
    "negative",
    "negative_",
    "exp",
    "exp_",
    "positive",
    "abs",
    "abs_",
    "absolute",
    "absolute_",
    "sign",
    "sign_",
    "sgn",
    "sgn_",
    "signbit",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
    "eq_",
    "ne_",
    "lt_",
    "le_",
    "gt_",
    "ge_",
    "greater_",
    "greater_equal_",
    "less_",
    "less_equal_",
    "not_equal_",
    "equal",
    "isclose",
    "allclose",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "logical_and_",
    "logical_or_",
    "logical_xor_",
    "logical_not_",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "bitwise_and_",
    "bitwise_or_",
    "bitwise_xor_",
    "bitwise_not_",
    "bitwise_left_shift_",
    "bitwise_right_shift_",
    "isnan",
    "isinf",
    "isposinf",
    "isneginf",
    "isfinite",
    "isreal",
    "nan_to_num",
    "nan_to_num_",
    "clamp",
    "clamp_",
    "clip",
    "clip_",
    "clamp_min",
    "clamp_min_",
    "clamp_max",
    "clamp_max_",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
]


# promotion ------------------------------------------------------------------------------------------


def promote_operands(*operands, dtype=None):
    """Cast tensor operands to their common dtype (or ``dtype``); numbers pass through."""
    target = dtype if dtype is not None else D.result_type(*operands)
    for x in operands:
        if isinstance(x, Tensor) and x._dtype is not target:
            from munet.ops.convert import cast

            return target, tuple(cast(x, target) if is_tensor(x) and x.dtype is not target else x for x in operands)
    return target, operands  # the common case: nothing to cast


def _binary_meta(a, b, **_):
    if isinstance(a, Tensor) and isinstance(b, (Tensor, int, float)):  # the common cases, first
        sa = a._shape
        sb = b._shape if isinstance(b, Tensor) else ()
        return Meta(sa if sa == sb or not sb else broadcast_shapes(sa, sb, op=None), a._dtype)
    t = a if is_tensor(a) else b
    return Meta(broadcast_shapes(shape_of(a), shape_of(b), op=None), t.dtype)


def _unary_meta(x, **_):
    return Meta(x._shape, x._dtype)


def binary(op, a, b, **attrs):
    """Apply a binary primitive after promotion; ``a`` or ``b`` may be a Python number."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a._dtype is b._dtype:
        return apply(op, a, b, **attrs)  # the common case: nothing to promote
    if not is_tensor(a) and not is_tensor(b):
        raise TypeError(
            f"{op.name}: expected at least one tensor operand, got {type(a).__name__} and {type(b).__name__}"
        )
    _, (a, b) = promote_operands(a, b)
    return apply(op, a, b, **attrs)


def binary_inplace(op, self, other, **attrs):
    result = D.result_type(self, other)
    if result is not self._dtype and not D.can_cast(result, self._dtype):
        raise RuntimeError(
            f"{op.name}_: result type {result.name} can't be cast to the desired output type {self.dtype.name}"
        )
    if isinstance(other, Tensor) and other._dtype is not self._dtype:
        from munet.ops.convert import cast

        other = cast(other, self.dtype)
    return apply_inplace(op, self, other, **attrs)


def _grads(ctx, ga, gb):
    """Reduce the gradients of a broadcasting binary op to each input's shape."""
    return (
        reduce_grad(ga, ctx.input_shapes[0]) if ga is not None and ctx.needs_input_grad[0] else None,
        reduce_grad(gb, ctx.input_shapes[1])
        if gb is not None and len(ctx.needs_input_grad) > 1 and ctx.needs_input_grad[1]
        else None,
    )


# arithmetic -------------------------------------------------------------------------------------------

add_op = define(
    "add",
    inputs=("self", "other"),
    meta=_binary_meta,
    backward=lambda ctx, g: _grads(ctx, g, g),
    formula=S.binary("add"),
)
sub_op = define(
    "sub",
    inputs=("self", "other"),
    meta=_binary_meta,
    formula=S.binary("sub"),
    backward=lambda ctx, g: _grads(ctx, g, -g if ctx.needs_input_grad[-1] else None),
)


def _mul_backward(ctx, g):
    need = ctx.needs_input_grad
    ga = g * _other(ctx) if need[0] else None
    gb = g * ctx.saved_tensor("self") if len(need) > 1 and need[1] else None
    return _grads(ctx, ga, gb)


def _other(ctx):
    """The saved ``other`` operand (a tensor or the Python number it was)."""
    return ctx.saved_tensor("other")


mul_op = define(
    "mul",
    inputs=("self", "other"),
    meta=_binary_meta,
    backward=_mul_backward,
    saves=(("self", 1), ("other", 0)),
    formula=S.binary("mul"),
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
    "div",
    inputs=("self", "other"),
    meta=_binary_meta,
    backward=_div_backward,
    saves=(("self", 1), "other"),
    formula=S.binary("div"),
)


def _check_alpha(input, other, alpha) -> None:
    result = D.result_type(input, other)
    if isinstance(alpha, float) and not (result.is_floating_point or result.is_complex):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")


def add(input, other, *, alpha=1, out=None):
    if alpha != 1 or type(alpha) is not int:
        _check_alpha(input, other, alpha)
        if alpha != 1:
            other = other * alpha
    if not isinstance(input, Tensor):
        input, other = other, input
    try:
        result = binary(add_op, input, other)
    except LayoutError:
        result = _sparse_sum(input, other, 1)
    return result if out is None else _out(result, out)


def _sparse_sum(input, other, sign: int, out=None):
    """``input + sign * other`` where a sparse COO tensor refused the dense op: ``dense + sparse`` (into
    ``out`` for the in-place forms) and ``sparse + sparse`` are the mixes PyTorch adds; anything else
    raises the refusal again."""
    from munet.sparse.coo import SparseCOOTensor, add_to_dense

    if not isinstance(other, SparseCOOTensor):
        if isinstance(input, SparseCOOTensor) and out is None:
            return input.add(other, alpha=sign)  # PyTorch's error for sparse + dense
        raise
    if isinstance(input, SparseCOOTensor):
        if out is not None:
            raise
        return input.add(other, alpha=sign)
    return add_to_dense(input, other, alpha=sign, out=out)


def _check_sub(input, other) -> None:
    def is_bool(x):
        return getattr(x, "dtype", None) is D.bool_ or isinstance(x, bool)

    if is_bool(input) and is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead."
        )
    if is_bool(input) or is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )


def sub(input, other, *, alpha=1, out=None):
    _check_sub(input, other)
    _check_alpha(input, other, alpha)
    if alpha != 1:
        other = other * alpha
    try:
        result = binary(sub_op, input, other)
    except LayoutError:
        result = _sparse_sum(input, other, -1)
    return _out(result, out)


subtract = sub


def rsub(input, other, *, alpha=1):
    return sub(other, input, alpha=alpha)


def mul(input, other, *, out=None):
    if not isinstance(input, Tensor):
        input, other = other, input
    if out is None:
        return binary(mul_op, input, other)
    return _out(binary(mul_op, input, other), out)


multiply = mul


def _div_rounded_backward(ctx, g):
    from munet.ops.creation import zeros_like

    return _grads(ctx, zeros_like(g), zeros_like(g))


def _div_floor(args, t):
    a, b = args
    if kind(t) == FLOAT:  # a zero divisor gives what true division gives (inf or NaN)
        return scalar.where(scalar.eq(b, 0), scalar.div(a, b), scalar.floor_divide(a, b))
    return scalar.floor_divide(a, b)


def _div_trunc(args, t):
    a, b = args
    if kind(t) == FLOAT:
        return scalar.trunc(scalar.div(a, b))
    q = scalar.floor_divide(a, b)  # floor and trunc differ when the signs differ and the division is inexact
    return scalar.add(q, scalar.cast(scalar.logical_and(scalar.lt(q, 0), scalar.ne(scalar.mul(q, b), a)), t))


div_floor_op = define("div_floor", inputs=("self", "other"), meta=_binary_meta, backward=_div_rounded_backward,
                      formula=_div_floor)  # fmt: skip
div_trunc_op = define("div_trunc", inputs=("self", "other"), meta=_binary_meta, backward=_div_rounded_backward,
                      formula=_div_trunc)  # fmt: skip
_ROUNDED = {"floor": div_floor_op, "trunc": div_trunc_op}


def _no_bool_result(name: str, input, other) -> None:
    if D.result_type(input, other) is D.bool_:
        raise RuntimeError(f"{name}: not implemented for bool tensors")


def div_rounded(input, other, rounding_mode: str):
    """``div(input, other, rounding_mode=...)`` for 'trunc' and 'floor'; integers stay integers.

    Integer division by zero raises (PyTorch's ``ZeroDivisionError``); the gradient is zero.
    """
    _no_bool_result(f"div (rounding_mode={rounding_mode!r})", input, other)
    op = _ROUNDED.get(rounding_mode)
    if op is None:
        raise ValueError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
        )
    return binary(op, input, other)


def div(input, other, *, rounding_mode=None, out=None):
    """True division (ints become floats), or rounded with ``rounding_mode`` 'trunc' / 'floor'."""
    if rounding_mode is not None:
        return _out(div_rounded(input, other, rounding_mode), out)
    target = D.result_type(input, other)
    if not (target.is_floating_point or target.is_complex):
        target = D.get_default_dtype()
    if not is_tensor(input):
        from munet.ops.creation import full

        input = full((), input, dtype=target, device=other.device)
    _, (a, b) = promote_operands(input, other, dtype=target)
    return _out(apply(div_op, a, b), out)


divide = true_divide = div


def add_(self, other, *, alpha=1):
    if alpha != 1 or type(alpha) is not int:
        _check_alpha(self, other, alpha)
        if alpha != 1:
            other = other * alpha
    try:
        return binary_inplace(add_op, self, other)
    except LayoutError:
        return _sparse_sum(self, other, 1, out=self)


def sub_(self, other, *, alpha=1):
    _check_sub(self, other)
    _check_alpha(self, other, alpha)
    if alpha != 1:
        other = other * alpha
    try:
        return binary_inplace(sub_op, self, other)
    except LayoutError:
        return _sparse_sum(self, other, -1, out=self)


def mul_(self, other):
    return binary_inplace(mul_op, self, other)


def div_(self, other, *, rounding_mode=None):
    if rounding_mode is not None:
        return self.copy_(div_rounded(self, other, rounding_mode))
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(f"div_: result type Float can't be cast to the desired output type {self.dtype.name}")
    return binary_inplace(div_op, self, other)


subtract_ = sub_
multiply_ = mul_
divide_ = true_divide_ = div_


def _out(result, out):
    """Support PyTorch's ``out=`` argument: copy into ``out`` (same shape required)."""
    if out is None:
        return result
    if tuple(out.shape) != tuple(result.shape):
        raise RuntimeError(f"out=: expected a tensor of shape {list(result.shape)}, got {list(out.shape)}")
    return out.copy_(result)


# unary -----------------------------------------------------------------------------------------------

neg_op = define("neg", meta=_unary_meta, backward=lambda ctx, g: -g, formula=S.unary("neg"))
exp_op = define(
    "exp",
    meta=_unary_meta,
    backward=lambda ctx, g: g * ctx.saved_tensor("result"),
    saves=("result",),
    formula=S.unary("exp"),
)


def _float_input(x):
    """Integer inputs of float-valued functions are computed in the default float dtype."""
    dtype = x._dtype if isinstance(x, Tensor) else x.dtype
    if dtype.is_floating_point or dtype.is_complex:
        return x
    from munet.ops.convert import cast

    return cast(x, D.get_default_dtype())


def neg(input):
    if input.dtype is D.bool_:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. Use `~` or logical_not() instead."
        )
    return apply(neg_op, input)


negative = neg


def neg_(self):
    if self.dtype is D.bool_:
        neg(self)  # raises PyTorch's error
    return apply_inplace(neg_op, self)


def exp(input):
    return apply(exp_op, _float_input(input))


def exp_(self):
    check_float_inplace("exp", self)
    return apply_inplace(exp_op, self)


def check_float_inplace(name: str, self) -> None:
    """In-place float functions cannot write into integer or bool tensors (PyTorch's error)."""
    if not (self.dtype.is_floating_point or self.dtype.is_complex):
        raise RuntimeError(f"{name}_: result type Float can't be cast to the desired output type {self.dtype.name}")


def negative_(self):
    return neg_(self)


def positive(input):
    """``+input``: returns ``input`` itself."""
    if input.dtype is D.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def _no_bool(name: str, x) -> None:
    if x.dtype is D.bool_:
        raise RuntimeError(f"{name}: not implemented for bool tensors")


def _zero_grad(ctx, g):
    from munet.ops.creation import zeros_like

    return zeros_like(g)


def _sign(args, t):
    (x,) = args
    if kind(t) == BOOL:
        return x
    return scalar.sub(scalar.cast(scalar.gt(x, 0), t), scalar.cast(scalar.lt(x, 0), t))  # sign(nan) == 0


abs_op = define("abs", meta=_unary_meta, backward=lambda ctx, g: g * sign(ctx.saved_tensor("self")), saves=("self",),
                formula=S.unary("abs"))  # fmt: skip
sign_op = define("sign", meta=_unary_meta, backward=_zero_grad, formula=_sign)


def abs(input, *, out=None):  # noqa: A001 - PyTorch's name
    _no_bool("abs", input)
    if input.dtype.is_complex:  # the magnitude, a real tensor
        from munet.ops.complex import complex_abs

        return _out(complex_abs(input), out)
    return _out(apply(abs_op, input), out)


def abs_(self):
    _no_bool("abs_", self)
    return apply_inplace(abs_op, self)


absolute, absolute_ = abs, abs_


def sign(input, *, out=None):
    """-1, 0 or 1 by sign (0 for NaN, as PyTorch); bool stays bool."""
    return _out(apply(sign_op, input), out)


def sign_(self):
    return apply_inplace(sign_op, self)


def sgn(input, *, out=None):
    """``sign`` for real tensors; ``z / |z|`` (0 at 0) for complex ones."""
    if input.dtype.is_complex:
        from munet.ops.complex import complex_sgn

        return _out(complex_sgn(input), out)
    return sign(input, out=out)


sgn_ = sign_


# predicates (bool results, never differentiable) ------------------------------------------------------


def _bool_meta(*operands, **_):
    shapes = [shape_of(x) for x in operands if is_tensor(x)]
    return Meta(broadcast_shapes(*shapes, op=None), D.bool_)


def _float_test(test, integer_answer: bool):
    """The formula ``test(x)`` for floats; integers and bools answer ``integer_answer`` everywhere."""

    def formula(args, t):
        (x,) = args
        if kind(t) == FLOAT:
            return test(x)
        return scalar.lt(x, 0) if test is scalar.signbit else Const(float(integer_answer), "bool")

    return formula


_PREDICATES = {
    "isnan": _float_test(scalar.isnan, False),
    "isinf": _float_test(scalar.isinf, False),
    "isposinf": _float_test(lambda x: scalar.logical_and(scalar.isinf(x), scalar.gt(x, 0)), False),
    "isneginf": _float_test(lambda x: scalar.logical_and(scalar.isinf(x), scalar.lt(x, 0)), False),
    "isfinite": _float_test(lambda x: scalar.logical_not(scalar.logical_or(scalar.isnan(x), scalar.isinf(x))), True),
    "signbit": _float_test(scalar.signbit, False),
}


# a complex number is NaN or infinite where a part is, finite where both are
_OF_PARTS = {"isnan": "__or__", "isinf": "__or__", "isfinite": "__and__"}


def _predicate(name: str):
    op = define(name, meta=_bool_meta, formula=_PREDICATES[name])
    combine = _OF_PARTS.get(name)

    def fn(input):
        if combine is not None and input.dtype.is_complex:
            return getattr(fn(input.real), combine)(fn(input.imag))
        return apply(op, input)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` as a bool tensor."
    return fn


isnan = _predicate("isnan")
isinf = _predicate("isinf")
isposinf = _predicate("isposinf")
isneginf = _predicate("isneginf")
isfinite = _predicate("isfinite")
signbit = _predicate("signbit")


def isreal(input):
    """Where the imaginary part is 0: everywhere for a real tensor."""
    if input.dtype.is_complex:
        return eq(input.imag, 0)
    from munet.ops.creation import ones_like

    return ones_like(input, dtype=D.bool_)


def _nan_to_num_backward(ctx, g):
    return where(isfinite(ctx.saved_tensor("self")), g, 0.0)


def _nan_to_num(args, t, *, nan, posinf, neginf):
    (x,) = args
    if kind(t) != FLOAT:
        return x
    infinity = scalar.where(scalar.gt(x, 0), Const(posinf, t), Const(neginf, t))
    return scalar.where(scalar.isnan(x), nan, scalar.where(scalar.isinf(x), infinity, x))


nan_to_num_op = define("nan_to_num", meta=_unary_meta, backward=_nan_to_num_backward, saves=("self",),
                       formula=_nan_to_num)  # fmt: skip


def _nan_to_num_attrs(x, nan, posinf, neginf) -> dict:
    """The replacement values, infinities defaulting to ``x``'s dtype's largest finite values."""
    if x.dtype.is_floating_point:
        import ml_dtypes

        largest = float(ml_dtypes.finfo(x.dtype.np).max)
        posinf = largest if posinf is None else float(posinf)
        neginf = -largest if neginf is None else float(neginf)
    return dict(nan=float(nan), posinf=posinf, neginf=neginf)


def nan_to_num(input, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None, *, out=None):
    """Replace NaN by ``nan`` and infinities by ``posinf``/``neginf`` (default: the dtype's max/min)."""
    return _out(apply(nan_to_num_op, input, **_nan_to_num_attrs(input, nan, posinf, neginf)), out)


def nan_to_num_(self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None):
    return apply_inplace(nan_to_num_op, self, **_nan_to_num_attrs(self, nan, posinf, neginf))


# comparisons ------------------------------------------------------------------------------------------------


def _comparison(name: str):
    op = define(name, inputs=("self", "other"), meta=_bool_meta, formula=S.binary(name))

    def fn(input, other, *, out=None):
        if not is_tensor(input) and not is_tensor(other):
            raise TypeError(
                f"{name}(): expected at least one tensor operand, got {type(input).__name__} and {type(other).__name__}"
            )
        _, (a, b) = promote_operands(input, other)
        return _out(apply(op, a, b), out)

    def fn_(self, other):
        return _write_result(self, fn(self, other))

    fn.__name__, fn_.__name__ = name, name + "_"
    fn.__doc__ = f"Elementwise ``{name}`` after type promotion; a bool tensor."
    return fn, fn_


def _write_result(self, result):
    """In-place variant of a non-differentiable op: write ``result`` into ``self`` in its dtype."""
    if tuple(result.shape) != tuple(self.shape):
        raise RuntimeError(
            f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(result.shape)}"
        )
    return self.copy_(result)


eq, eq_ = _comparison("eq")
ne, ne_ = _comparison("ne")
lt, lt_ = _comparison("lt")
le, le_ = _comparison("le")
gt, gt_ = _comparison("gt")
ge, ge_ = _comparison("ge")
greater, greater_ = gt, gt_
greater_equal, greater_equal_ = ge, ge_
less, less_ = lt, lt_
less_equal, less_equal_ = le, le_
not_equal, not_equal_ = ne, ne_


def _require_tensor(name: str, other, position: int = 2, role: str = "other") -> None:
    if not is_tensor(other):
        raise TypeError(f"{name}(): argument '{role}' (position {position}) must be Tensor, not {type(other).__name__}")


def _all_true(mask) -> bool:
    return mask.numel() == 0 or mask.logical_not().sum().item() == 0


def equal(input, other) -> bool:
    """True when both tensors have the same shape and the same elements."""
    _require_tensor("equal", other)
    if tuple(input.shape) != tuple(other.shape):
        return False
    return _all_true(eq(input, other))


def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """``|input - other| <= atol + rtol * |other|`` elementwise (PyTorch's formula), as a bool tensor."""
    _require_tensor("isclose", other)
    if input.dtype is not other.dtype:
        raise RuntimeError(
            f"isclose: expected both tensors to have the same dtype, got {input.dtype.name} and {other.dtype.name}"
        )
    if rtol < 0 or atol < 0:
        raise RuntimeError(f"isclose: rtol and atol must be non-negative, got rtol={rtol}, atol={atol}")
    close = eq(input, other)
    if equal_nan and input.dtype.is_floating_point:
        close = close | (isnan(input) & isnan(other))
    if rtol == 0 and atol == 0:
        return close
    if not input.dtype.is_floating_point:
        input, other = input.to(D.get_default_dtype()), other.to(D.get_default_dtype())
    allowed = atol + abs(rtol * other)
    actual = abs(input - other)
    return close | (isfinite(actual) & le(actual, allowed))


def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    return _all_true(isclose(input, other, rtol, atol, equal_nan))


# logical and bitwise ------------------------------------------------------------------------------------------


def _truth(x):
    """A bool operand itself, else ``x != 0`` (NaN is true)."""
    return x if x.dtype == "bool" else scalar.ne(x, 0)


def _logical_formula(name: str):
    build = getattr(scalar, name)
    return lambda args, t: build(*(_truth(a) for a in args))


def _logical(name: str, arity: int):
    op = define(name, inputs=("self", "other")[:arity], meta=_bool_meta, formula=_logical_formula(name))

    def fn(input, *others, out=None):
        for o in others:
            _require_tensor(name, o)
        return _out(apply(op, input, *others), out)

    def fn_(self, *others):
        return _write_result(self, fn(self, *others))

    fn.__name__, fn_.__name__ = name, name + "_"
    fn.__doc__ = f"Elementwise ``{name}`` of the operands' truth values (nonzero is True); a bool tensor."
    return fn, fn_


logical_and, logical_and_ = _logical("logical_and", 2)
logical_or, logical_or_ = _logical("logical_or", 2)
logical_xor, logical_xor_ = _logical("logical_xor", 2)
logical_not, logical_not_ = _logical("logical_not", 1)


def _check_integral(name: str, dtype, allow_bool: bool = True) -> None:
    if dtype.is_floating_point or (dtype is D.bool_ and not allow_bool):
        raise RuntimeError(
            f"{name}: not implemented for {dtype.name} tensors (expected integer{' or bool' if allow_bool else ''} tensors)"
        )


def _shift_left(args, t):
    a, b = args
    out_of_range = scalar.logical_or(scalar.lt(b, 0), scalar.ge(b, S.bits(t)))  # PyTorch: no bits left
    return scalar.where(out_of_range, 0, scalar.shift_left(a, scalar.where(out_of_range, 0, b)))


def _shift_right(args, t):
    a, b = args
    out_of_range = scalar.logical_or(scalar.lt(b, 0), scalar.ge(b, S.bits(t)))  # PyTorch: only the sign is left
    shifted = scalar.shift_right(a, scalar.where(out_of_range, S.bits(t) - 1, b))
    return scalar.where(out_of_range, 0, shifted) if S.is_unsigned(t) else shifted


_BITWISE = {
    "bitwise_and": S.binary("bitwise_and"),
    "bitwise_or": S.binary("bitwise_or"),
    "bitwise_xor": S.binary("bitwise_xor"),
    "bitwise_left_shift": _shift_left,
    "bitwise_right_shift": _shift_right,
}


def _bitwise(name: str, allow_bool: bool = True):
    op = define(name, inputs=("self", "other"), meta=_binary_meta, formula=_BITWISE[name])

    def fn(input, other, *, out=None):
        if not is_tensor(input) and not is_tensor(other):
            raise TypeError(f"{name}(): expected at least one tensor operand")
        _check_integral(name, D.result_type(input, other), allow_bool)
        return _out(binary(op, input, other), out)

    def fn_(self, other):
        _check_integral(name + "_", D.result_type(self, other), allow_bool)
        return binary_inplace(op, self, other)

    fn.__name__, fn_.__name__ = name, name + "_"
    fn.__doc__ = f"Elementwise ``{name}`` of integer (or bool) tensors after type promotion."
    return fn, fn_


bitwise_and, bitwise_and_ = _bitwise("bitwise_and")
bitwise_or, bitwise_or_ = _bitwise("bitwise_or")
bitwise_xor, bitwise_xor_ = _bitwise("bitwise_xor")
bitwise_left_shift, bitwise_left_shift_ = _bitwise("bitwise_left_shift", allow_bool=False)
bitwise_right_shift, bitwise_right_shift_ = _bitwise("bitwise_right_shift", allow_bool=False)
bitwise_not_op = define("bitwise_not", meta=_unary_meta, formula=S.unary("bitwise_not"))


def bitwise_not(input, *, out=None):
    """``~input``: bitwise NOT of integers, logical NOT of bools."""
    _check_integral("bitwise_not", input.dtype)
    return _out(apply(bitwise_not_op, input), out)


def bitwise_not_(self):
    _check_integral("bitwise_not_", self.dtype)
    return apply_inplace(bitwise_not_op, self)


# selection: where, clamp, maximum/minimum ---------------------------------------------------------------------


def _where_meta(condition, a, b):
    if getattr(condition, "dtype", None) is not D.bool_:
        got = condition.dtype.name if hasattr(condition, "dtype") else type(condition).__name__
        raise TypeError(f"where: expected the condition to be a bool tensor, got {got}")
    shape = broadcast_shapes(shape_of(condition), shape_of(a), shape_of(b), op="where")
    return Meta(shape, D.result_type(a, b))


def _where_backward(ctx, g):
    need = ctx.needs_input_grad
    c = ctx.saved_tensor("condition")
    ga = reduce_grad(where(c, g, 0.0), ctx.input_shapes[1]) if need[1] else None
    gb = reduce_grad(where(c, 0.0, g), ctx.input_shapes[2]) if need[2] else None
    return None, ga, gb


where_op = define(
    "where",
    inputs=("condition", "self", "other"),
    meta=_where_meta,
    backward=_where_backward,
    saves=("condition",),
    formula=lambda args, t: scalar.where(*args),
)


def where(condition, input=None, other=None, *, out=None):
    """``input`` where ``condition`` else ``other`` (tensors or numbers, promoted together).

    ``where(condition)`` is ``nonzero(condition, as_tuple=True)``.
    """
    if input is None and other is None:
        from munet.ops.indexing import nonzero

        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where(): expected both input and other, or neither")
    if condition.dtype is not D.bool_:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor with dtype {condition.dtype.name}"
        )
    _, (a, b) = promote_operands(input, other)
    return _out(apply(where_op, condition, a, b), out)


def _where_method(self, condition, y):
    """``Tensor.where(condition, y)``: ``where(condition, self, y)``."""
    return where(condition, self, y)


__tensor_method_impls__ = {"where": _where_method}


def _saved_or_none(ctx, role: str):
    return ctx.saved_tensor(role) if role in ctx.saved or role in ctx.scalars else None


def _clamp_backward(ctx, g):
    need = ctx.needs_input_grad
    x, lo, hi = ctx.saved_tensor("self"), _saved_or_none(ctx, "min"), _saved_or_none(ctx, "max")
    gx = glo = ghi = None
    if need[0]:
        inside = ge(x, lo) if lo is not None else None
        if hi is not None:
            below = le(x, hi)
            inside = below if inside is None else inside & below
        gx = reduce_grad(where(inside, g, 0.0), ctx.input_shapes[0])
    if len(need) > 1 and need[1]:
        mask = lt(x, lo) & lt(lo, hi) if hi is not None else lt(x, lo)
        glo = reduce_grad(where(mask, g, 0.0), ctx.input_shapes[1])
    if len(need) > 2 and need[2]:
        mask = gt(x, hi) | lt(hi, lo) if lo is not None else gt(x, hi)
        ghi = reduce_grad(where(mask, g, 0.0), ctx.input_shapes[2])
    return gx, glo, ghi


def _clamp_meta(x, lo, hi):
    shape = broadcast_shapes(*(shape_of(t) for t in (x, lo, hi) if is_tensor(t)), op="clamp")
    return Meta(shape, x.dtype)


def _clamp(args, t):
    x, lo, hi = args  # a missing bound is None; NaN in x or a bound propagates
    if lo is not None:
        x = scalar.maximum(x, lo)
    return x if hi is None else scalar.minimum(x, hi)


clamp_op = define("clamp", inputs=("self", "min", "max"), meta=_clamp_meta, backward=_clamp_backward,
                  saves=("self", "min", "max"), formula=_clamp)  # fmt: skip


def _clamp_operands(name: str, input, min, max):
    if min is None and max is None:
        raise RuntimeError(f"torch.{name}: At least one of 'min' or 'max' must not be None")
    _, (x, lo, hi) = promote_operands(input, min, max)
    return x, lo, hi


def clamp(input, min=None, max=None, *, out=None):  # noqa: A002 - PyTorch's names
    """``min(max(input, min), max)``; ``min``/``max`` are numbers, tensors or None. NaN propagates."""
    return _out(apply(clamp_op, *_clamp_operands("clamp", input, min, max)), out)


def clamp_(self, min=None, max=None):  # noqa: A002
    from munet.ops.convert import cast

    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    result = D.result_type(self, min, max)
    if not D.can_cast(result, self.dtype):
        raise RuntimeError(
            f"clamp_: result type {result.name} can't be cast to the desired output type {self.dtype.name}"
        )
    lo, hi = (cast(v, self.dtype) if is_tensor(v) else v for v in (min, max))
    return apply_inplace(clamp_op, self, lo, hi)


clip, clip_ = clamp, clamp_


def clamp_min(input, min):  # noqa: A002
    return clamp(input, min=min)


def clamp_max(input, max):  # noqa: A002
    return clamp(input, max=max)


def clamp_min_(self, min):  # noqa: A002
    return clamp_(self, min=min)


def clamp_max_(self, max):  # noqa: A002
    return clamp_(self, max=max)


def _maximum_backward(ctx, g):
    a, b = ctx.saved_tensor("self"), ctx.saved_tensor("other")
    half = where(eq(a, b), g / 2, g)
    ga = where(lt(a, b), 0.0, half) if ctx.needs_input_grad[0] else None
    gb = where(gt(a, b), 0.0, half) if ctx.needs_input_grad[1] else None
    return _grads(ctx, ga, gb)


def _minimum_backward(ctx, g):
    a, b = ctx.saved_tensor("self"), ctx.saved_tensor("other")
    half = where(eq(a, b), g / 2, g)
    ga = where(gt(a, b), 0.0, half) if ctx.needs_input_grad[0] else None
    gb = where(lt(a, b), 0.0, half) if ctx.needs_input_grad[1] else None
    return _grads(ctx, ga, gb)


def _fmax_backward(ctx, g):
    a, b = ctx.saved_tensor("self"), ctx.saved_tensor("other")
    to_self = ge(a, b) | isnan(b)
    return _grads(ctx, where(to_self, g, 0.0), where(to_self, 0.0, g))


def _fmin_backward(ctx, g):
    a, b = ctx.saved_tensor("self"), ctx.saved_tensor("other")
    to_self = le(a, b) | isnan(b)
    return _grads(ctx, where(to_self, g, 0.0), where(to_self, 0.0, g))


_SELECT_BACKWARD = {
    "maximum": _maximum_backward,
    "minimum": _minimum_backward,
    "fmax": _fmax_backward,
    "fmin": _fmin_backward,
}


def _ignoring_nan(name: str, integer_name: str):
    """``name`` (fmax/fmin: NaN only where both are) for floats; integers have no NaN to ignore."""
    floats, integers = getattr(scalar, name), getattr(scalar, integer_name)
    return lambda args, t: (floats if kind(t) == FLOAT else integers)(*args)


_SELECT_FORMULAS = {
    "maximum": S.binary("maximum"),
    "minimum": S.binary("minimum"),
    "fmax": _ignoring_nan("fmax", "maximum"),
    "fmin": _ignoring_nan("fmin", "minimum"),
}


def _selection(name: str):
    op = define(name, inputs=("self", "other"), meta=_binary_meta, backward=_SELECT_BACKWARD[name],
                saves=("self", "other"), formula=_SELECT_FORMULAS[name])  # fmt: skip

    def fn(input, other, *, out=None):
        _require_tensor(name, other)
        return _out(binary(op, input, other), out)

    fn.__name__ = name
    return fn


maximum = _selection("maximum")
minimum = _selection("minimum")
fmax = _selection("fmax")
fmin = _selection("fmin")
maximum.__doc__ = "Elementwise maximum (NaN propagates); gradient split half/half at ties."
minimum.__doc__ = "Elementwise minimum (NaN propagates); gradient split half/half at ties."
fmax.__doc__ = "Elementwise maximum ignoring NaN (NaN only where both are NaN)."
fmin.__doc__ = "Elementwise minimum ignoring NaN (NaN only where both are NaN)."
