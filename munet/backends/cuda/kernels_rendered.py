"""The cuda kernel table's entries for the rendered CUDA C kernels: formula ops and reductions.

Every op defined with a scalar formula gets ``name`` (a new array) and ``name_`` (in place, into
its first argument), as on the CPU; ``sum``, ``prod``, ``amax``, ``amin``, ``argmax`` and
``argmin`` are the reduction renderer's (``all``/``any`` its ``amin``/``amax`` of ``x != 0``). (The
random ops' entries are ``kernels_draws.py``'s.) Each kernel lays out its operands' geometry
(pointers, element strides, broadcasting as stride 0), renders the source once per dtypes, rank and
index width (``kernels_elementwise``, ``kernels_reduce``: cached here) and hands it to
``launch.launch``, which compiles, loads and launches it on ``rt.stream``.

A dtype a formula has no CUDA form for raises ``munet.DeviceError`` naming the op and device;
complex operands of a formula op or ``sum`` go to ``complex_formula.py`` (CuPy's complex ufuncs).
"""

from __future__ import annotations

import functools

import numpy as np

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.cuda import complex_formula, copies, launch
from munet.backends.cuda import kernels_elementwise as E
from munet.backends.cuda import kernels_reduce as Q
from munet.backends.cuda.registry import KERNELS, kernel
from munet.backends.cuda.scalar_cuda import UnrenderableError, compute_dtype
from munet.ops._registry import DEFINE_HOOKS, OPS

_DTYPES = {d.name: d for d in D.ALL_DTYPES}

# geometry -----------------------------------------------------------------------------------------


def _element_strides(label: str, x) -> tuple:
    strides = []
    for size, step in zip(x.shape, x.strides):
        if step < 0 or step % x.itemsize:
            raise DeviceError(f"{label}: cuda kernels take non-negative, aligned strides, got {x.strides}")
        strides.append(0 if size == 1 else step // x.itemsize)
    return tuple(strides)


def broadcast_strides(label: str, x, shape: tuple) -> tuple:
    """``x``'s element strides seen at the broadcast ``shape`` (0 along a broadcast dim)."""
    own = _element_strides(label, x)
    pad = len(shape) - x.ndim
    return tuple(0 if d < pad or x.shape[d - pad] == 1 else own[d - pad] for d in range(len(shape)))


def numel(shape) -> int:
    """The number of elements of ``shape`` (Python ints: no overflow)."""
    n = 1
    for s in shape:
        n *= int(s)
    return n


def unrenderable(label: str, rt, error: Exception) -> DeviceError:
    return DeviceError(f"{label}: no kernel for device '{rt.label}' ({error})")


# formula ops --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _render_elementwise(name, operands, rank, scalars, attrs, index_bits):
    return E.render_elementwise(name, operands, rank=rank, scalars=scalars, attrs=dict(attrs), index_bits=index_bits)


def _scalar_value(value, dtype_name: str):
    """A Python number as the kernel's by-value operand: rounded to the storage dtype (integers
    wrap, as the CPU's operand conversion does), then of the compute dtype."""
    stored = np.array(value).astype(_DTYPES[dtype_name].np)
    return stored.astype(_DTYPES[compute_dtype(dtype_name)].np).item()


def run_formula(rt, name: str, args, attrs, out=None):
    """Formula op ``name`` over ``args`` (cupy arrays, Python numbers, None) into a new array, or
    into ``out`` (in place: ``out`` is ``args[0]``)."""
    cp = rt.cupy
    op = OPS[name]
    arrays = [a for a in args if isinstance(a, cp.ndarray)]
    if not arrays:
        raise DeviceError(f"{name}: the cuda kernel needs at least one tensor operand")
    if complex_formula.has_complex(cp, args):  # the CUDA C renderer prints real formulas only
        return complex_formula.run_formula(rt, name, args, attrs, out)
    shape = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    conditions = {i for i, role in enumerate(op.inputs) if role == "condition"}
    values = [copies.dtype_of(a).name for i, a in enumerate(args) if isinstance(a, cp.ndarray) and i not in conditions]
    value_dtype = values[0] if values else copies.dtype_of(arrays[0]).name
    operands, scalars = [], []
    for i, a in enumerate(args):
        if a is None:
            operands.append(None)
        elif isinstance(a, cp.ndarray):
            operands.append(copies.dtype_of(a).name)
        else:
            operands.append("bool" if i in conditions else value_dtype)
            scalars.append(i)
    geometries = [(broadcast_strides(name, a, shape), 0) for a in arrays]
    if out is not None and tuple(out.shape) != shape:
        raise DeviceError(f"{name}_: the result of shape {shape} cannot be written into shape {tuple(out.shape)}")
    try:
        key = tuple(sorted(attrs.items()))
        hash(key)
    except TypeError:  # an unhashable attribute value: render uncached
        key = None
    index_bits = E.index_bits_for(
        shape, geometries + [(_element_strides(name, out), 0)] if out is not None else geometries
    )
    try:
        if key is None:
            src = E.render_elementwise(name, tuple(operands), rank=len(shape), scalars=tuple(scalars), attrs=attrs,
                                       index_bits=index_bits)  # fmt: skip
        else:
            src = _render_elementwise(name, tuple(operands), len(shape), tuple(scalars), key, index_bits)
    except UnrenderableError as error:
        raise unrenderable(name if out is None else f"{name}_", rt, error) from None
    target = out
    if out is None or copies.dtype_of(out).name != src.out_dtype or _overlaps(out, arrays):
        target = rt.empty(shape, _DTYPES[src.out_dtype])
    if numel(shape):
        inputs = []
        for i, a in enumerate(args):
            if isinstance(a, cp.ndarray):
                inputs.append((a.data.ptr, broadcast_strides(name, a, shape), 0))
            elif a is not None:
                inputs.append(_scalar_value(a, operands[i]))
        fault_record = rt.asserts.record() if src.faults else None
        arguments = src.arguments(shape, (target.data.ptr, _element_strides(name, target), 0), inputs, fault_record)
        launch.launch(rt, src, numel(shape), arguments)
        if src.faults:
            rt.asserts.launched()
    if out is not None and target is not out:
        copies.copy_into(cp, out, target)
        return out
    return target


def _overlaps(out, arrays) -> bool:
    """Whether another operand shares ``out``'s allocation (then the result goes through a copy,
    as an element may be read after another thread wrote it)."""
    return any(a is not out and a.data.mem is out.data.mem for a in arrays)


def _register_formula(op) -> None:
    if op.formula is None or op.name in KERNELS:
        return
    name = op.name

    def fresh(rt, *args, **attrs):
        return run_formula(rt, name, args, attrs)

    def inplace(rt, out, *args, **attrs):
        return run_formula(rt, name, (out, *args), attrs, out=out)

    fresh.__name__, inplace.__name__ = name, f"{name}_"
    kernel(name)(fresh)
    if f"{name}_" not in KERNELS:
        kernel(f"{name}_")(inplace)


for _op in list(OPS.values()):
    _register_formula(_op)
DEFINE_HOOKS.append(_register_formula)


# reductions ---------------------------------------------------------------------------------------


def run_reduction(rt, op: str, x, dims, keepdim: bool, out_dtype: str):
    """Reduction ``op`` of ``x`` over ``dims`` into a new C-contiguous array of ``out_dtype``."""
    dims = tuple(sorted({d % x.ndim for d in dims})) if x.ndim else ()
    strides = _element_strides(op, x)
    kept = [d for d in range(x.ndim) if d not in dims]
    kept_shape = tuple(x.shape[d] for d in kept)
    reduced_shape = tuple(x.shape[d] for d in dims)
    out = rt.empty(kept_shape, _DTYPES[out_dtype])
    n_out, n_red = numel(kept_shape), numel(reduced_shape)
    if n_out:
        reduced_strides = tuple(strides[d] for d in dims)
        layout = Q.choose_layout(n_red, reduced_strides[-1] if reduced_strides else 1)
        index_bits = E.index_bits_for(x.shape, [(strides, 0)])
        in_dtype = copies.dtype_of(x).name
        try:
            src = _render_reduction(op, in_dtype, out_dtype, len(kept), len(dims), layout, index_bits)
        except UnrenderableError as error:
            raise unrenderable(op, rt, error) from None
        source = (x.data.ptr, tuple(strides[d] for d in kept), reduced_strides, 0)
        launch.launch(rt, src, n_out, src.arguments(kept_shape, reduced_shape, out.data.ptr, source))
    if keepdim:
        out = out.reshape(tuple(1 if d in dims else s for d, s in enumerate(x.shape)))
    return out


@functools.lru_cache(maxsize=1024)
def _render_reduction(op, in_dtype, out_dtype, kept_rank, reduced_rank, layout, index_bits):
    return Q.render_reduction(
        op, in_dtype, out_dtype, kept_rank=kept_rank, reduced_rank=reduced_rank, layout=layout, index_bits=index_bits
    )


def _accumulated(x, dtype) -> str:
    """``sum``/``prod``'s result dtype on the device: the requested one, a float's own, else int64."""
    if dtype is not None:
        return dtype.name
    own = copies.dtype_of(x)
    return own.name if own.is_floating_point else "int64"


@kernel("sum")
def sum_(rt, x, *, dims, keepdim, dtype=None):
    if x.dtype.kind == "c" and (dtype is None or dtype.is_complex):
        return complex_formula.reduce_sum(rt, x, dims, keepdim)
    return run_reduction(rt, "sum", x, dims, keepdim, _accumulated(x, dtype))


@kernel("prod")
def prod(rt, x, *, dims, keepdim):
    return run_reduction(rt, "prod", x, dims, keepdim, _accumulated(x, None))


def _extreme_kernel(op: str):
    def run(rt, x, *, dims, keepdim):
        return run_reduction(rt, op, x, dims, keepdim, copies.dtype_of(x).name)

    run.__name__ = op
    return run


def _arg_kernel(op: str):
    def run(rt, x, *, dim, keepdim):
        if dim is None:  # over every element, as a flat tensor
            out = run_reduction(rt, op, x, tuple(range(x.ndim)), False, "int64")
            return out.reshape((1,) * x.ndim) if keepdim else out
        return run_reduction(rt, op, x, (dim,), keepdim, "int64")

    run.__name__ = op
    return run


def _boolean_kernel(op: str, extreme: str):
    """``all``/``any``: the ``amin``/``amax`` of ``x != 0`` (bool), True/False over an empty row."""

    def run(rt, x, *, dims, keepdim):
        flags = x if copies.dtype_of(x) is D.bool_ else run_formula(rt, "ne", (x, 0), {})
        dims = tuple(sorted({d % x.ndim for d in dims})) if x.ndim else ()
        if x.ndim and numel([x.shape[d] for d in dims]) == 0:
            shape = tuple(1 if d in dims else n for d, n in enumerate(x.shape) if keepdim or d not in dims)
            out = rt.empty(shape, D.bool_)
            out.fill(op == "all")
            return out
        return run_reduction(rt, extreme, flags, dims, keepdim, "bool")

    run.__name__ = op
    return run


for _name in ("amax", "amin"):
    kernel(_name)(_extreme_kernel(_name))
kernel("all")(_boolean_kernel("all", "amin"))
kernel("any")(_boolean_kernel("any", "amax"))
for _name in ("argmax", "argmin"):
    kernel(_name)(_arg_kernel(_name))
