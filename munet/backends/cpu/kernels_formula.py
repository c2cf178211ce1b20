"""CPU kernels rendered from scalar formulas: each scalar op printed as a NumPy ufunc call.

For every op defined with a ``formula`` (``munet/ops/_scalar.py``) this registers the eager
kernel ``name`` (a new array) and ``name_`` (in place, into its first argument);
:func:`out_kernel` gives the memory plan's ``fn(out, *args)``. This is also the CPU path of
compiled programs where no C compiler exists (``lower_cpu.py`` runs fused groups' members with
these kernels). The renderer knows scalar ops, not ops: a formula is instantiated once per
operand dtypes (and attrs) and printed as a Python function of ufunc calls, one per distinct
subexpression, the last of which writes ``out`` (:func:`render_python` shows it).

Operands are converted by :func:`operands`: Python numbers take the array operands' dtype
(wrapping like PyTorch's scalar conversion), float16/bfloat16 compute in float32 and the
caller casts the result back, as PyTorch does on CPU. A ``where`` whose condition is a single
value (a Python-number weight of ``lerp``) evaluates only the branch it picks. ``erf``,
``erfc`` and ``erfinv`` are computed by ``special_functions.py``; an integer ``floor_divide``
or ``fmod`` by zero raises PyTorch's ``ZeroDivisionError``.
"""

from __future__ import annotations

import numpy as np

from munet.backends.array_ufuncs import UFUNC_NAMES
from munet.backends.cpu import compiled_formula, fp_errors, special_functions
from munet.backends.cpu.kernels_reduce import LOW_PRECISION, upcast
from munet.backends.cpu.registry import kernel
from munet.ops._registry import DEFINE_HOOKS, OPS
from munet.ops._scalar import FLOAT, INT, Apply, Arg, Const, kind


def _compute(x):
    """Upcast float16/bfloat16 arrays to float32; other arrays and numbers pass through."""
    return upcast(x) if isinstance(x, np.ndarray) else x


def operands(*args):
    """Compute-dtype arrays for all operands: Python numbers take the array operands' dtype."""
    dtype = None
    numbers = False
    for a in args:
        if type(a) is np.ndarray:
            if a.dtype in LOW_PRECISION:
                break
            if dtype is None:
                dtype = a.dtype
        elif isinstance(a, np.ndarray):
            break
        elif a is not None:
            numbers = True
    else:  # the common cases: arrays of computable dtypes, maybe with Python numbers to convert
        if not numbers:
            return args
        if dtype is not None:
            return [a if a is None or type(a) is np.ndarray else scalar_operand(a, dtype) for a in args]
    args = [_compute(a) for a in args]
    dtype = next((a.dtype for a in args if isinstance(a, np.ndarray)), None)
    if dtype is None:
        return [a if a is None else np.asarray(a) for a in args]
    return [a if isinstance(a, np.ndarray) or a is None else scalar_operand(a, dtype) for a in args]


# the largest finite value of the float dtypes Python floats are converted to (no overflow below it)
_FINITE_MAX = {np.dtype(np.float32): float(np.finfo(np.float32).max), np.dtype(np.float64): float("inf")}


def scalar_operand(value, dtype):
    """A Python number as an operand of arrays of ``dtype`` (PyTorch's wrapping scalar conversion)."""
    if dtype.kind == "f" and type(value) is float:
        if -_FINITE_MAX.get(dtype, 0.0) <= value <= _FINITE_MAX.get(dtype, 0.0):
            return dtype.type(value)  # a NumPy scalar: NEP 50 keeps the array's dtype (and no overflow)
        with np.errstate(over="ignore"):
            return dtype.type(value)
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


def _frexp_part(index: int):
    """C99's frexp as two ufunc-like calls: the mantissa (``index`` 0) or the exponent as a float of
    the operand's dtype (1), which is 0 for zeros, infinities and NaN (C leaves it unspecified there)."""

    def run(x, out=None, casting="unsafe"):
        mantissa, exponent = np.frexp(x)
        value = mantissa if index == 0 else np.where(np.isfinite(x), exponent, 0).astype(np.asarray(x).dtype)
        if out is None:
            return value
        np.copyto(out, value, casting=casting)
        return out

    return run


_UFUNCS = {op: getattr(np, name) for op, name in UFUNC_NAMES.items()} | {
    "floor_divide": _integer_division(np.floor_divide),
    "fmod": _integer_division(np.fmod),
    "frexp_mantissa": _frexp_part(0),
    "frexp_exponent": _frexp_part(1),
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


def _copy(out, value):
    np.copyto(out, value, casting="unsafe")
    return out


class _PythonRenderer:
    """Prints a formula as a Python function ``run(args, out)`` of NumPy calls, one statement per
    distinct subexpression (equal subtrees are computed once)."""

    def __init__(self):
        self.namespace = {"np": np, "_copy": _copy, "_finish": _finish}
        self.lines: list = []
        self.count = 0

    def name(self, value, prefix: str) -> str:
        name = f"{prefix}{self.count}"
        self.count += 1
        self.namespace[name] = value
        return name

    def operand(self, e, names: dict, indent: str) -> str:
        """The Python expression holding ``e``'s value, emitting the statements computing it."""
        if isinstance(e, Arg):
            return f"args[{e.index}]"
        if isinstance(e, Const):
            dtype = _np_dtype(e.dtype)  # an integer literal wraps, a fraction truncates
            return self.name(np.asarray(int(e.value) if dtype.kind in "iu" else e.value).astype(dtype), "c")
        if not isinstance(e, Apply) or e.op not in RENDERED_OPS:
            raise RuntimeError(f"cpu formula renderer: internal error: {e!r} is not a scalar formula expression")
        if e in names:
            return names[e]
        if e.op == "where":
            value = self.where(e, names, indent)
        else:
            value = self.temporary(indent, self.call(e, [self.operand(a, names, indent) for a in e.args]))
        names[e] = value
        return value

    def temporary(self, indent: str, text: str) -> str:
        name = f"t{self.count}"
        self.count += 1
        self.lines.append(f"{indent}{name} = {text}")
        return name

    def call(self, e, args: list, out: str | None = None) -> str:
        """The call computing Apply ``e`` of ``args`` (into ``out`` when given: the formula's value)."""
        if e.op == "cast":
            return f"{args[0]}.astype({self.name(_np_dtype(e.dtype), 'd')})"
        if e.op in _FLOAT64_FUNCTIONS:  # the formula's value stays in float64: the caller rounds it once
            fn = f"{e.op}_"
            self.namespace[fn] = _FLOAT64_FUNCTIONS[e.op]
            if out:
                return f"{fn}({args[0]}) if {out} is None else _copy({out}, {fn}({args[0]}))"
            return f"{fn}({args[0]}).astype({self.name(_np_dtype(e.dtype), 'd')})"
        fn = f"{e.op}_"
        self.namespace[fn] = _UFUNCS[e.op]
        return f"{fn}({', '.join(args)}, out={out}, casting='unsafe')" if out else f"{fn}({', '.join(args)})"

    def where(self, e, names: dict, indent: str, top: bool = False) -> str:
        """``where``: a single-valued condition (a Python-number weight) computes only its branch.

        ``top``: ``e`` is the formula's value: a branch picked whole goes through ``_finish`` (it may
        be an argument), the elementwise selection is returned (or written into ``out``) as it is.
        """
        condition = self.operand(e.args[0], names, indent)
        result = f"t{self.count}"
        self.count += 1
        inner = indent + "        "
        self.lines.append(f"{indent}if {condition}.ndim == 0:")  # arrays and NumPy scalars alike
        for test, branch in ((f"if {condition}:", e.args[1]), ("else:", e.args[2])):
            self.lines.append(f"{indent}    {test}")
            value = self.operand(branch, dict(names), inner)
            self.lines.append(f"{inner}return _finish({value}, args, out, {self.name(_np_dtype(e.dtype), 'd')})"
                              if top else f"{inner}{result} = {value}")  # fmt: skip
        self.lines.append(f"{indent}else:")
        branches = dict(names)
        a, b = (self.operand(x, branches, indent + "    ") for x in e.args[1:])
        self.lines.append(f"{indent}    {result} = np.where({condition}, {a}, {b})")
        if top:
            self.lines.append(f"{indent}    return {result} if out is None else _copy(out, {result})")
        return result

    def function(self, expr):
        """``run(args, out)`` returning ``expr``'s value: a new array of the operands' broadcast
        shape, or ``out``. (An elementwise ``where`` at the top is trusted to cover every operand's
        shape; a mistake is the "kernel produced shape" internal error of ``Tensor._from_kernel``.)
        Unless every op of ``expr`` is quiet (``_quiet``), its body runs with NumPy's floating-point
        errors ignored (``fp_errors.ignore``, inline: a call around it would cost more)."""
        names: dict = {}
        if isinstance(expr, Apply) and expr.op == "where":
            self.where(expr, names, "    ", top=True)
        elif isinstance(expr, Apply) and expr.op in RENDERED_OPS and expr.op != "cast":
            args = [self.operand(a, names, "    ") for a in expr.args]
            self.lines.append("    if out is None:")  # (keywords cost a small call a fifth of its time)
            self.lines.append(f"        return {self.call(expr, args)}")
            self.lines.append(f"    return {self.call(expr, args, out='out')}")
        else:
            value = self.operand(expr, names, "    ")
            self.lines.append(f"    return _finish({value}, args, out, {self.name(_np_dtype(expr.dtype), 'd')})")
        lines = self.lines
        if not _quiet(expr):
            self.namespace.update(
                _ignore=fp_errors.ignore,
                _restore=fp_errors.restore,
                _get=fp_errors.get_state,
                _set=fp_errors.set_state,
                _default=fp_errors.DEFAULT,
                _ignoring_default=fp_errors.IGNORING_DEFAULT,
            )
            body = ["    " + line for line in lines]
            first = "    token = _set(_ignoring_default) if _get() is _default else _ignore()"
            lines = [first, "    try:", *body, "    finally:", "        _restore(token)"]
        source = "\n".join(["def run(args, out):", *lines]) + "\n"
        exec(compile(source, "<munet formula>", "exec"), self.namespace)  # noqa: S102 - our own rendering
        return self.namespace["run"], source


def render_python(expr) -> str:
    """The Python source of formula expression ``expr`` as the NumPy renderer runs it (for reading)."""
    return _PythonRenderer().function(expr)[1]


# scalar ops that never set a floating-point exception flag (NaN compares and selects quietly):
# a formula of these alone runs without silencing NumPy's floating-point errors (fp_errors.py)
_QUIET = {"maximum", "minimum", "fmax", "fmin", "lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or",
          "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "neg", "abs",
          "copysign", "floor", "ceil", "trunc", "rint", "signbit", "isnan", "isinf", "where"}  # fmt: skip


def _quiet(e) -> bool:
    if not isinstance(e, Apply):
        return True
    if e.op == "cast":
        quiet = kind(e.dtype) != INT or kind(e.args[0].dtype) != FLOAT  # NaN or a huge float to int warns
    else:
        quiet = e.op in _QUIET
    return quiet and all(_quiet(a) for a in e.args)


def _program(expr):
    """``run(args, out)`` for the formula's value ``expr``: always a new array or ``out`` itself."""
    return _PythonRenderer().function(expr)[0]


def _finish(value, args, out, dtype):
    """A formula's value that may be an argument, a literal or a branch picked whole: written into
    ``out``, or copied into a new array of the operands' broadcast shape."""
    if out is not None:
        return _copy(out, value)
    shape = np.broadcast_shapes(*(np.shape(a) for a in args if a is not None))
    if type(value) is np.ndarray and value.shape == shape and not any(value is a for a in args):
        return value
    return np.array(np.broadcast_to(value, shape), dtype=dtype)


_FIRST = frozenset({0})


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
        self.c_expressions: dict = {}  # the compiled-C path's instantiations (compiled_formula.py)
        self.c_kernels: dict = {}  # and its kernels, per operand dtypes, attrs and layout

    def operands(self, args):
        if not self.conditions:
            return operands(*args)
        if self.conditions == _FIRST:  # where(condition, a, b)
            return [args[0], *operands(*args[1:])]
        values = iter(operands(*(a for i, a in enumerate(args) if i not in self.conditions)))
        return [a if i in self.conditions else next(values) for i, a in enumerate(args)]

    def program(self, args, attrs):
        """The rendered ``run(args, out)`` for operands ``args`` (arrays, NumPy scalars, None)."""
        key = tuple([None if a is None else a.dtype for a in args])  # None: a missing optional argument
        if attrs:
            key = (key, *attrs.items())
        run = self.programs.get(key)
        if run is None:
            dtypes = key[0] if attrs else key
            run = self.programs[key] = _program(self.instantiate(dtypes, attrs))
        return run

    def instantiate(self, dtypes, attrs):
        """The formula's expression for operands of ``dtypes`` (None: a missing optional argument)."""
        names = [None if d is None else d.name for d in dtypes]
        values = [n for i, n in enumerate(names) if n is not None and i not in self.conditions]
        compute = values[0] if values else next(n for n in names if n is not None)
        return self.formula([None if n is None else Arg(i, n) for i, n in enumerate(names)], compute, **attrs)

    def fresh(self, *args, **attrs):
        # The common call, one lookup: one or two arrays, no attributes, too small for compiled C,
        # a program rendered for their dtypes already (the key is the dtypes as they are).
        run = None
        if not attrs and not self.conditions:
            if len(args) == 1:
                a = args[0]
                if type(a) is np.ndarray and a.size < compiled_formula.MIN_ELEMENTS:
                    run = self.programs.get((a.dtype,))
            elif len(args) == 2:
                a, b = args
                if type(a) is np.ndarray and type(b) is np.ndarray and a.size * b.size < compiled_formula.MIN_ELEMENTS:
                    run = self.programs.get((a.dtype, b.dtype))
        if run is None:
            return self._fresh(args, attrs)
        return run(args, None)

    def _fresh(self, args, attrs):
        bound = 1  # the operands' sizes multiplied: at least the result's, so small calls skip C at once
        dtypes = []  # the operands' dtypes, while every operand is an array
        for a in args:
            if type(a) is np.ndarray:
                bound *= a.size
                if dtypes is not None:
                    dtypes.append(a.dtype)
            else:
                dtypes = None
        if bound >= compiled_formula.MIN_ELEMENTS:
            result = compiled_formula.launch(self, args, attrs)
            if result is not None:
                return result
        # Arrays only: their dtypes are the program's key as they are (a float16 key is never stored,
        # operands() computes those in float32), so such a call converts nothing.
        run = None
        if dtypes is not None and not self.conditions:
            key = tuple(dtypes)
            run = self.programs.get((key, *attrs.items()) if attrs else key)
        if run is None:
            args = operands(*args) if not self.conditions else self.operands(args)
            key = tuple([None if a is None else a.dtype for a in args])  # program(), inline: this is per op
            run = self.programs.get((key, *attrs.items()) if attrs else key) or self.program(args, attrs)
        return run(args, None)

    def into(self, out, *args, **attrs):
        if compiled_formula.launch(self, args, attrs, out) is not None:
            return
        args = self.operands(args)
        self.program(args, attrs)(args, out)

    def inplace(self, out, *args, **attrs):
        self.into(out, out, *args, **attrs)


def out_kernel(name: str):
    """The memory plan's ``fn(out, *args, **attrs)`` for formula op ``name``: its value written into ``out``."""
    return _RENDERED[name].into


_RENDERED: dict = {}


def _render(op) -> None:
    """Register the eager kernels ``op.name`` and ``op.name + "_"`` of a formula op."""
    if op.formula is None:
        return
    rendered = _RENDERED[op.name] = NumpyFormula(op.formula, [i for i, r in enumerate(op.inputs) if r == "condition"])
    kernel(op.name)(rendered.fresh)
    kernel(op.name + "_")(rendered.inplace)


for _op in OPS.values():
    _render(_op)
DEFINE_HOOKS.append(_render)
