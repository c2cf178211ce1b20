"""Scalar formulas: the expression IR an elementwise primitive is defined by.

An elementwise op passes ``define(..., formula=f)``: ``f(args, dtype, **attrs)`` returns the
op's value at one index as an expression of its argument expressions ``args`` (one per
input, in order; a Python-number argument arrives as a :class:`Const`, a missing optional one
as ``None``), where ``dtype`` is the dtype its operands were promoted to (for ``where``, that of
the values it selects). Every kernel of the op is rendered from that one formula: the CPU eager
and memory-plan kernels (``munet/backends/cpu/kernels_formula.py``, NumPy ufuncs), the vulkan
kernels (``munet/backends/vulkan/kernels_formula.py``, WGSL) and the compiler's fused C and WGSL
kernels (``munet/compiler/codegen/kernel.py`` substitutes its loads for ``args``).

Expressions are frozen dataclasses (equal subtrees are one value, so renderers emit each once):

- :class:`Arg` is argument ``index`` of the op (a renderer binds it to its operand);
- :class:`Param` is a runtime host scalar (a learning rate), :class:`Const` a literal (its value
  converted to its dtype as NumPy's ``astype`` does: a fraction truncates toward zero);
- :class:`Apply` is one scalar op of :data:`SCALAR_OPS`.

``dtype`` is a string a renderer understands: the kernel IR's short names (``'f32'``,
``'f64'``, ``'bool'``, ``'i64'``), vulkan's ``'i32'``, or a NumPy dtype name; :func:`kind`
classifies it. Formulas build expressions with :data:`scalar` (``scalar.exp(x)``), which infers
each result's dtype and turns Python numbers into literals of their operands' dtype.

Example, ``leaky_relu``'s formula (an attr is a parameter of the formula)::

    def leaky_relu(args, t, *, negative_slope):
        (x,) = args
        return scalar.where(scalar.gt(x, 0), x, scalar.mul(x, negative_slope))
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import NamedTuple

FLOAT, INT, BOOL = "float", "int", "bool"
_NUMBER = (FLOAT, INT)
_ANY = (FLOAT, INT, BOOL)


class ScalarOp(NamedTuple):
    """A scalar op: how many arguments, the dtype kinds it takes, its result (``'same'``, ``'bool'``, ``'cast'``)."""

    arity: int
    kinds: tuple
    result: str = "same"


# float functions of one argument (C99's; erfinv(+-1) = +-inf, NaN outside [-1, 1]; rint: to nearest, ties to even)
_FLOAT_FUNCTIONS = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos", "tan", "asin",
                    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv",
                    "floor", "ceil", "trunc", "rint")  # fmt: skip

# The vocabulary every renderer implements (NumPy, C, WGSL). Float ops follow IEEE and C99's math
# library; where a renderer's language lacks a float64 or cannot report an integer division by
# zero, that renderer leaves the (op, kind) out and says so.
SCALAR_OPS = {
    "add": ScalarOp(2, _ANY),  # bool: or
    "sub": ScalarOp(2, _NUMBER),
    "mul": ScalarOp(2, _ANY),  # bool: and
    "div": ScalarOp(2, (FLOAT,)),
    "floor_divide": ScalarOp(2, _NUMBER),  # Python's //, NumPy's floor_divide; an integer zero divisor raises
    "fmod": ScalarOp(2, _NUMBER),  # C's fmod (integers: the truncated remainder); an integer zero divisor raises
    "pow": ScalarOp(2, _NUMBER),  # C's pow; integers: exponent >= 0, wrapping
    "atan2": ScalarOp(2, (FLOAT,)),
    "hypot": ScalarOp(2, (FLOAT,)),
    "copysign": ScalarOp(2, (FLOAT,)),
    "maximum": ScalarOp(2, _ANY),  # NaN propagates; which zero a -0.0/0.0 tie gives is unspecified
    "minimum": ScalarOp(2, _ANY),
    "fmax": ScalarOp(2, (FLOAT,)),  # C's fmax: NaN only where both are NaN
    "fmin": ScalarOp(2, (FLOAT,)),
    "lt": ScalarOp(2, _ANY, "bool"),
    "le": ScalarOp(2, _ANY, "bool"),
    "gt": ScalarOp(2, _ANY, "bool"),
    "ge": ScalarOp(2, _ANY, "bool"),
    "eq": ScalarOp(2, _ANY, "bool"),
    "ne": ScalarOp(2, _ANY, "bool"),  # NaN != x is true
    "logical_and": ScalarOp(2, (BOOL,)),
    "logical_or": ScalarOp(2, (BOOL,)),
    "logical_xor": ScalarOp(2, (BOOL,)),
    "logical_not": ScalarOp(1, (BOOL,)),
    "bitwise_and": ScalarOp(2, (INT, BOOL)),
    "bitwise_or": ScalarOp(2, (INT, BOOL)),
    "bitwise_xor": ScalarOp(2, (INT, BOOL)),
    "bitwise_not": ScalarOp(1, (INT, BOOL)),
    "shift_left": ScalarOp(2, (INT,)),  # shift counts in [0, bits(dtype)) only
    "shift_right": ScalarOp(2, (INT,)),  # arithmetic for signed integers
    "neg": ScalarOp(1, _NUMBER),
    "abs": ScalarOp(1, _NUMBER),
    **{name: ScalarOp(1, (FLOAT,)) for name in _FLOAT_FUNCTIONS},
    # fmt: skip
    "signbit": ScalarOp(1, (FLOAT,), "bool"),
    "isnan": ScalarOp(1, (FLOAT,), "bool"),
    "isinf": ScalarOp(1, (FLOAT,), "bool"),
    # the binary parts of a float, exact for every value (subnormals too): C99's frexp as two ops, the
    # exponent as a float of the operand's dtype (0 with mantissa x for zeros, infinities and NaN), and
    # C99's nextafter (y where x == y, NaN where either is NaN)
    "frexp_mantissa": ScalarOp(1, (FLOAT,)),
    "frexp_exponent": ScalarOp(1, (FLOAT,)),
    "nextafter": ScalarOp(2, (FLOAT,)),
    "cast": ScalarOp(1, _ANY, "cast"),  # float -> int truncates; -> bool is != 0 (NaN is true)
    "where": ScalarOp(3, _ANY),  # where(condition: bool, a, b)
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
    """One scalar op of :data:`SCALAR_OPS`. Its hash is computed once, from its arguments' (cached)
    hashes: a recurrence shares each partial value between two later ones, and hashing the DAG as a
    tree would take time exponential in its depth."""

    op: str
    args: tuple
    dtype: str
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self):
        object.__setattr__(self, "_hash", hash((self.op, self.args, self.dtype)))

    def __hash__(self) -> int:
        return self._hash


def digest(value) -> str:
    """A deterministic hex digest of an expression DAG (or of tuples and lists of expressions and
    other dataclasses, such as kernel stores), visiting each shared subexpression once; ``repr`` would
    print the DAG as a tree, exponential in the depth of a recurrence. Names of generated kernels."""
    seen: dict[int, str] = {}

    def visit(v) -> str:
        key = id(v)
        if key in seen:
            return seen[key]
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            parts = [type(v).__name__] + [visit(getattr(v, f.name)) for f in dataclasses.fields(v) if f.compare]
        elif isinstance(v, (tuple, list)):
            parts = ["(", *(visit(x) for x in v)]
        else:
            return repr(v)
        seen[key] = result = hashlib.sha1("\x00".join(parts).encode()).hexdigest()
        return result

    return visit(value)


def kind(dtype: str) -> str:
    """``'float'``, ``'int'`` or ``'bool'`` for a dtype name (``'f32'``, ``'float16'``, ``'i64'``, ``'uint8'``...).

    ``'complex64'``/``'complex128'`` are float: the formulas complex tensors may use (arithmetic,
    exp, log, pow; ``munet/ops/complex.py``) mean the same for them, rendered by NumPy only."""
    if dtype == "bool":
        return BOOL
    return FLOAT if dtype.startswith(("f", "bfloat", "complex")) else INT


def is_unsigned(dtype: str) -> bool:
    return dtype.startswith("u")


def bits(dtype: str) -> int:
    """The width of an integer dtype name: ``'i32'`` -> 32, ``'int8'`` -> 8, ``'uint16'`` -> 16."""
    return int("".join(c for c in dtype if c.isdigit()))


def constant(x, dtype: str):
    """``x`` itself when it is an expression (or None), else the literal ``Const(float(x), dtype)``."""
    return Const(float(x), dtype) if isinstance(x, (int, float, bool)) else x


def _expression_dtype(args) -> str:
    dtypes = [a.dtype for a in args if not isinstance(a, (int, float, bool))]
    if not dtypes:
        raise TypeError("scalar formula: an op of Python numbers only (one argument must be an expression)")
    return dtypes[0]


class ScalarBuilders:
    """``scalar.<op>(*args)`` builds ``Apply(op, args, dtype)`` for every op of :data:`SCALAR_OPS`.

    The result dtype is inferred: ``'bool'`` for comparisons and tests, the branches' dtype for
    ``where``, else the first expression argument's; Python numbers become :class:`Const` s of
    that dtype. ``scalar.cast(x, dtype)`` names its target.
    """

    def __init__(self):
        for name, spec in SCALAR_OPS.items():
            setattr(self, name, self._builder(name, spec))

    @staticmethod
    def _builder(name: str, spec: ScalarOp):
        if name == "cast":

            def cast(x, dtype: str):
                return x if getattr(x, "dtype", None) == dtype else Apply("cast", (x,), dtype)

            return cast

        def build(*args):
            if len(args) != spec.arity:
                raise TypeError(f"scalar.{name}: expected {spec.arity} arguments, got {len(args)}")
            if name == "where" and getattr(args[0], "dtype", None) != "bool":
                raise TypeError(f"scalar.where: the condition must be a bool expression, got {args[0]!r}")
            values = args[1:] if name == "where" else args
            dtype = _expression_dtype(values)
            operands = tuple(constant(a, "bool" if name == "where" and i == 0 else dtype) for i, a in enumerate(args))
            return Apply(name, operands, "bool" if spec.result == "bool" else dtype)

        build.__name__ = name
        return build


scalar = ScalarBuilders()


def binary(op: str):
    """The formula ``op(a, b)`` (a scalar op of :data:`SCALAR_OPS`)."""
    build = getattr(scalar, op)

    def formula(args, dtype):
        return build(args[0], args[1])

    formula.__name__ = op
    return formula


def unary(op: str):
    """The formula ``op(a)`` (a scalar op of :data:`SCALAR_OPS`)."""
    build = getattr(scalar, op)

    def formula(args, dtype):
        return build(args[0])

    formula.__name__ = op
    return formula


# What the arithmetic, comparison and logical ops mean on bool operands, in the C-family syntax
# the C-like renderers share (CUDA C and WGSL print bool values with these operators).
BOOL_FORMS = {
    "add": "({0} || {1})",
    "mul": "({0} && {1})",
    "maximum": "({0} || {1})",
    "minimum": "({0} && {1})",
    "lt": "(!{0} && {1})",
    "le": "(!{0} || {1})",
    "gt": "({0} && !{1})",
    "ge": "({0} || !{1})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "logical_and": "({0} && {1})",
    "logical_or": "({0} || {1})",
    "logical_xor": "({0} != {1})",
    "logical_not": "(!{0})",
    "bitwise_and": "({0} && {1})",
    "bitwise_or": "({0} || {1})",
    "bitwise_xor": "({0} != {1})",
    "bitwise_not": "(!{0})",
}
