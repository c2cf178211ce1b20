"""CPU kernels rendered from scalar formulas: each scalar op printed as a NumPy ufunc.

For every op defined with a ``formula`` (``munet/ops/_scalar.py``) this registers the eager
kernel ``name`` (a new array) and ``name_`` (in place, into its first argument);
:func:`out_kernel` gives the memory plan's ``fn(out, *args)``. The renderer knows scalar ops,
not ops: a formula is instantiated once per compute dtype and compiled to nested ufunc calls,
the last of which writes ``out``. Operands are converted as every elementwise kernel does
(:func:`~munet.backends.cpu.kernels_elementwise.operands`: Python numbers take the array
operands' dtype, float16/bfloat16 compute in float32). A ``where`` whose condition is a
single value (a Python-number weight of ``lerp``) evaluates only the branch it picks.
"""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.kernels_elementwise import operands
from munet.backends.cpu.registry import kernel
from munet.ops._registry import OPS
from munet.ops._scalar import Apply, Arg, Const

_UFUNCS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "maximum": np.maximum,
    "lt": np.less,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "neg": np.negative,
    "abs": np.absolute,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
}


def _compile(e):
    """``run(args, out)`` evaluating expression ``e`` (``out``: where the result goes, or None)."""
    if isinstance(e, Arg):
        i = e.index
        return lambda args, out: args[i]
    if isinstance(e, Const):
        value = np.asarray(e.value).astype(e.dtype if e.dtype != "bool" else np.bool_)
        return lambda args, out: value
    if not isinstance(e, Apply):
        raise NotImplementedError(f"cpu formula renderer: cannot render {e!r}")
    if e.op == "where":
        return _compile_where(*(_compile(a) for a in e.args))
    ufunc = _UFUNCS.get(e.op)
    if ufunc is None:
        raise NotImplementedError(f"cpu formula renderer: no NumPy rendering of scalar op '{e.op}'")
    if all(isinstance(a, Arg) for a in e.args):  # a leaf op: no nested calls
        positions = [a.index for a in e.args]
        if positions == [0]:
            return lambda args, out: ufunc(args[0], out=out, casting="unsafe")
        if positions == [0, 1]:
            return lambda args, out: ufunc(args[0], args[1], out=out, casting="unsafe")
    subs = [_compile(a) for a in e.args]
    if len(subs) == 1:
        (f,) = subs
        return lambda args, out: ufunc(f(args, None), out=out, casting="unsafe")
    f, g = subs
    return lambda args, out: ufunc(f(args, None), g(args, None), out=out, casting="unsafe")


def _compile_where(cond, a, b):
    def run(args, out):
        c = cond(args, None)
        if np.ndim(c) == 0:  # one branch for every element: compute only that one
            return (a if c else b)(args, out)
        result = np.where(c, a(args, None), b(args, None))
        if out is None:
            return result
        np.copyto(out, result, casting="unsafe")
        return out

    return run


class NumpyFormula:
    """A scalar formula rendered with NumPy ufuncs, compiled once per compute dtype (and attrs).

    ``fresh(*args, **attrs)`` returns a new array, ``into(out, *args, **attrs)`` writes ``out``,
    ``inplace(x, *args, **attrs)`` writes the result over its first argument ``x``.
    """

    def __init__(self, formula):
        self.formula = formula
        self.programs: dict = {}

    def program(self, args, attrs):
        dtype = next((a.dtype for a in args if isinstance(a, np.ndarray)), np.asarray(args[0]).dtype)
        key = (dtype, *attrs.items()) if attrs else dtype
        run = self.programs.get(key)
        if run is None:
            t = dtype.name
            run = self.programs[key] = _compile(self.formula([Arg(i, t) for i in range(len(args))], t, **attrs))
        return run

    def fresh(self, *args, **attrs):
        args = operands(*args)
        with np.errstate(all="ignore"):
            return self.program(args, attrs)(args, None)

    def into(self, out, *args, **attrs):
        args = operands(*args)
        with np.errstate(all="ignore"):
            self.program(args, attrs)(args, out)

    def inplace(self, out, *args, **attrs):
        self.into(out, out, *args, **attrs)


def out_kernel(name: str):
    """The memory plan's ``fn(out, *args, **attrs)`` for formula op ``name``: its value written into ``out``."""
    return _RENDERED[name].into


_RENDERED = {name: NumpyFormula(op.formula) for name, op in OPS.items() if op.formula is not None}
for _name, _rendered in _RENDERED.items():
    kernel(_name)(_rendered.fresh)
    kernel(_name + "_")(_rendered.inplace)
