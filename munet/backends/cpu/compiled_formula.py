"""Eager formula kernels as compiled C: one pass over strided NumPy arrays, multi-threaded.

:func:`launch` runs a formula op's value into a new array or into ``out`` with a C kernel rendered
by ``munet/compiler/codegen/c_formula.py``, compiled by the system C compiler the first time a
(formula, operand dtypes, attrs, inner-stride layout) combination meets an input of at least
:data:`MIN_ELEMENTS` elements, and kept in the on-disk kernel cache (``MUNET_CACHE_DIR``), so a
later process loads it in microseconds. It returns None, and the caller runs the NumPy rendering
(``kernels_formula.py``), when C cannot serve the call: no C compiler (``$CC`` unset and none on
``PATH``, or ``MUNET_EAGER_C=0``), a tensor below the size threshold (a ufunc call costs less
than the launch there), an integer formula, mixed operand dtypes, an output overlapping an input
at another layout; and where C would be slower (``c_formula.faster_than_numpy``: a formula calling
a C library function that stays scalar, such as ``sin`` or ``tanh``; a formula NumPy runs as one
ufunc call on its operands, such as ``add``, unless the call is large and several threads are
allowed). Results are the NumPy rendering's: the same scalar ops in the same dtypes (IEEE
arithmetic, comparisons and selections bit for bit, NaN, infinities and signed zeros included),
float16/bfloat16 computed in float32 and rounded once; transcendental functions come from the C
library (``exp`` and ``erf`` of float32 are ``c.py``'s inline ones) and may differ from NumPy's by
an ulp or two (float64 ``erf``: the C library's is the more accurate).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import threading

import ml_dtypes
import numpy as np

from munet import _threads
from munet.compiler.codegen import build, c_formula

_log = logging.getLogger(__name__)

# Below this many elements the NumPy rendering runs: the C launch costs a few microseconds of Python,
# more than NumPy's passes over a tensor that small (measured: docs/perf/formulas.md). Tests set it to 0.
MIN_ELEMENTS = 8192
# Formulas whose C kernel loses to NumPy (``c_formula.faster_than_numpy``) run NumPy; tests turn this off.
# Read at every launch: the per-formula cache (``_instantiate``) records what C is, not this choice.
ONLY_FASTER = True
# ``_instantiate``'s verdicts: C wins; C loses (a scalar C library call); NumPy renders the formula as one
# ufunc call on the operands (add, lt...), so C only wins where its OpenMP team helps (NumPy's loops run on one thread)
_FASTER, _SLOWER, _ONE_UFUNC = 0, 1, 2
_FLAT_ARGTYPES = [ctypes.py_object, ctypes.c_int64]
_STRIDED_ARGTYPES = [ctypes.py_object, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_BY_DTYPE = {np.dtype(ml_dtypes.bfloat16 if name == "bfloat16" else name): name for name in c_formula.STORAGE}
_LOW_PRECISION = ("float16", "bfloat16")
_BOOL = np.dtype(bool)
_lock = threading.Lock()
# None until the first call that could use C probes for a compiler; MUNET_EAGER_C=0 turns C off
_state = {"enabled": None if os.environ.get("MUNET_EAGER_C", "1") != "0" else False}


def enabled() -> bool:
    """Whether eager formula kernels may run as C (a C compiler was found and ``MUNET_EAGER_C`` is not 0)."""
    if _state["enabled"] is None:
        _state["enabled"] = _objects_match() and build.find_compiler() is not None
    return _state["enabled"]


def _objects_match() -> bool:
    """Whether this interpreter lays out tuples and NumPy arrays as the kernels read them (``c_formula._OBJECTS``:
    CPython's 16-byte object header, NumPy's ``data``, ``nd``, ``dimensions``, ``strides`` fields)."""
    word = ctypes.sizeof(ctypes.c_void_p)
    if word != 8:
        return False
    a = np.zeros((3, 5), np.float32)[1:, ::2]
    t = (a,)
    read = ctypes.c_void_p.from_address
    try:
        fields = (read(id(t) + 24).value, read(id(a) + 16).value, ctypes.c_int.from_address(id(a) + 24).value)
        dims = (ctypes.c_int64 * 2).from_address(read(id(a) + 32).value)
        strides = (ctypes.c_int64 * 2).from_address(read(id(a) + 40).value)
    except (ValueError, TypeError, OSError):
        return False
    return fields == (id(a), a.ctypes.data, 2) and tuple(dims) == a.shape and tuple(strides) == a.strides


def launch(formula, args, attrs, out=None):
    """``formula``'s value of ``args`` as a new array (or written into ``out``), or None (see the module docstring)."""
    if _state["enabled"] is False:
        return None
    if out is not None:
        shape, numel = out.shape, out.size
    else:
        shape = numel = None
        for a in args:
            if type(a) is np.ndarray:
                if shape is None:
                    shape, numel = a.shape, a.size
                elif a.shape != shape and a.ndim:
                    shape = np.broadcast_shapes(*[np.shape(a) for a in args if a is not None])
                    numel = 1
                    for n in shape:
                        numel *= n
                    break
        if shape is None:
            return None
    if numel < MIN_ELEMENTS or not enabled():
        return None
    conditions = formula.conditions
    dtype = next((a.dtype for i, a in enumerate(args) if i not in conditions and type(a) is np.ndarray), None)
    storage_name = _BY_DTYPE.get(dtype)
    if storage_name is None:
        return None
    arrays = _operands(args, conditions, dtype)
    if arrays is None:
        return None
    storage = tuple([None if a is None else _BY_DTYPE[a.dtype] for a in arrays])
    key = (storage, tuple(attrs.items())) if attrs else storage
    expressions = formula.c_expressions  # key -> (the instantiated expression or None, its verdict)
    entry = expressions.get(key)
    if entry is None:
        entry = expressions[key] = _instantiate(formula, storage, attrs)
    expr, verdict = entry
    if expr is None:
        return None
    if ONLY_FASTER and verdict:
        if verdict == _SLOWER:
            return None
        if numel < c_formula.PARALLEL_MIN_ELEMENTS or _threads.kernel_threads() == 1:
            return None  # NumPy's one ufunc call is as fast on one thread
    if out is None:
        if expr.dtype == "bool":
            out = np.empty(shape, _BOOL)
        else:
            out = np.empty(shape, dtype if storage_name in _LOW_PRECISION or expr.dtype != "f32" else np.float32)
    elif out.dtype not in _BY_DTYPE or (out.dtype == _BOOL) != (expr.dtype == "bool"):
        return None
    elif _overlaps(out, arrays):
        return None
    present = [a for a in arrays if a is not None]
    geometry = _geometry(out, present, shape)
    if geometry is None:
        return None
    flat, layout = geometry[0], geometry[-1]
    fn = formula.c_kernels.get((key, out.dtype, layout, flat))
    if fn is None:
        fn = _kernel(formula.c_kernels, expr, storage, out.dtype, layout, flat, key)
    if fn is False:
        return None
    if flat:
        fn((out, *present), _threads.kernel_threads())
    else:
        dims, strides = geometry[1], geometry[2]
        fn((out, *present), len(dims), (ctypes.c_int64 * len(dims))(*dims), (ctypes.c_int64 * len(strides))(*strides),
           _threads.kernel_threads())  # fmt: skip
    return out


def _operands(args, conditions, dtype):
    """Arrays for ``args``: Python numbers become 0-d arrays of the compute dtype (conditions: bool)."""
    from munet.backends.cpu.kernels_formula import scalar_operand

    compute = None
    arrays = []
    for i, a in enumerate(args):
        if a is None or type(a) is np.ndarray:
            if a is not None and a.dtype != (_BOOL if i in conditions else dtype):
                return None
            arrays.append(a)
        elif isinstance(a, (int, float, bool, np.generic)):
            if compute is None:
                compute = np.dtype(np.float32) if _BY_DTYPE[dtype] in _LOW_PRECISION else dtype
            arrays.append(np.asarray(scalar_operand(a, _BOOL if i in conditions else compute)))
        else:
            return None
    return arrays


def _instantiate(formula, storage, attrs):
    """``(expression, verdict)``: the formula's expression in the C renderer's dtypes (None when it is
    not renderable) and how its C kernel compares with NumPy (``_FASTER``, ``_SLOWER``, ``_ONE_UFUNC``).
    Both are facts about the formula and dtypes, so they are cached; ``launch`` applies ``ONLY_FASTER``."""
    from munet.ops._scalar import Arg

    names = [None if s is None else c_formula.STORAGE[s][1] for s in storage]
    values = [n for i, n in enumerate(names) if n is not None and i not in formula.conditions]
    compute = values[0] if values else next(n for n in names if n is not None)
    try:
        expr = formula.formula([None if n is None else Arg(i, n) for i, n in enumerate(names)], compute, **attrs)
    except (TypeError, ValueError, KeyError):
        return None, None
    if not c_formula.renderable(expr):
        return None, None
    if not c_formula.faster_than_numpy(expr):
        return expr, _SLOWER
    return expr, _ONE_UFUNC if c_formula.one_cheap_ufunc(expr) else _FASTER


def _overlaps(out, arrays) -> bool:
    """Whether an input shares memory with ``out`` other than element for element (in place)."""
    for a in arrays:
        if a is out or a is None or a.ndim == 0:
            continue
        if np.may_share_memory(out, a):
            if not (a.shape == out.shape and a.strides == out.strides and a.ctypes.data == out.ctypes.data):
                return True
    return False


def _geometry(out, arrays, shape):
    """``(True, layout)`` when every operand is contiguous or one value (the flat entry point), else
    ``(False, dims, strides, layout)``: the collapsed iteration space, every operand's element
    strides along it (output first, operand-major) and the inner-stride class letters; None for
    an output with repeated elements."""
    n = out.size
    if out.flags.c_contiguous:
        layout = "c"
        for a in arrays:
            size = a.size
            if size == 1:
                layout += "b"
            elif size == n and a.flags.c_contiguous:
                layout += "c"
            else:
                break
        else:
            return True, layout
    ops = [out, *arrays]
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
    return False, dims, [s for st in kept for s in st], layout


def _kernel_name(expr, storage, out_storage, layout) -> str:
    return "munet_formula_" + hashlib.sha256(repr((expr, storage, out_storage, layout)).encode()).hexdigest()[:16]


def _kernel(kernels, expr, storage, out_dtype, layout, flat, key):
    """The compiled kernel for one combination (compiled on first use, kept in ``kernels``), or False
    when it cannot be built."""
    kernel_key = (key, out_dtype, layout, flat)
    with _lock:
        fn = kernels.get(kernel_key)
        if fn is not None:
            return fn
        out_storage = _BY_DTYPE[out_dtype]
        name = _kernel_name(expr, storage, out_storage, layout)
        source = c_formula.render_formula(expr, name, list(storage), out_storage, layout)
        fn = kernels[kernel_key] = _load(source, name, flat)
        return fn


def _load(source: str, name: str, flat: bool):
    """Entry ``name`` (flat) or ``name_strided`` of ``source``, compiled or from the cache; False when it cannot be built."""
    try:
        if flat:
            return build.load_kernel(source, name, _FLAT_ARGTYPES)[0]
        return build.load_kernel(source, name + "_strided", _STRIDED_ARGTYPES)[0]
    except build.CompilerUnavailableError:
        _state["enabled"] = False
    except (RuntimeError, OSError) as err:  # e.g. a compiler without _Float16: NumPy serves these
        _log.debug("eager formula kernel not built, NumPy serves it: %s", err)
    return False


def prepare(requests) -> int:
    """Compile the kernels of ``requests`` in one compiler run (one shared library), so a process
    that knows what it will run pays one compile instead of one per kernel; returns how many
    kernels it prepared. Each request is ``(formula, args, attrs)`` as :func:`launch` takes them
    (``formula`` a ``kernels_formula.NumpyFormula``): the kernel that launch would pick for those
    arguments. Requests that launch would not serve as C are skipped."""
    if not enabled():
        return 0
    pending, parts, names = [], [], set()
    for formula, args, attrs in requests:
        dtype = _first_value_dtype(formula, args)
        arrays = None if dtype not in _BY_DTYPE else _operands(list(args), formula.conditions, dtype)
        if arrays is None:
            continue
        storage = tuple(None if a is None else _BY_DTYPE.get(a.dtype) for a in arrays)
        key = (storage, tuple(attrs.items())) if attrs else storage
        entry = formula.c_expressions.get(key)
        if entry is None:
            entry = formula.c_expressions[key] = _instantiate(formula, storage, attrs)
        expr, verdict = entry
        if expr is None or ONLY_FASTER and verdict == _SLOWER:
            continue
        present = [a for a in arrays if a is not None]
        shape = np.broadcast_shapes(*[a.shape for a in present])
        out_dtype = _BOOL if expr.dtype == "bool" else dtype
        out = np.empty(shape, out_dtype)
        geometry = _geometry(out, present, shape)
        if geometry is None or (key, out_dtype, geometry[-1], geometry[0]) in formula.c_kernels:
            continue
        name = _kernel_name(expr, storage, _BY_DTYPE[out_dtype], geometry[-1])
        if name not in names:  # two ops of one formula (and dtypes, layout) share a kernel
            names.add(name)
            parts.append(c_formula.render_formula(expr, name, list(storage), _BY_DTYPE[out_dtype], geometry[-1],
                                                  with_header=False))  # fmt: skip
        pending.append((formula.c_kernels, (key, out_dtype, geometry[-1], geometry[0]), name, geometry[0]))
    if not pending:
        return 0
    source = c_formula.header() + "\n".join(parts)
    with _lock:
        for kernels, kernel_key, name, flat in pending:
            kernels[kernel_key] = _load(source, name, flat)
    return sum(1 for kernels, kernel_key, _, _ in pending if kernels[kernel_key] is not False)


def _first_value_dtype(formula, args):
    return next((a.dtype for i, a in enumerate(args) if i not in formula.conditions and type(a) is np.ndarray), None)
