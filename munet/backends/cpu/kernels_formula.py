"""CPU kernels rendered from scalar formulas: each scalar op printed as a NumPy ufunc call.

For every op defined with a ``formula`` (``munet/ops/_scalar.py``) this registers the eager
kernel ``name`` (a new array) and ``name_`` (in place, into its first argument);
:func:`out_kernel` gives the memory plan's ``fn(out, *args)``. This is also the CPU path of
compiled programs where no C compiler exists (``lower_cpu.py`` runs fused groups' members with
these kernels). The renderer knows scalar ops, not ops: a formula is instantiated once per
operand dtypes (and attrs) and compiled to nested ufunc calls, the last of which writes ``out``.

Operands are converted by :func:`operands`: Python numbers take the array operands' dtype
(wrapping like PyTorch's scalar conversion), float16/bfloat16 compute in float32 and the
caller casts the result back, as PyTorch does on CPU. A ``where`` whose condition is a single
value (a Python-number weight of ``lerp``) evaluates only the branch it picks. ``erf``,
``erfc`` and ``erfinv`` are computed by ``special_functions.py``; an integer ``floor_divide``
or ``fmod`` by zero raises PyTorch's ``ZeroDivisionError``.
"""

from __future__ import annotations

import numpy as np

from munet.backends.cpu import special_functions
from munet.backends.cpu.kernels_reduce import LOW_PRECISION, upcast
from munet.backends.cpu.registry import kernel
from munet.ops._registry import OPS
from munet.ops._scalar import Apply, Arg, Const


def _compute(x):
    """Upcast float16/bfloat16 arrays to float32; other arrays and numbers pass through."""
    return upcast(x) if isinstance(x, np.ndarray) else x


def operands(*args):
    """Compute-dtype arrays for all operands: Python numbers take the array operands' dtype."""
    for a in args:
        if type(a) is not np.ndarray or a.dtype in LOW_PRECISION:
            break
    else:
        return args  # the common case: arrays of one computable dtype, nothing to convert
    args = [_compute(a) for a in args]
    dtype = next((a.dtype for a in args if isinstance(a, np.ndarray)), None)
    if dtype is None:
        return [a if a is None else np.asarray(a) for a in args]
    return [a if isinstance(a, np.ndarray) or a is None else _scalar(a, dtype) for a in args]


def _scalar(value, dtype):
    if dtype.kind == "f" and type(value) is float:
        with np.errstate(over="ignore"):
            return dtype.type(value)  # a NumPy scalar: NEP 50 keeps the array's dtype
    if dtype.kind in "iu" and isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        bits = 8 * dtype.itemsize
        return np.array(int(value) & ((1 << bits) - 1), dtype=np.uint64).astype(dtype)
    with np.errstate(over="ignore"):
        return np.array(value).astype(dtype)


def _integer_division(ufunc):
    """``ufunc`` (floor_divide, fmod) that raises PyTorch's error for an integer zero divisor."""

    def run(a, b, out=None, casting="unsafe"):
        if b.dtype.kind in "iub" and np.any(b == 0):
            raise RuntimeError("ZeroDivisionError")
        return ufunc(a, b, out=out, casting=casting)

    return run


_UFUNCS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "floor_divide": _integer_division(np.floor_divide),
    "fmod": _integer_division(np.fmod),
    "pow": np.power,
    "atan2": np.arctan2,
    "hypot": np.hypot,
    "copysign": np.copysign,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "fmax": np.fmax,
    "fmin": np.fmin,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
    "logical_not": np.logical_not,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "bitwise_not": np.invert,
    "shift_left": np.left_shift,
    "shift_right": np.right_shift,
    "neg": np.negative,
    "abs": np.absolute,
    "exp": np.exp,
    "exp2": np.exp2,
    "expm1": np.expm1,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "log1p": np.log1p,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "rint": np.rint,
    "signbit": np.signbit,
    "isnan": np.isnan,
    "isinf": np.isinf,
}
# scalar ops computed in float64 by an algorithm of their own; the result is rounded once
_FLOAT64_FUNCTIONS = {
    "erf": special_functions.erf,
    "erfc": special_functions.erfc,
    "erfinv": special_functions.erfinv,
}
RENDERED_OPS = frozenset(_UFUNCS) | frozenset(_FLOAT64_FUNCTIONS) | {"cast", "where"}  # all of SCALAR_OPS (tested)


_SHORT_NAMES = {"bool": "bool", "f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64"}


def _np_dtype(dtype: str):
    """The NumPy dtype of a formula dtype name (a NumPy name, or the kernel IR's short one)."""
    return np.dtype(_SHORT_NAMES.get(dtype, dtype))


def _compile(e, top: bool = False):
    """``run(args, out)`` evaluating expression ``e`` (``out``: where the result goes, or None).

    ``top``: ``e`` is the formula's value, which may stay in float64 (the caller rounds it once).
    """
    if isinstance(e, Arg):
        i = e.index
        return lambda args, out: args[i]
    if isinstance(e, Const):
        dtype = _np_dtype(e.dtype)  # an integer literal wraps, a fraction truncates
        value = np.asarray(int(e.value) if dtype.kind in "iu" else e.value).astype(dtype)
        return lambda args, out: value
    if not isinstance(e, Apply) or e.op not in RENDERED_OPS:
        raise RuntimeError(f"cpu formula renderer: internal error: {e!r} is not a scalar formula expression")
    subs = [_compile(a) for a in e.args]
    if e.op == "where":
        return _compile_where(*subs)
    if e.op == "cast":
        (f,) = subs
        dtype = _np_dtype(e.dtype)
        return lambda args, out: f(args, None).astype(dtype) if out is None else _copy(out, f(args, None))
    if e.op in _FLOAT64_FUNCTIONS:
        (f,) = subs
        fn, dtype = _FLOAT64_FUNCTIONS[e.op], _np_dtype(e.dtype)
        if top:
            return lambda args, out: fn(f(args, None)) if out is None else _copy(out, fn(f(args, None)))
        return lambda args, out: fn(f(args, None)).astype(dtype)
    ufunc = _UFUNCS[e.op]
    if all(isinstance(a, Arg) for a in e.args):  # a leaf op: no nested calls
        positions = [a.index for a in e.args]
        if positions == [0]:
            return lambda args, out: ufunc(args[0], out=out, casting="unsafe")
        if positions == [0, 1]:
            return lambda args, out: ufunc(args[0], args[1], out=out, casting="unsafe")
    if len(subs) == 1:
        (f,) = subs
        return lambda args, out: ufunc(f(args, None), out=out, casting="unsafe")
    f, g = subs
    return lambda args, out: ufunc(f(args, None), g(args, None), out=out, casting="unsafe")


def _copy(out, value):
    np.copyto(out, value, casting="unsafe")
    return out


def _compile_where(cond, a, b):
    def run(args, out):
        c = cond(args, None)
        if np.ndim(c) == 0:  # one branch for every element: compute only that one
            return (a if c else b)(args, out)
        result = np.where(c, a(args, None), b(args, None))
        return result if out is None else _copy(out, result)

    return run


def _program(expr):
    """``run(args, out)`` for the formula's value ``expr``: always a new array or ``out`` itself."""
    body = _compile(expr, top=True)
    if isinstance(expr, Apply) and expr.op not in ("where", "cast"):
        return body  # a ufunc (or float64 function) call: its result is new, or ``out``

    dtype = _np_dtype(expr.dtype)

    def run(args, out):  # an argument, a literal or a selected branch: copied into a new array or ``out``
        value = body(args, out)
        if out is not None:
            return value if value is out else _copy(out, value)
        shape = np.broadcast_shapes(*(np.shape(a) for a in args if a is not None))
        if type(value) is np.ndarray and value.shape == shape and not any(value is a for a in args):
            return value
        return np.array(np.broadcast_to(value, shape), dtype=dtype)

    return run


class NumpyFormula:
    """A scalar formula rendered with NumPy ufuncs, compiled once per operand dtypes (and attrs).

    ``fresh(*args, **attrs)`` returns a new array, ``into(out, *args, **attrs)`` writes ``out``,
    ``inplace(x, *args, **attrs)`` writes the result over its first argument ``x``. Arguments in
    ``conditions`` (``where``'s condition) keep their dtype: Python numbers take the other operands'.
    """

    def __init__(self, formula, conditions=()):
        self.formula = formula
        self.conditions = frozenset(conditions)
        self.programs: dict = {}

    def operands(self, args):
        if not self.conditions:
            return operands(*args)
        values = iter(operands(*(a for i, a in enumerate(args) if i not in self.conditions)))
        return [a if i in self.conditions else next(values) for i, a in enumerate(args)]

    def program(self, args, attrs):
        dtypes = tuple(getattr(a, "dtype", None) for a in args)
        key = (dtypes, *attrs.items()) if attrs else dtypes
        run = self.programs.get(key)
        if run is None:
            run = self.programs[key] = _program(self.instantiate(dtypes, attrs))
        return run

    def instantiate(self, dtypes, attrs):
        """The formula's expression for operands of ``dtypes`` (None: a missing optional argument)."""
        names = [None if d is None else d.name for d in dtypes]
        values = [n for i, n in enumerate(names) if n is not None and i not in self.conditions]
        compute = values[0] if values else next(n for n in names if n is not None)
        return self.formula([None if n is None else Arg(i, n) for i, n in enumerate(names)], compute, **attrs)

    def fresh(self, *args, **attrs):
        args = self.operands(args)
        with np.errstate(all="ignore"):
            return self.program(args, attrs)(args, None)

    def into(self, out, *args, **attrs):
        args = self.operands(args)
        with np.errstate(all="ignore"):
            self.program(args, attrs)(args, out)

    def inplace(self, out, *args, **attrs):
        self.into(out, out, *args, **attrs)


def out_kernel(name: str):
    """The memory plan's ``fn(out, *args, **attrs)`` for formula op ``name``: its value written into ``out``."""
    return _RENDERED[name].into


_RENDERED = {
    name: NumpyFormula(op.formula, [i for i, role in enumerate(op.inputs) if role == "condition"])
    for name, op in OPS.items()
    if op.formula is not None
}
for _name, _rendered in _RENDERED.items():
    kernel(_name)(_rendered.fresh)
    kernel(_name + "_")(_rendered.inplace)
