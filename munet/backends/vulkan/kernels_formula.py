"""Vulkan kernels rendered from scalar formulas: each scalar op printed as WGSL.

For every op defined with a ``formula`` (``munet/ops/_scalar.py``) this registers the eager
kernel, one WGSL expression per storage type (f32, i32, u32 for bool) rendered from the
formula and run by :func:`~munet.backends.vulkan.kernels_elementwise.run` (the op's arguments
are ``a``, ``b``, ``c``). The renderer knows scalar ops, not ops; the float helpers are the
backend's ``PRELUDE`` (``tanh_f``; ``log``/``sqrt`` of a negative number is NaN, said
explicitly because WGSL leaves it undefined). A scalar op without a WGSL form for a storage
type leaves the op without a kernel for that dtype (it then raises DeviceError naming it).
"""

from __future__ import annotations

from munet.backends.vulkan.kernels_elementwise import run
from munet.backends.vulkan.registry import kernel
from munet.ops._registry import OPS
from munet.ops._scalar import Apply, Arg, Const

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "gt": ">", "ge": ">=", "eq": "=="}
# storage type -> scalar op -> WGSL template over the rendered arguments
_FORMS = {
    "f32": {
        **{op: f"({{}} {sign} {{}})" for op, sign in _INFIX.items()},
        "neg": "(-{})",
        "abs": "abs({})",
        "exp": "exp({})",
        "log": "select(log({0}), nan_f(), {0} < 0.0)",
        "sqrt": "select(sqrt({0}), nan_f(), {0} < 0.0)",
        "tanh": "tanh_f({})",
        "maximum": "max_f({}, {})",
        "where": "select({2}, {1}, {0})",
    },
    "i32": {
        **{op: f"({{}} {sign} {{}})" for op, sign in _INFIX.items() if op != "div"},
        "neg": "(-{})",
        "abs": "abs({})",
        "maximum": "max({}, {})",
        "where": "select({2}, {1}, {0})",
    },
    "u32": {"add": "({} | {})", "mul": "({} & {})", "maximum": "max({}, {})", "where": "select({2}, {1}, {0})"},
}
_LITERALS = {"f32": lambda v: repr(float(v)), "i32": lambda v: str(int(v)), "u32": lambda v: f"{int(bool(v))}u"}


class UnrenderableFormulaError(ValueError):
    """A formula using a scalar op that has no WGSL form for a storage type."""


def render_wgsl_formula(expr, kind: str) -> str:
    """The WGSL expression of formula expression ``expr`` in storage type ``kind``; arguments are ``a, b, c``."""
    if isinstance(expr, Arg):
        return "abc"[expr.index]
    if isinstance(expr, Const):
        if kind != "f32" and expr.value != int(expr.value):
            raise UnrenderableFormulaError(f"vulkan formula renderer: {expr.value} is not a {kind} literal")
        return _LITERALS[kind](expr.value)
    if not isinstance(expr, Apply):
        raise UnrenderableFormulaError(f"vulkan formula renderer: cannot render {expr!r}")
    form = _FORMS[kind].get(expr.op)
    if form is None:
        raise UnrenderableFormulaError(f"vulkan formula renderer: no {kind} form of scalar op '{expr.op}'")
    return form.format(*(render_wgsl_formula(a, kind) for a in expr.args))


def _expressions(op) -> dict:
    """Storage type -> WGSL expression of ``op``'s formula, for the types it renders in."""
    exprs = {}
    for kind in _FORMS:
        args = [Arg(i, kind) for i in range(len(op.inputs))]
        try:
            exprs[kind] = render_wgsl_formula(op.formula(args, kind), kind)
        except UnrenderableFormulaError:
            continue
    return exprs


def _register(name: str, exprs: dict) -> None:
    def fn(rt, *args):
        return run(rt, name, exprs, args)

    kernel(name)(fn)


for _name, _op in OPS.items():
    if _op.formula is not None:
        _register(_name, _expressions(_op))
