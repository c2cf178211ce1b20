"""Eager formula kernels as compiled C: one pass over strided NumPy arrays, multi-threaded.

:func:`launch` runs a formula op's value into a new array or into ``out`` with a C kernel rendered
by ``munet/compiler/codegen/c_formula.py``, compiled by the system C compiler the first time a
(formula, operand dtypes, attrs, inner-stride layout) combination meets an input of at least
:data:`MIN_ELEMENTS` elements, and kept in the on-disk kernel cache (``MUNET_CACHE_DIR``), so a
later process loads it in microseconds. It returns None, and the caller runs the NumPy rendering
(``kernels_formula.py``), when C cannot serve the call: no C compiler (``$CC`` unset and none on
``PATH``, or ``MUNET_EAGER_C=0``), a tensor below the size threshold (a ufunc call costs less
than the launch there), an integer formula, mixed operand dtypes, an output overlapping an input
at another layout. Results are the NumPy rendering's: the same scalar ops in the same dtypes,
float16/bfloat16 computed in float32 and rounded once; transcendental functions come from the C
library (``exp`` and ``erf`` of float32 are ``c.py``'s inline ones) and may differ from NumPy's by
an ulp.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import threading

import numpy as np

from munet import _threads
from munet.compiler.codegen import build, c_formula

_log = logging.getLogger(__name__)

# Below this many elements the NumPy rendering runs: the C launch costs ~6 us of Python, more than
# a one-ufunc formula of that size (measured: docs/perf/formulas.md). Tests set it to 0.
MIN_ELEMENTS = 4096
_ARGTYPES = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_LOW_PRECISION = ("float16", "bfloat16")
_lock = threading.Lock()
_state = {"enabled": os.environ.get("MUNET_EAGER_C", "1") != "0"}


def enabled() -> bool:
    """Whether eager formula kernels may run as C (a C compiler was found and ``MUNET_EAGER_C`` is not 0)."""
    if _state["enabled"] and build.find_compiler() is None:
        _state["enabled"] = False
    return _state["enabled"]


def _python_number(a) -> bool:
    return isinstance(a, (int, float, bool)) and not isinstance(a, np.ndarray)


def launch(formula, args, attrs, out=None):
    """``formula``'s value of ``args`` as a new array (or written into ``out``), or None (see the module docstring)."""
    if not _state["enabled"]:
        return None
    conditions = formula.conditions
    values = [a for i, a in enumerate(args) if i not in conditions and type(a) is np.ndarray]
    if not values:
        return None
    dtype = values[0].dtype
    if dtype.name not in c_formula.STORAGE:
        return None
    if out is None:
        shape = values[0].shape if len(args) == 1 else np.broadcast_shapes(*(np.shape(a) for a in args if a is not None))
    else:
        shape = out.shape
    numel = 1
    for s in shape:
        numel *= s
    if numel < MIN_ELEMENTS or not enabled():
        return None
    arrays = _operands(args, conditions, dtype)
    if arrays is None:
        return None
    storage = tuple(None if a is None else a.dtype.name for a in arrays)
    key = (storage, tuple(attrs.items())) if attrs else storage
    expressions = formula.c_expressions  # key -> the instantiated expression, or None: not renderable
    expr = expressions.get(key, False)
    if expr is False:
        expr = expressions[key] = _instantiate(formula, storage, attrs)
    if expr is None:
        return None
    if out is None:
        result = expr.dtype if expr.dtype == "bool" else dtype.name if dtype.name in _LOW_PRECISION else None
        out = np.empty(shape, dtype=result or ("float32" if expr.dtype == "f32" else "float64"))
    elif out.dtype.name not in c_formula.STORAGE or (out.dtype.kind == "b") != (expr.dtype == "bool"):
        return None
    elif _overlaps(out, arrays):
        return None
    present = [a for a in arrays if a is not None]
    geometry = _geometry(out, present, shape)
    if geometry is None:
        return None
    dims, strides, layout = geometry
    fn = _kernel(formula.c_kernels, expr, storage, out.dtype.name, layout, key)
    if fn is None:
        return None
    ptrs = (ctypes.c_void_p * (1 + len(present)))(out.ctypes.data, *[a.ctypes.data for a in present])
    fn(len(dims), (ctypes.c_int64 * len(dims))(*dims), (ctypes.c_int64 * len(strides))(*strides), ptrs,
       _threads.kernel_threads())  # fmt: skip
    return out


def _operands(args, conditions, dtype):
    """Arrays for ``args``: Python numbers become 0-d arrays of the compute dtype (conditions: bool)."""
    from munet.backends.cpu.kernels_formula import scalar_operand

    compute = np.dtype("float32") if dtype.name in _LOW_PRECISION else dtype
    arrays = []
    for i, a in enumerate(args):
        if a is None or type(a) is np.ndarray:
            if a is not None and a.dtype != (np.dtype(bool) if i in conditions else dtype):
                return None
            arrays.append(a)
        elif _python_number(a) or isinstance(a, np.generic):
            arrays.append(np.asarray(scalar_operand(a, np.dtype(bool) if i in conditions else compute)))
        else:
            return None
    return arrays


def _instantiate(formula, storage, attrs):
    """The formula's expression in the C renderer's dtypes, or None when it is not renderable."""
    from munet.ops._scalar import Arg

    names = [None if s is None else c_formula.STORAGE[s][1] for s in storage]
    values = [n for i, n in enumerate(names) if n is not None and i not in formula.conditions]
    compute = values[0] if values else next(n for n in names if n is not None)
    try:
        expr = formula.formula([None if n is None else Arg(i, n) for i, n in enumerate(names)], compute, **attrs)
    except (TypeError, ValueError, KeyError):
        return None
    return expr if c_formula.renderable(expr) else None


def _overlaps(out, arrays) -> bool:
    """Whether an input shares memory with ``out`` other than element for element (in place)."""
    for a in arrays:
        if a is None or a.size <= 1 and a.ndim == 0:
            continue
        if np.may_share_memory(out, a):
            if not (a.shape == out.shape and a.strides == out.strides and a.ctypes.data == out.ctypes.data):
                return True
    return False


def _geometry(out, arrays, shape):
    """``(dims, strides, layout)``: the collapsed iteration space, every operand's element strides
    along it (output first, operand-major) and the inner-stride class letters; None for a
    broadcast output."""
    ops = [out, *arrays]
    if all(a.flags.c_contiguous and (a.shape == shape or a.size == 1) for a in ops):
        n = out.size
        steps = [1 if a.size == n else 0 for a in ops]
        if steps[0] == 0 and n > 1:
            return None
        return (n,), steps, "".join("c" if s else "b" for s in steps)
    rank = len(shape)
    per_op = []
    for a in ops:
        item = a.itemsize
        pad = rank - a.ndim
        per_op.append([0 if d < pad or a.shape[d - pad] == 1 else a.strides[d - pad] // item for d in range(rank)])
    if any(s == 0 and n > 1 for s, n in zip(per_op[0], shape)):
        return None  # an output with repeated elements: NumPy's order of writes decides what stays
    dims: list = []
    kept: list = [[] for _ in ops]
    for d, n in enumerate(shape):
        if n == 1:
            continue
        if dims and all(st[-1] == p[d] * n for st, p in zip(kept, per_op)):
            dims[-1] *= n
            for st, p in zip(kept, per_op):
                st[-1] = p[d]
            continue
        dims.append(n)
        for st, p in zip(kept, per_op):
            st.append(p[d])
    if not dims:
        dims, kept = [1], [[0] for _ in ops]
    layout = "".join("b" if st[-1] == 0 else "c" if st[-1] == 1 else "s" for st in kept)
    return dims, [s for st in kept for s in st], layout


def _kernel(kernels, expr, storage, out_storage, layout, key):
    """The compiled kernel for one combination (compiled on first use, kept in ``kernels``), or None
    when it cannot be built."""
    kernel_key = (key, out_storage, layout)
    fn = kernels.get(kernel_key, False)
    if fn is not False:
        return fn
    with _lock:
        fn = kernels.get(kernel_key, False)
        if fn is not False:
            return fn
        name = "munet_formula_" + hashlib.sha256(repr((expr, storage, out_storage, layout)).encode()).hexdigest()[:16]
        source = c_formula.render_formula(expr, name, list(storage), out_storage, layout)
        try:
            fn = build.load_kernel(source, name, _ARGTYPES)[0]
        except build.CompilerUnavailableError:
            _state["enabled"] = False
            fn = None
        except (RuntimeError, OSError) as err:  # e.g. a compiler without _Float16: NumPy serves these
            _log.debug("eager formula kernel not built, NumPy serves it: %s", err)
            fn = None
        kernels[kernel_key] = fn
        return fn
