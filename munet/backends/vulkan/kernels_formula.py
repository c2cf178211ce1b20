"""Vulkan kernels rendered from scalar formulas: each scalar op printed as WGSL.

For every op defined with a ``formula`` (``munet/ops/_scalar.py``) this registers the eager
kernel. Per operand storage types (f32, i32, bool) and attrs, the formula is rendered once
(:mod:`~munet.backends.vulkan.scalar_wgsl` prints each scalar op) as a WGSL function ``value``
of the operands, each distinct subexpression a ``let``, and run elementwise over the operands
broadcast together. Python numbers become scalar parameters of the compute type (the first
tensor operand's that is not a ``where`` condition). A formula needing a scalar op without a
WGSL form for its operands leaves the op without a kernel for that dtype: it raises DeviceError
naming the op and dtype, as any dtype the device cannot hold does.
"""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.vulkan.copies import new_view
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.scalar_wgsl import (
    SPECIAL_FUNCTIONS,
    WGSL_TYPES,
    UnrenderableError,
    formula_dtype,
    literal,
    render_apply,
    uses_special,
)
from munet.backends.vulkan.views import VkView, storage_type
from munet.backends.vulkan.wgsl import NAMES, Scalar, elementwise
from munet.ops._registry import DEFINE_HOOKS, OPS
from munet.ops._scalar import Apply, Arg, Const, kind


def render_wgsl_function(expr, arg_dtypes: list) -> str:
    """WGSL ``fn value(a, b, ...)`` returning formula expression ``expr`` (arguments of ``arg_dtypes``)."""
    lines: list = []
    names: dict = {}

    def emit(e) -> str:
        if isinstance(e, Arg):
            return NAMES[e.index]
        if isinstance(e, Const):
            return literal(e.value, e.dtype)
        if not isinstance(e, Apply):
            raise RuntimeError(f"vulkan formula renderer: internal error: {e!r} is not a formula expression")
        if e not in names:
            text = render_apply(e, [emit(a) for a in e.args])
            names[e] = f"v{len(names)}"
            lines.append(f"  let {names[e]} = {text};")
        return names[e]

    result = emit(expr)
    params = ", ".join(f"{NAMES[i]}: {WGSL_TYPES[kind(d)]}" for i, d in enumerate(arg_dtypes))
    ret = WGSL_TYPES[kind(expr.dtype)]
    return "\n".join([f"fn value({params}) -> {ret} {{", *lines, f"  return {result};", "}"]) + "\n"


class WgslFormula:
    """An op's formula rendered as WGSL per operand storage types (and attrs), run elementwise."""

    def __init__(self, name: str, formula, conditions=()):
        self.name = name
        self.formula = formula
        self.conditions = frozenset(conditions)
        self.programs: dict = {}

    def __call__(self, rt, *args, **attrs):
        present = [a for a in args if a is not None]
        values = [a for i, a in enumerate(args) if a is not None and i not in self.conditions]
        views = [a for a in values if isinstance(a, VkView)]
        dtype = views[0].dtype if views else D.result_type(*values)  # numbers only: where's dtype rule
        compute = formula_dtype(storage_type(dtype, self.name))
        kinds = tuple(formula_dtype(storage_type(a.dtype, self.name)) if isinstance(a, VkView) else compute
                      for a in present)  # fmt: skip
        key = (kinds, tuple(a is None for a in args), *attrs.items())
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self._render(args, kinds, compute, attrs)
        source, call, result = program
        if source is None:
            raise DeviceError(f"{self.name}: no vulkan kernel for dtype {dtype.name} ({call})")
        shape = tuple(np.broadcast_shapes(*(v.shape for v in present if isinstance(v, VkView))))
        operands = [a if isinstance(a, VkView) else Scalar(_storage_of(k), a) for a, k in zip(present, kinds)]
        out = new_view(rt, shape, dtype if result == compute else _RESULT_DTYPES[result])
        return elementwise(rt, call, operands, out, cond=result == "bool", prelude=source)

    def _render(self, args, kinds, compute, attrs):
        """``(WGSL function source, call expression, result dtype)``; the source is None when unrenderable."""
        formula_args, k = [], 0
        for a in args:
            formula_args.append(None if a is None else Arg(k, kinds[k]))
            k += a is not None
        expr = self.formula(formula_args, compute, **attrs)
        try:
            source = render_wgsl_function(expr, list(kinds))
        except UnrenderableError as e:
            return None, str(e), expr.dtype
        if uses_special(source):
            source = SPECIAL_FUNCTIONS + source
        call_args = [f"({NAMES[i]} != 0u)" if k == "bool" else NAMES[i] for i, k in enumerate(kinds)]
        return source, f"value({', '.join(call_args)})", expr.dtype


_RESULT_DTYPES = {"bool": D.bool_, "f32": D.float32, "i32": D.int32}  # a result of another kind than the operands'


def _storage_of(formula_kind: str) -> str:
    return "u32" if formula_kind == "bool" else formula_kind


def _render(op) -> None:
    """Register the eager kernel of a formula op."""
    if op.formula is not None:
        conditions = [i for i, role in enumerate(op.inputs) if role == "condition"]
        kernel(op.name)(WgslFormula(op.name, op.formula, conditions))


for _op in OPS.values():
    _render(_op)
DEFINE_HOOKS.append(_render)
