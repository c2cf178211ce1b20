"""Scalar formulas: the expression IR an elementwise primitive is defined by.

An elementwise op passes ``define(..., formula=f)``: ``f(args, dtype, **attrs)`` returns the
op's value at one index as an expression of its argument expressions ``args`` (one per
input, in order; a Python-number argument arrives as a :class:`Const`), computed in
``dtype``. Every kernel of the op is rendered from that one formula: the CPU eager and
memory-plan kernels (``munet/backends/cpu/kernels_formula.py``, NumPy ufuncs) and the
compiler's fused C and WGSL kernels (``munet/compiler/codegen/kernel.py`` substitutes its
loads for ``args``).

Expressions are frozen dataclasses (equal subtrees are one value, so renderers emit each once):

- :class:`Arg` is argument ``index`` of the op (a renderer binds it to its operand);
- :class:`Param` is a runtime host scalar (a learning rate), :class:`Const` a literal;
- :class:`Apply` is one scalar op of :data:`SCALAR_OPS`.

``dtype`` is a string a renderer understands: the kernel IR's short names (``'f32'``,
``'f64'``, ``'bool'``, ``'i64'``) or a NumPy dtype name; a formula only passes it on.

Example, ``lerp``'s formula::

    def lerp(a, t):
        start, end, w = a
        diff = sub(end, start, t)
        low = add(start, mul(w, diff, t), t)
        high = sub(end, mul(diff, sub(Const(1.0, t), w, t), t), t)
        return where(lt(absolute(w, t), Const(0.5, t)), low, high, t)
"""

from __future__ import annotations

from dataclasses import dataclass

# Scalar op vocabulary every renderer implements: name -> arity.
SCALAR_OPS = {
    "add": 2,
    "sub": 2,
    "mul": 2,
    "div": 2,
    "maximum": 2,  # NumPy's maximum: NaN propagates
    "lt": 2,
    "gt": 2,
    "ge": 2,
    "eq": 2,
    "neg": 1,
    "abs": 1,
    "exp": 1,
    "log": 1,
    "sqrt": 1,
    "tanh": 1,
    "erf": 1,  # float64 only in fused kernels: a float32 erf is expanded into arithmetic
    "cast": 1,
    "where": 3,
}


@dataclass(frozen=True)
class Arg:
    """Argument ``index`` of the op the formula defines."""

    index: int
    dtype: str


@dataclass(frozen=True)
class Param:
    index: int
    dtype: str


@dataclass(frozen=True)
class Const:
    value: float
    dtype: str


@dataclass(frozen=True)
class Apply:
    op: str
    args: tuple
    dtype: str


def constant(x, dtype: str):
    """``x`` itself when it is an expression, else the literal ``Const(float(x), dtype)``."""
    return Const(float(x), dtype) if isinstance(x, (int, float, bool)) else x


def binary(op: str):
    """The formula ``op(a, b)`` (a scalar op of :data:`SCALAR_OPS`)."""

    def formula(args, dtype):
        return Apply(op, (args[0], args[1]), dtype)

    formula.__name__ = op
    return formula


def unary(op: str):
    """The formula ``op(a)`` (a scalar op of :data:`SCALAR_OPS`)."""

    def formula(args, dtype):
        return Apply(op, (args[0],), dtype)

    formula.__name__ = op
    return formula
