"""Formula ops, ``sum`` and ``cumsum`` over complex operands on cuda: CuPy's complex ufuncs.

The CUDA C renderer (``scalar_cuda.py``) prints real formulas only. For complex operands the op's
own scalar formula (its one definition, ``munet/ops/_scalar.py``) is instantiated for the operand
dtypes and evaluated here node by node, each scalar op as the CuPy ufunc of the same meaning, as the
cpu evaluates complex formulas with NumPy's ufuncs (``munet/backends/cpu/kernels_formula.py``).
Every ufunc call is one CuPy elementwise kernel on the current stream, in the device scope of the
caller (``kernels_rendered.py``), so a formula of ``k`` nodes launches ``k`` kernels, unfused.
A scalar op with no complex meaning here raises ``DeviceError`` naming the op.
"""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.array_ufuncs import UFUNC_NAMES
from munet.backends.cuda import copies
from munet.ops._registry import OPS
from munet.ops._scalar import Apply, Arg, Const

# the scalar ops with a complex meaning: each is the CuPy ufunc of UFUNC_NAMES (NumPy's name)
COMPLEX_OPS = frozenset({
    "add", "sub", "mul", "div", "pow", "neg", "exp", "expm1", "log", "log1p", "sqrt", "sin", "cos", "tan",
    "sinh", "cosh", "tanh", "asin", "acos", "atan", "eq", "ne", "isnan", "isinf", "logical_not", "logical_and",
    "logical_or",
})  # fmt: skip


def has_complex(cp, args) -> bool:
    """Whether any operand of ``args`` is a complex cupy array (or a Python complex number)."""
    return any((isinstance(a, cp.ndarray) and a.dtype.kind == "c") or isinstance(a, complex) for a in args)


def run_formula(rt, name: str, args, attrs, out=None):
    """Formula op ``name`` over ``args`` (cupy arrays, Python numbers, None), one of them complex,
    into a new C-contiguous array, or into ``out`` (in place)."""
    cp = rt.cupy
    op = OPS[name]
    conditions = {i for i, role in enumerate(op.inputs) if role == "condition"}
    arrays = [a for a in args if isinstance(a, cp.ndarray)]
    values = [a.dtype for i, a in enumerate(args) if isinstance(a, cp.ndarray) and i not in conditions]
    compute = np.result_type(
        *values, *(a for i, a in enumerate(args) if isinstance(a, complex) and i not in conditions)
    )
    # operand dtype names: arrays their own, Python numbers the compute dtype (a condition's: bool)
    names = [
        None if a is None else copies.dtype_of(a).name if isinstance(a, cp.ndarray) else
        "bool" if i in conditions else compute.name
        for i, a in enumerate(args)
    ]  # fmt: skip
    expr = op.formula([None if n is None else Arg(i, n) for i, n in enumerate(names)], compute.name, **attrs)
    operands = [a if a is None or isinstance(a, cp.ndarray) else np.asarray(a).astype(names[i])[()]
                for i, a in enumerate(args)]  # fmt: skip
    value = _evaluate(cp, name, expr, operands, {})
    shape = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    target = out if out is not None else rt.empty(shape, _dtype_named(expr.dtype))
    copies.copy_into(cp, target, value)  # also when the value is an operand itself or a number
    return target


_SHORT_NAMES = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64"}


def _dtype_named(name: str):
    """The MuNet dtype of a formula dtype name (a NumPy name, or the kernel IR's short one)."""
    return D.from_numpy_dtype(np.dtype(_SHORT_NAMES.get(name, name)))


def _evaluate(cp, name: str, e, operands: list, memo: dict):
    if isinstance(e, Arg):
        return operands[e.index]
    if isinstance(e, Const):
        return np.asarray(e.value).astype(_dtype_named(e.dtype).np)[()]
    if not isinstance(e, Apply):
        raise DeviceError(f"{name}: internal error: {e!r} is not a scalar formula expression")
    if e in memo:
        return memo[e]
    args = [_evaluate(cp, name, a, operands, memo) for a in e.args]
    if e.op == "cast":
        value = _cast(args[0], _dtype_named(e.dtype).np)
    elif e.op == "where":
        value = cp.where(*args)
    elif e.op in COMPLEX_OPS:
        value = getattr(cp, UFUNC_NAMES[e.op])(*args)
    else:
        raise DeviceError(f"{name}: no complex kernel on cuda: its formula uses '{e.op}', which has no complex form")
    memo[e] = value
    return value


def _cast(x, dtype: np.dtype):
    """PyTorch's cast of a complex value: to bool ``!= 0``, to a real type its real part."""
    if dtype == np.bool_:
        return x != 0
    if x.dtype.kind == "c" and dtype.kind != "c":
        x = x.real
    return x.astype(dtype)


def reduce_sum(rt, x, dims, keepdim: bool):
    """``sum`` of complex ``x`` over ``dims`` (CuPy's pairwise complex sum) into a new array."""
    cp = rt.cupy
    dims = tuple(sorted({d % x.ndim for d in dims})) if x.ndim else ()
    shape = tuple(1 if d in dims else n for d, n in enumerate(x.shape) if keepdim or d not in dims)
    out = rt.empty(shape, copies.dtype_of(x))
    out[...] = cp.sum(x, axis=dims, keepdims=keepdim) if dims else x
    return out


def cumulative_sum(rt, x, dim: int, reverse: bool):
    """``cumsum`` of complex ``x`` along ``dim`` (from the end when ``reverse``) into a new array."""
    cp = rt.cupy
    out = rt.empty(x.shape, copies.dtype_of(x))
    if x.ndim == 0:
        out[...] = x
        return out
    if reverse:
        flipped = cp.flip(x, dim)
        out[...] = cp.flip(cp.cumsum(flipped, axis=dim), dim)
    else:
        out[...] = cp.cumsum(x, axis=dim)
    return out
