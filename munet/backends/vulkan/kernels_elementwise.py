"""Elementwise kernels: one WGSL expression per op and storage type (f32, i32, u32 for bool).

Ops defined by a scalar formula are not here: ``kernels_formula.py`` renders their expressions.

Operands arrive promoted to one dtype (by the op definitions); Python numbers become scalar
parameters of that dtype. An op without an expression for a dtype raises DeviceError.
"""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.vulkan.copies import new_view
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import VkView, storage_type
from munet.backends.vulkan.wgsl import Scalar, elementwise


def run(rt, name: str, exprs: dict, args, cond: bool = False, ref=None):
    """Apply ``exprs[kind]`` to ``args`` broadcast together; ``ref`` gives the dtype (default: first tensor)."""
    views = [a for a in args if isinstance(a, VkView)]
    ref = ref or views[0]
    kind = storage_type(ref.dtype, name)
    expr = exprs.get(kind)
    if expr is None:
        raise DeviceError(f"{name}: no vulkan kernel for dtype {ref.dtype.name}")
    shape = tuple(np.broadcast_shapes(*(v.shape for v in views)))
    operands = [a if isinstance(a, VkView) else Scalar(kind, a) for a in args]
    out = new_view(rt, shape, D.bool_ if cond else ref.dtype)
    return elementwise(rt, expr, operands, out, cond)


def _register(table: dict, cond: bool = False) -> None:
    for name, exprs in table.items():
        exprs = {k: v for k, v in zip(("f32", "i32", "u32"), exprs) if v is not None}

        def fn(rt, *args, _name=name, _exprs=exprs):
            return run(rt, _name, _exprs, args, cond)

        kernel(name)(fn)


def _guard(expr: str, bad: str) -> str:
    return f"select({expr}, nan_f(), {bad})"


# (f32, i32, bool) expressions; None where the dtype has no meaning or never reaches the kernel.
_register(
    {
        "abs": ("abs(a)", "abs(a)", "a"),
        "exp2": ("exp2(a)", None, None),
        "expm1": ("expm1_f(a)", None, None),
        "log2": (_guard("log2(a)", "a < 0.0"), None, None),
        "log10": (_guard("log2(a) * 0.30102999566398120", "a < 0.0"), None, None),
        "log1p": (_guard("log1p_f(a)", "a < -1.0"), None, None),
        "rsqrt": (_guard("1.0 / sqrt(a)", "a < 0.0"), None, None),
        "sin": ("sin(a)", None, None),
        "cos": ("cos(a)", None, None),
        "tan": ("tan(a)", None, None),
        # lavapipe's asin/acos builtins are off by ~4e-4; atan2 is accurate
        "asin": (_guard("atan2(a, sqrt((1.0 - a) * (1.0 + a)))", "abs(a) > 1.0"), None, None),
        "acos": (_guard("atan2(sqrt((1.0 - a) * (1.0 + a)), a)", "abs(a) > 1.0"), None, None),
        "atan": ("atan(a)", None, None),
        "sinh": ("sinh(a)", None, None),
        "cosh": ("cosh(a)", None, None),
        "asinh": ("asinh(a)", None, None),
        "acosh": (_guard("acosh(a)", "a < 1.0"), None, None),
        "atanh": (_guard("select(atanh(a), sign_f(a) * inf_f(), abs(a) == 1.0)", "abs(a) > 1.0"), None, None),
        "sigmoid": ("sigmoid_f(a)", None, None),
        "reciprocal": ("1.0 / a", None, None),
        "sign": ("sign_f(a)", "sign(a)", "a"),
        "floor": ("floor(a)", "a", None),
        "ceil": ("ceil(a)", "a", None),
        "trunc": ("trunc(a)", "a", None),
        "frac": ("a - trunc(a)", None, None),
        "deg2rad": ("a * 0.017453292519943295", None, None),
        "rad2deg": ("a * 57.29577951308232", None, None),
        "bitwise_not": (None, "~a", "1u - a"),
        # binary
        "maximum": ("max_f(a, b)", "max(a, b)", "max(a, b)"),
        "minimum": ("min_f(a, b)", "min(a, b)", "min(a, b)"),
        "fmax": ("fmax_f(a, b)", "max(a, b)", "max(a, b)"),
        "fmin": ("fmin_f(a, b)", "min(a, b)", "min(a, b)"),
        "pow": ("pow_f(a, b)", "pow_i(a, b)", "a | (1u - b)"),
        "atan2": ("atan2(a, b)", None, None),
        "hypot": ("sqrt(a * a + b * b)", None, None),
        "copysign": ("select(abs(a), -abs(a), (bitcast<u32>(b) & 0x80000000u) != 0u)", None, None),
        "xlogy": ("select(a * select(log(b), nan_f(), b < 0.0), 0.0, a == 0.0 && !isnan_f(b))", None, None),
        "heaviside": ("select(select(0.0, 1.0, a > 0.0), b, a == 0.0)", "select(select(0, 1, a > 0), b, a == 0)", None),
        "remainder": ("remainder_f(a, b)", None, None),
        "fmod": ("a % b", None, None),
        "div_floor": ("floor(a / b)", None, None),
        "div_trunc": ("trunc(a / b)", None, None),
        "bitwise_and": (None, "a & b", "a & b"),
        "bitwise_or": (None, "a | b", "a | b"),
        "bitwise_xor": (None, "a ^ b", "a ^ b"),
    }
)

# Float ``!=`` is written ``!(a == b)``: lavapipe evaluates WGSL's ``!=`` as an ordered
# comparison, so NaN != x came out false.
_register(
    {
        "eq": ("a == b",) * 3,
        "ne": ("!(a == b)", "a != b", "a != b"),
        "lt": ("a < b",) * 3,
        "le": ("a <= b",) * 3,
        "gt": ("a > b",) * 3,
        "ge": ("a >= b",) * 3,
        "isnan": ("isnan_f(a)", "false", "false"),
        "isinf": ("isinf_f(a)", "false", "false"),
        "isposinf": ("isinf_f(a) && a > 0.0", "false", "false"),
        "isneginf": ("isinf_f(a) && a < 0.0", "false", "false"),
        "isfinite": ("!(isnan_f(a) || isinf_f(a))", "true", "true"),
        "signbit": ("(bitcast<u32>(a) & 0x80000000u) != 0u", "a < 0", "false"),
    },
    cond=True,
)

_ZERO = {"f32": "0.0", "i32": "0", "u32": "0u"}


def _truth(name: str, x) -> str:
    kind = storage_type(x.dtype) if isinstance(x, VkView) else "f32"
    return f"!({name} == {_ZERO[kind]})"  # not ``!=``: NaN must count as true (see "ne")


def _logical(op: str):
    def fn(rt, *args):
        args = [a if isinstance(a, VkView) else float(a) for a in args]
        truths = [_truth(n, a) for n, a in zip("ab", args)]
        expr = f" {op} ".join(truths) if len(truths) == 2 else f"!{truths[0]}"
        operands = [a if isinstance(a, VkView) else Scalar("f32", a) for a in args]
        shape = tuple(np.broadcast_shapes(*(a.shape for a in args if isinstance(a, VkView))))
        return elementwise(rt, expr, operands, new_view(rt, shape, D.bool_), cond=True)

    return fn


kernel("logical_and")(_logical("&&"))
kernel("logical_or")(_logical("||"))
kernel("logical_xor")(_logical("!="))
kernel("logical_not")(_logical(""))


@kernel("where")
def where(rt, condition, a, b):
    views = [x for x in (a, b) if isinstance(x, VkView)]
    dtype = views[0].dtype if views else D.result_type(a, b)  # both numbers: where_op's dtype rule
    kind = storage_type(dtype, "where")
    cond = condition if condition.dtype is D.bool_ else run(rt, "ne", {kind: "!(a == b)"}, [condition, 0], cond=True)
    shape = tuple(np.broadcast_shapes(*(v.shape for v in (cond, a, b) if isinstance(v, VkView))))
    operands = [cond] + [x if isinstance(x, VkView) else Scalar(kind, x) for x in (a, b)]
    return elementwise(rt, "select(c, b, a != 0u)", operands, new_view(rt, shape, dtype))


@kernel("clamp")
def clamp(rt, x, lo, hi):
    kind = storage_type(x.dtype, "clamp")
    expr, args = "a", [x]
    for bound, cmp in ((lo, "<"), (hi, ">")):
        if bound is None:
            continue
        name = "abc"[len(args)]
        expr = (
            f"select({expr}, {name}, {expr} {cmp} {name})"
            if kind == "f32"
            else f"{'max' if cmp == '<' else 'min'}({expr}, {name})"
        )
        args.append(bound)
    return run(rt, "clamp", {kind: expr}, args, ref=x)


@kernel("round")
def round_(rt, x, *, decimals=0):
    if storage_type(x.dtype, "round") != "f32":
        return run(rt, "round", {"i32": "a", "u32": "a"}, [x])
    if decimals == 0:
        return run(rt, "round", {"f32": "round(a)"}, [x])
    if decimals > 0:
        return run(rt, "round", {"f32": "round(a * b) / b"}, [x, 10.0**decimals])
    return run(rt, "round", {"f32": "round(a / b) * b"}, [x, 10.0 ** (-decimals)])
