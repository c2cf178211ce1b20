"""Elementwise math: powers, exponentials and logarithms, trigonometric and hyperbolic
functions, erf/erfc/erfinv, sigmoid/logit, rounding, rounded division and remainders, and
the binary/ternary math ops (atan2, hypot, copysign, xlogy, heaviside, lerp, addcmul, addcdiv).

Functions of floats compute integer and bool inputs in the default float dtype (as PyTorch);
their in-place variants refuse integer tensors. Gradient rules follow PyTorch's conventions
(``derivatives.yaml``) and are written with public ops, so they differentiate again.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet.ops import _scalar as S
from munet.ops._registry import apply, apply_inplace, define
from munet.ops._scalar import BOOL, FLOAT, Const, kind, scalar
from munet.ops._utils import float_result_type, is_tensor
from munet.ops.elementwise import (
    _binary_meta,
    _float_input,
    _grads,
    _no_bool,
    _no_bool_result,
    _out,
    _require_tensor,
    _unary_meta,
    _zero_grad,
    binary,
    binary_inplace,
    check_float_inplace,
    div_floor_op,
    div_rounded,
    promote_operands,
    where,
)

_FLOAT_UNARY = [
    "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "erf", "erfc", "erfinv", "sigmoid", "deg2rad", "rad2deg",
]  # fmt: skip
_ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh",
            "arctanh": "atanh", "arctan2": "atan2", "fix": "trunc"}  # fmt: skip
_ROUNDING = ["floor", "ceil", "round", "trunc", "frac"]
_BINARY = ["pow", "float_power", "floor_divide", "remainder", "fmod", "atan2", "hypot", "copysign", "xlogy",
           "heaviside", "lerp", "addcmul", "addcdiv"]  # fmt: skip

__all__ = [*_FLOAT_UNARY, *_ALIASES, *_ROUNDING, *_BINARY, "square", "logit"]
__functional__ = ["sigmoid", "tanh"]
__tensor_methods__ = [
    *(n for name in [*_FLOAT_UNARY, *_ALIASES, *_ROUNDING, "square", "logit"] for n in (name, name + "_")),
    *(n for name in _BINARY if name not in ("heaviside",) for n in (name, name + "_")),
    "heaviside", "heaviside_",
]  # fmt: skip

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


# unary functions of floats --------------------------------------------------------------------------------


def _x(ctx):
    return ctx.saved_tensor("self")


def _r(ctx):
    return ctx.saved_tensor("result")


# name -> (backward(ctx, g), saves)
_UNARY_RULES = {
    "exp2": (lambda ctx, g: g * _r(ctx) * _LN2, ("result",)),
    "expm1": (lambda ctx, g: g * (_r(ctx) + 1), ("result",)),
    "log": (lambda ctx, g: g / _x(ctx), ("self",)),
    "log2": (lambda ctx, g: g / (_x(ctx) * _LN2), ("self",)),
    "log10": (lambda ctx, g: g / (_x(ctx) * _LN10), ("self",)),
    "log1p": (lambda ctx, g: g / (_x(ctx) + 1), ("self",)),
    "sqrt": (lambda ctx, g: g / (2 * _r(ctx)), ("result",)),
    "rsqrt": (lambda ctx, g: -0.5 * g * _r(ctx) * _r(ctx) * _r(ctx), ("result",)),
    "reciprocal": (lambda ctx, g: -g * (_r(ctx) * _r(ctx)), ("result",)),
    "sin": (lambda ctx, g: g * cos(_x(ctx)), ("self",)),
    "cos": (lambda ctx, g: -g * sin(_x(ctx)), ("self",)),
    "tan": (lambda ctx, g: g * (1 + _r(ctx) * _r(ctx)), ("result",)),
    "asin": (lambda ctx, g: g * rsqrt(1 - _x(ctx) * _x(ctx)), ("self",)),
    "acos": (lambda ctx, g: -g * rsqrt(1 - _x(ctx) * _x(ctx)), ("self",)),
    "atan": (lambda ctx, g: g / (_x(ctx) * _x(ctx) + 1), ("self",)),
    "sinh": (lambda ctx, g: g * cosh(_x(ctx)), ("self",)),
    "cosh": (lambda ctx, g: g * sinh(_x(ctx)), ("self",)),
    "tanh": (lambda ctx, g: g * (1 - _r(ctx) * _r(ctx)), ("result",)),
    "asinh": (lambda ctx, g: g * rsqrt(_x(ctx) * _x(ctx) + 1), ("self",)),
    "acosh": (lambda ctx, g: g * rsqrt(_x(ctx) * _x(ctx) - 1), ("self",)),
    "atanh": (lambda ctx, g: g / (1 - _x(ctx) * _x(ctx)), ("self",)),
    "erf": (lambda ctx, g: g * (2 / math.sqrt(math.pi)) * (-_x(ctx) * _x(ctx)).exp(), ("self",)),
    "erfc": (lambda ctx, g: g * (-2 / math.sqrt(math.pi)) * (-_x(ctx) * _x(ctx)).exp(), ("self",)),
    "erfinv": (lambda ctx, g: g * (math.sqrt(math.pi) / 2) * (_r(ctx) * _r(ctx)).exp(), ("result",)),
    "sigmoid": (lambda ctx, g: g * (_r(ctx) * (1 - _r(ctx))), ("result",)),
    "deg2rad": (lambda ctx, g: g * (math.pi / 180), ()),
    "rad2deg": (lambda ctx, g: g * (180 / math.pi), ()),
}


def _sigmoid(args, t):
    (x,) = args
    e = scalar.exp(scalar.neg(scalar.abs(x)))  # exp of a non-positive number only: no overflow for large |x|
    return scalar.where(scalar.ge(x, 0), scalar.div(1, scalar.add(1, e)), scalar.div(e, scalar.add(1, e)))


_UNARY_FORMULAS = {
    **{name: S.unary(name) for name in _FLOAT_UNARY if name in S.SCALAR_OPS},
    "rsqrt": lambda args, t: scalar.div(1, scalar.sqrt(args[0])),
    "reciprocal": lambda args, t: scalar.div(1, args[0]),
    "sigmoid": _sigmoid,
    "deg2rad": lambda args, t: scalar.mul(args[0], math.pi / 180),
    "rad2deg": lambda args, t: scalar.mul(args[0], 180 / math.pi),
}


def _float_unary(name: str):
    """Define a float-valued unary op and return its function and in-place variant."""
    backward, saves = _UNARY_RULES[name]
    op = define(name, meta=_unary_meta, backward=backward, saves=saves, formula=_UNARY_FORMULAS[name])

    def fn(input, *, out=None):
        return _out(apply(op, _float_input(input)), out)

    def fn_(self):
        check_float_inplace(name, self)
        return apply_inplace(op, self)

    fn.__name__, fn_.__name__ = name, name + "_"
    fn.__doc__ = f"Elementwise ``{name}``; integer and bool inputs compute in the default float dtype."
    return fn, fn_


exp2, exp2_ = _float_unary("exp2")
expm1, expm1_ = _float_unary("expm1")
log, log_ = _float_unary("log")
log2, log2_ = _float_unary("log2")
log10, log10_ = _float_unary("log10")
log1p, log1p_ = _float_unary("log1p")
sqrt, sqrt_ = _float_unary("sqrt")
rsqrt, rsqrt_ = _float_unary("rsqrt")
reciprocal, reciprocal_ = _float_unary("reciprocal")
sin, sin_ = _float_unary("sin")
cos, cos_ = _float_unary("cos")
tan, tan_ = _float_unary("tan")
asin, asin_ = _float_unary("asin")
acos, acos_ = _float_unary("acos")
atan, atan_ = _float_unary("atan")
sinh, sinh_ = _float_unary("sinh")
cosh, cosh_ = _float_unary("cosh")
tanh, tanh_ = _float_unary("tanh")
asinh, asinh_ = _float_unary("asinh")
acosh, acosh_ = _float_unary("acosh")
atanh, atanh_ = _float_unary("atanh")
erf, erf_ = _float_unary("erf")
erfc, erfc_ = _float_unary("erfc")
erfinv, erfinv_ = _float_unary("erfinv")
sigmoid, sigmoid_ = _float_unary("sigmoid")
deg2rad, deg2rad_ = _float_unary("deg2rad")
rad2deg, rad2deg_ = _float_unary("rad2deg")


def logit(input, eps: float | None = None):
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    p = _float_input(input)
    if eps is not None:
        p = p.clamp(eps, 1 - eps)
    return log(p / (1 - p))


def logit_(self, eps: float | None = None):
    check_float_inplace("logit", self)
    return self.copy_(logit(self, eps))


# rounding ------------------------------------------------------------------------------------------------------


def _float_rounding(name: str):
    """The formula ``name(x)`` for floats; integers are their own rounding."""
    build = getattr(scalar, name)
    return lambda args, t: build(args[0]) if kind(t) == FLOAT else args[0]


def _round(args, t, *, decimals):
    (x,) = args
    if kind(t) != FLOAT:
        return x
    if decimals == 0:
        return scalar.rint(x)
    if decimals > 0:
        scale = Const(10.0**decimals, t)
        return scalar.div(scalar.rint(scalar.mul(x, scale)), scale)
    scale = Const(10.0 ** (-decimals), t)
    return scalar.mul(scalar.rint(scalar.div(x, scale)), scale)


floor_op = define("floor", meta=_unary_meta, backward=_zero_grad, formula=_float_rounding("floor"))
ceil_op = define("ceil", meta=_unary_meta, backward=_zero_grad, formula=_float_rounding("ceil"))
trunc_op = define("trunc", meta=_unary_meta, backward=_zero_grad, formula=_float_rounding("trunc"))
round_op = define("round", meta=_unary_meta, backward=_zero_grad, formula=_round)
frac_op = define("frac", meta=_unary_meta, backward=lambda ctx, g: g,
                 formula=lambda args, t: scalar.sub(args[0], scalar.trunc(args[0])))  # fmt: skip


def _rounding(op):
    name = op.name

    def fn(input, *, out=None):
        _no_bool(name, input)
        return _out(apply(op, input), out)

    def fn_(self):
        _no_bool(name + "_", self)
        return apply_inplace(op, self)

    fn.__name__, fn_.__name__ = name, name + "_"
    fn.__doc__ = f"Elementwise ``{name}``; integer tensors are returned unchanged (as a copy)."
    return fn, fn_


floor, floor_ = _rounding(floor_op)
ceil, ceil_ = _rounding(ceil_op)
trunc, trunc_ = _rounding(trunc_op)
fix, fix_ = trunc, trunc_


def round(input, *, decimals: int = 0, out=None):  # noqa: A001 - PyTorch's name
    """Round half to even, at ``decimals`` decimal places (negative: to tens, hundreds, ...)."""
    _no_bool("round", input)
    if decimals != 0 and not input.dtype.is_floating_point:
        raise RuntimeError(f"round: decimals is only supported for floating tensors, got {input.dtype.name}")
    return _out(apply(round_op, input, decimals=int(decimals)), out)


def round_(self, *, decimals: int = 0):
    _no_bool("round_", self)
    return apply_inplace(round_op, self, decimals=int(decimals))


def frac(input, *, out=None):
    """``input - trunc(input)``; floating tensors only."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"frac: expected a floating tensor, got {input.dtype.name}")
    return _out(apply(frac_op, input), out)


def frac_(self):
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"frac_: expected a floating tensor, got {self.dtype.name}")
    return apply_inplace(frac_op, self)


# rounded division and remainders ----------------------------------------------------------------------------


def floor_divide(input, other, *, out=None):
    """``input // other``: division rounded toward negative infinity (Python's convention)."""
    return _out(div_rounded(input, other, "floor"), out)


def floor_divide_(self, other):
    _no_bool_result("floor_divide_", self, other)
    return binary_inplace(div_floor_op, self, other)


def _remainder_backward(ctx, g):
    gb = None
    if len(ctx.needs_input_grad) > 1 and ctx.needs_input_grad[1]:
        mode = "floor" if ctx.op.name == "remainder" else "trunc"
        gb = -g * div_rounded(ctx.saved_tensor("self"), ctx.saved_tensor("other"), mode)
    return _grads(ctx, g, gb)


def _remainder(args, t):
    a, b = args  # C's fmod, then moved into the sign of b (PyTorch's and Python's convention)
    r = scalar.fmod(a, b)
    into_sign_of_b = scalar.logical_and(scalar.ne(r, 0), scalar.ne(scalar.lt(r, 0), scalar.lt(b, 0)))
    return scalar.where(into_sign_of_b, scalar.add(r, b), r)


remainder_op = define("remainder", inputs=("self", "other"), meta=_binary_meta, backward=_remainder_backward,
                      saves=(("self", 1), ("other", 1)), formula=_remainder)  # fmt: skip
fmod_op = define("fmod", inputs=("self", "other"), meta=_binary_meta, backward=_remainder_backward,
                 saves=(("self", 1), ("other", 1)), formula=S.binary("fmod"))  # fmt: skip


def remainder(input, other, *, out=None):
    """Python's modulus: the result has the sign of ``other``."""
    _no_bool_result("remainder", input, other)
    return _out(binary(remainder_op, input, other), out)


def remainder_(self, other):
    _no_bool_result("remainder_", self, other)
    return binary_inplace(remainder_op, self, other)


def fmod(input, other, *, out=None):
    """C's ``fmod``: the result has the sign of ``input``."""
    _no_bool_result("fmod", input, other)
    return _out(binary(fmod_op, input, other), out)


def fmod_(self, other):
    _no_bool_result("fmod_", self, other)
    return binary_inplace(fmod_op, self, other)


# powers ---------------------------------------------------------------------------------------------------------


def _pow_backward(ctx, g):
    from munet.ops.creation import zeros_like

    need = ctx.needs_input_grad
    base, exponent = ctx.saved_tensor("self"), ctx.saved_tensor("exponent")
    ga = gb = None
    if need[0]:
        if is_tensor(exponent):
            ga = where(exponent == 0, 0.0, g * (exponent * pow(base, exponent - 1)))
        else:
            ga = zeros_like(g) if exponent == 0 else g * (exponent * pow(base, exponent - 1))
    if len(need) > 1 and need[1]:
        result = ctx.saved_tensor("result")
        if is_tensor(base):
            gb = g * where((base == 0) & (exponent >= 0), 0.0, result * log(base))
        elif base == 0:
            gb = g * where(exponent >= 0, 0.0, result * -math.inf)
        else:
            gb = g * (result * _scalar_log(base))
    return _grads(ctx, ga, gb)


def _pow(args, t):
    a, b = args
    if kind(t) == BOOL:
        return scalar.bitwise_or(a, scalar.bitwise_not(b))
    if kind(t) == FLOAT:
        return scalar.pow(a, b)
    # negative integer exponents: 1 ** n == 1, (-1) ** n == +-1, anything else truncates to 0
    negative = scalar.lt(b, 0)
    odd = scalar.ne(scalar.bitwise_and(b, 1), 0)
    minus_one = scalar.where(odd, Const(-1.0, t), Const(1.0, t))
    special = scalar.where(scalar.eq(a, 1), 1, scalar.where(scalar.eq(a, -1), minus_one, 0))
    return scalar.where(negative, special, scalar.pow(a, scalar.where(negative, 0, b)))


pow_op = define("pow", inputs=("self", "exponent"), meta=_binary_meta, backward=_pow_backward,
                saves=("self", "exponent", ("result", 1)), formula=_pow)  # fmt: skip


def _check_pow(name: str, input, exponent, target) -> None:
    if target is D.bool_ and is_tensor(exponent):
        raise RuntimeError(f"{name}: not implemented for bool base and exponent tensors")
    if target.is_floating_point:
        return
    if isinstance(exponent, int) and not isinstance(exponent, bool) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")


def pow(input, exponent, *, out=None):  # noqa: A001 - PyTorch's name
    """``input ** exponent``; either may be a Python number. Integer powers stay integers."""
    if not is_tensor(input) and not is_tensor(exponent):
        raise TypeError(f"pow: expected at least one tensor, got {type(input).__name__} and {type(exponent).__name__}")
    target = D.result_type(input, exponent)
    _check_pow("pow", input, exponent, target)
    return _out(binary(pow_op, input, exponent), out)


def pow_(self, exponent):
    _check_pow("pow_", self, exponent, D.result_type(self, exponent))
    return binary_inplace(pow_op, self, exponent)


def square(input, *, out=None):
    """``input * input`` (bool squares to int64, as ``pow(input, 2)``)."""
    return pow(input, 2, out=out)


def square_(self):
    return pow_(self, 2)


def float_power(input, exponent, *, out=None):
    """``pow`` computed in float64 (the result is float64)."""
    input = input.to(D.float64) if is_tensor(input) else float(input)
    exponent = exponent.to(D.float64) if is_tensor(exponent) else float(exponent)
    return _out(pow(input, exponent), out)


def float_power_(self, exponent):
    if self.dtype is not D.float64:
        raise RuntimeError(
            f"the base given to float_power_ has dtype {self.dtype.name} but the operation's result requires dtype float64"
        )
    return pow_(self, exponent.to(D.float64) if is_tensor(exponent) else float(exponent))


# binary math functions ------------------------------------------------------------------------------------------


def _float_binary(op, input, other):
    target = float_result_type(input, other)
    _, (a, b) = promote_operands(input, other, dtype=target)
    return apply(op, a, b)


def _float_binary_inplace(op, self, other):
    check_float_inplace(op.name, self)
    return binary_inplace(op, self, other)


def _atan2_backward(ctx, g):
    a, b = ctx.saved_tensor("self"), ctx.saved_tensor("other")
    denom = a * a + b * b
    return _grads(ctx, g * (b / denom), g * (-a / denom))


def _hypot_backward(ctx, g):
    a, b, r = ctx.saved_tensor("self"), ctx.saved_tensor("other"), ctx.saved_tensor("result")
    return _grads(ctx, g * (a / r), g * (b / r))


def _copysign_backward(ctx, g):
    from munet.ops.creation import zeros_like

    ga = None
    if ctx.needs_input_grad[0]:  # self is saved only where it is a tensor that needs a gradient
        a, r = ctx.saved_tensor("self"), ctx.saved_tensor("result")
        ga = g * where(a == 0, 0.0, r / a)
    return _grads(ctx, ga, zeros_like(g))


def _xlogy_backward(ctx, g):
    a, b = ctx.saved_tensor("self"), ctx.saved_tensor("other")
    need = ctx.needs_input_grad
    ga = None
    if need[0]:
        # PyTorch 2.13: grad * log(other), also where self == 0, except 0 where self == 0 and
        # other <= 0 (log would be -inf or NaN there); a Python-number ``other`` gives grad * log(other).
        ga = g * where((a == 0) & (b <= 0), 0.0, b.log()) if is_tensor(b) else g * _scalar_log(b)
    gb = g * (a / b) if len(need) > 1 and need[1] else None
    return _grads(ctx, ga, gb)


def _scalar_log(value) -> float:
    if value > 0:
        return math.log(value)
    return -math.inf if value == 0 else math.nan


def _heaviside_backward(ctx, g):
    raise RuntimeError("the derivative for 'heaviside' is not implemented.")


def _xlogy(args, t):
    a, b = args
    zero = scalar.logical_and(scalar.eq(a, 0), scalar.logical_not(scalar.isnan(b)))
    return scalar.where(zero, 0, scalar.mul(a, scalar.log(b)))


def _heaviside(args, t):
    a, b = args
    return scalar.where(scalar.eq(a, 0), b, scalar.cast(scalar.gt(a, 0), t))


atan2_op = define("atan2", inputs=("self", "other"), meta=_binary_meta, backward=_atan2_backward,
                  saves=("self", "other"), formula=S.binary("atan2"))  # fmt: skip
hypot_op = define("hypot", inputs=("self", "other"), meta=_binary_meta, backward=_hypot_backward,
                  saves=("self", "other", "result"), formula=S.binary("hypot"))  # fmt: skip
copysign_op = define("copysign", inputs=("self", "other"), meta=_binary_meta, backward=_copysign_backward,
                     saves=(("self", 0), ("result", 0)), formula=S.binary("copysign"))  # fmt: skip
xlogy_op = define("xlogy", inputs=("self", "other"), meta=_binary_meta, backward=_xlogy_backward,
                  saves=("self", "other"), formula=_xlogy)  # fmt: skip
heaviside_op = define("heaviside", inputs=("self", "values"), meta=_binary_meta, backward=_heaviside_backward,
                      formula=_heaviside)  # fmt: skip


def atan2(input, other, *, out=None):
    """Angle of the point ``(other, input)``, in ``(-pi, pi]``."""
    _require_tensor("atan2", other)
    return _out(_float_binary(atan2_op, input, other), out)


def atan2_(self, other):
    _require_tensor("atan2_", other)
    return _float_binary_inplace(atan2_op, self, other)


arctan2, arctan2_ = atan2, atan2_


def hypot(input, other, *, out=None):
    """``sqrt(input**2 + other**2)`` without overflow; floating tensors only."""
    _require_tensor("hypot", other)
    if not D.result_type(input, other).is_floating_point:
        raise RuntimeError(f"hypot: expected floating tensors, got {input.dtype.name} and {other.dtype.name}")
    return _out(binary(hypot_op, input, other), out)


def hypot_(self, other):
    _require_tensor("hypot_", other)
    return _float_binary_inplace(hypot_op, self, other)


def copysign(input, other, *, out=None):
    """``|input|`` with the sign of ``other`` (a tensor or number); integers become floats."""
    return _out(_float_binary(copysign_op, input, other), out)


def copysign_(self, other):
    return _float_binary_inplace(copysign_op, self, other)


def xlogy(input, other, *, out=None):
    """``input * log(other)``, and 0 where ``input == 0`` (unless ``other`` is NaN)."""
    return _out(_float_binary(xlogy_op, input, other), out)


def xlogy_(self, other):
    return _float_binary_inplace(xlogy_op, self, other)


def heaviside(input, values, *, out=None):
    """0 where ``input < 0``, 1 where ``input > 0``, ``values`` where ``input == 0``."""
    _require_tensor("heaviside", values, role="values")
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return _out(apply(heaviside_op, input, values), out)


def heaviside_(self, values):
    _require_tensor("heaviside_", values, role="values")
    if self.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    return apply_inplace(heaviside_op, self, values)


# interpolation and fused multiply-adds ---------------------------------------------------------------------------


def _lerp_meta(start, end, weight):
    from munet.ops._registry import Meta
    from munet.ops._utils import broadcast_shapes, shape_of

    return Meta(broadcast_shapes(shape_of(start), shape_of(end), shape_of(weight), op="lerp"), start.dtype)


def _lerp_backward(ctx, g):
    need = ctx.needs_input_grad
    w = ctx.saved_tensor("weight")
    ga = g * (1 - w) if need[0] else None
    gb = g * w if need[1] else None
    gw = None
    if len(need) > 2 and need[2]:
        from munet.ops._utils import reduce_grad

        gw = reduce_grad(g * (ctx.saved_tensor("end") - ctx.saved_tensor("self")), ctx.input_shapes[2])
    a, b = _grads(ctx, ga, gb)
    return a, b, gw


def _lerp_formula(args, t):
    # PyTorch's: start + w * (end - start) for |w| < 0.5, else end - (end - start) * (1 - w)
    start, end, w = args
    diff = scalar.sub(end, start)
    low = scalar.add(start, scalar.mul(w, diff))
    high = scalar.sub(end, scalar.mul(diff, scalar.sub(1, w)))
    return scalar.where(scalar.lt(scalar.abs(w), 0.5), low, high)


lerp_op = define("lerp", inputs=("self", "end", "weight"), meta=_lerp_meta, backward=_lerp_backward,
                 saves=(("self", 2), ("end", 2), "weight"), formula=_lerp_formula)  # fmt: skip


def _check_lerp(name: str, input, end, weight) -> None:
    _require_tensor(name, end, role="end")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name}: expected a floating tensor, got {input.dtype.name}")
    if end.dtype is not input.dtype:
        raise RuntimeError(f"expected dtype {input.dtype.name} for `end` but got dtype {end.dtype.name}")
    if is_tensor(weight) and weight.dtype is not input.dtype:
        raise RuntimeError(f"expected dtype {input.dtype.name} for `weight` but got dtype {weight.dtype.name}")


def lerp(input, end, weight, *, out=None):
    """``input + weight * (end - input)``; ``weight`` is a number or a tensor."""
    _check_lerp("lerp", input, end, weight)
    return _out(apply(lerp_op, input, end, weight), out)


def lerp_(self, end, weight):
    _check_lerp("lerp_", self, end, weight)
    return apply_inplace(lerp_op, self, end, weight)


def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 * tensor2`` (``value`` is truncated for integer results)."""
    target = D.result_type(input, tensor1, tensor2)
    if not target.is_floating_point and target is not D.bool_:
        value = int(value)
    product = tensor1 * tensor2
    return _out(input + (product if value == 1 else product * value), out)


def addcmul_(self, tensor1, tensor2, *, value=1):
    return self.copy_(addcmul(self, tensor1, tensor2, value=value))


def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 / tensor2``; integer ``tensor1``/``tensor2`` are refused (as PyTorch)."""
    if not tensor1.dtype.is_floating_point and not tensor2.dtype.is_floating_point:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform "
            "a true division of tensor1 and tensor2. Use addcmul(input, tensor1, 1 / tensor2) instead."
        )
    quotient = tensor1 / tensor2
    return _out(input + (quotient if value == 1 else quotient * value), out)


def addcdiv_(self, tensor1, tensor2, *, value=1):
    return self.copy_(addcdiv(self, tensor1, tensor2, value=value))


arcsin, arcsin_ = asin, asin_
arccos, arccos_ = acos, acos_
arctan, arctan_ = atan, atan_
arcsinh, arcsinh_ = asinh, asinh_
arccosh, arccosh_ = acosh, acosh_
arctanh, arctanh_ = atanh, atanh_
