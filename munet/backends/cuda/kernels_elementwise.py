"""Eager cuda kernels rendered from scalar formulas, and casts and strided copies, as CUDA C.

One renderer, :func:`render_strided`, prints a formula expression over strided operands as a
grid-stride kernel; the op kernels (:func:`render_elementwise`), casts (:func:`render_cast`) and
strided copies (:func:`render_copy`) are formulas for it: an op's own formula (``define(...,
formula=...)``), ``cast(x)`` and ``x``. Nothing here knows an op. Launching is the device side's:

    src = render_elementwise("add", ("float32", "float32"), rank=2)   # -> StridedSource
    args = src.arguments(shape, out=(out_ptr, out_strides, out_offset),
                         inputs=[(a_ptr, a_strides, a_offset), (b_ptr, b_strides, b_offset)])
    # launch src.name from compile_source(src.source, arch) with grid src.grid(n), block src.block,
    # passing args in order: each (C type, value), a "T *" a device pointer, the rest by value

Parameters (``src.params``): ``n`` (elements), ``size0..`` (the output shape, ``rank`` of them),
then the output and each input: its pointer, element offset and ``rank`` element strides (0 for a
broadcast dim, never negative), and last a by-value scalar per Python-number operand
(``scalars``: their positions) in the compute dtype, then, when the formula divides integers
(``faults``), the device's fault record (``device_asserts.py``: a zero divisor raises PyTorch's
``ZeroDivisionError`` at the next synchronization). Sizes, strides and offsets are ``unsigned``
for ``index_bits=32`` and ``long long`` for 64 (the default); ``index_bits_for(shape,
geometries)`` says when 32 bits hold every index, which is several times cheaper on the device
(64-bit division is a long software routine) and to compile. Shapes, strides and offsets are
arguments, so one compiled kernel serves every shape of a rank; the caller merges dims that every
operand walks alike before choosing ``rank`` (any rank works, fewer is cheaper).

Dtypes: float32/float64, float16/bfloat16 (loaded to float, computed in float32, stored rounded
to nearest even, as the CPU does), int8/uint8/int16/int32/int64 and bool. An op whose formula needs
a scalar op without a CUDA form for these dtypes raises
:class:`~munet.backends.cuda.scalar_cuda.UnrenderableError`; ``supports(op, dtype)`` asks first.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from munet.backends.cuda.scalar_cuda import (
    HEADER,
    PRELUDE,
    SCALAR_KINDS,
    Emitter,
    UnrenderableError,
    compute_dtype,
    ctype,
    load,
    store,
)
from munet.backends.cuda.source import CudaSource
from munet.ops._registry import OPS
from munet.ops._scalar import Apply, Arg, kind

DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool")
BLOCK = 256


@dataclass(frozen=True)
class StridedSource(CudaSource):
    """A rendered strided kernel; :meth:`arguments` lays out its parameters (see the module docstring)."""

    rank: int = 0
    n_inputs: int = 0
    scalars: tuple = ()  # positions of the inputs passed as by-value numbers
    out_dtype: str = ""
    index_bits: int = 64  # sizes, strides and offsets are unsigned 32-bit or long long (index_bits_for)
    faults: bool = False  # the last parameter is the fault record (an integer division)

    def arguments(self, shape, out, inputs, fault_record=None) -> list:
        """``[(C type, value), ...]`` in parameter order: ``out``/``inputs`` are ``(pointer, strides,
        offset)`` (strides in elements, ``rank`` of them), a scalar input a Python number;
        ``fault_record`` the record's pointer (required when ``faults``)."""
        if len(shape) != self.rank:
            raise ValueError(f"{self.name}: expected a rank-{self.rank} shape, got {tuple(shape)}")
        if len(inputs) != self.n_inputs:
            raise ValueError(f"{self.name}: expected {self.n_inputs} inputs, got {len(inputs)}")
        n = 1
        for s in shape:
            n *= int(s)
        values = [int(n), *(int(s) for s in shape)]
        tensors = [out] + [x for i, x in enumerate(inputs) if i not in self.scalars]
        for pointer, strides, offset in tensors:
            if any(int(s) < 0 for s in strides) or int(offset) < 0:
                raise ValueError(f"{self.name}: negative strides or offsets {tuple(strides)}, {offset}")
            if len(strides) != self.rank:
                raise ValueError(f"{self.name}: expected {self.rank} strides, got {tuple(strides)}")
            values += [pointer, int(offset), *(int(s) for s in strides)]
        values += [inputs[i] for i in self.scalars]
        if self.faults:
            if fault_record is None:
                raise ValueError(f"{self.name}: the kernel divides integers and needs the fault record")
            values.append(fault_record)
        return [(t, v) for (t, _), v in zip(self.params, values, strict=True)]


def _coordinates(rank: int, index: str) -> list:
    if rank == 0:
        return []
    lines = [f"{index} rem = i;"]
    for d in reversed(range(rank)):
        lines.append(f"const {index} c{d} = rem % size{d}; rem /= size{d};")
    return lines


def _at(name: str, rank: int) -> str:
    return " + ".join([f"{name}_off", *(f"c{d} * {name}_st{d}" for d in range(rank))])


def render_strided(
    label: str, expr, operands: tuple, out_dtype: str, rank: int, scalars: tuple = (), index_bits: int = 64
) -> StridedSource:
    """The kernel writing formula ``expr`` (over ``Arg(i)``: operand ``i`` of storage dtype
    ``operands[i]``, in its compute dtype) at every index of a rank-``rank`` output of ``out_dtype``."""
    index = index_type(index_bits)
    params = [(index, "n"), *((index, f"size{d}") for d in range(rank))]
    params += [(f"{ctype(out_dtype)} *", "out"), (index, "out_off")]
    params += [(index, f"out_st{d}") for d in range(rank)]
    for i, dt in enumerate(operands):
        if i in scalars:
            continue
        params += [(f"const {ctype(dt)} *", f"in{i}"), (index, f"in{i}_off")]
        params += [(index, f"in{i}_st{d}") for d in range(rank)]
    params += [(ctype(compute_dtype(operands[i])), f"s{i}") for i in scalars]
    body = _coordinates(rank, index)

    def bind(e):
        if not isinstance(e, Arg):
            return None
        if e.index in scalars:
            return f"s{e.index}"
        return load(operands[e.index], f"in{e.index}[{_at(f'in{e.index}', rank)}]")

    emitter = Emitter(bind, body, fault_record=True)
    value = emitter.emit(expr)
    body.append(f"out[{_at('out', rank)}] = {store(out_dtype, value, expr.dtype)};")
    if emitter.used_fault_record:
        params.append(("unsigned long long *", "munet_fault_record"))
    signature = ", ".join(f"{t}{'' if t.endswith('*') else ' '}{n}" for t, n in params)
    text = "\n".join(
        [
            f'extern "C" __global__ void KERNEL({signature}) {{',
            f"  for ({index} i = blockIdx.x * ({index})blockDim.x + threadIdx.x; i < n;"
            f" i += ({index})blockDim.x * gridDim.x) {{",
            *("    " + line for line in body),
            "  }",
            "}",
        ]
    )
    name = f"munet_{label}_{hashlib.sha1(text.encode()).hexdigest()[:12]}"
    source = "\n".join([HEADER, PRELUDE, text.replace("KERNEL", name, 1)]) + "\n"
    return StridedSource(
        name,
        source,
        tuple(params),
        BLOCK,
        "elements",
        rank,
        len(operands),
        tuple(scalars),
        out_dtype,
        index_bits,
        emitter.used_fault_record,
    )


def index_type(index_bits: int) -> str:
    """The C type of a kernel's sizes, strides and offsets: ``unsigned`` (32 bits) or ``long long``."""
    if index_bits not in (32, 64):
        raise ValueError(f"cuda kernels: index_bits must be 32 or 64, got {index_bits}")
    return "unsigned" if index_bits == 32 else "long long"


def index_bits_for(shape, geometries) -> int:
    """32 when the ``shape``'s element count and every operand's reachable element offset
    (``(strides, offset)`` pairs, strides non-negative) are below 2**31, else 64.

    32-bit index arithmetic is several times cheaper on the GPU (and to compile); a
    grid-stride step stays below 2**32, so the unsigned loop cannot wrap."""
    n = 1
    for s in shape:
        n *= int(s)
    reach = [int(off) + sum((int(s) - 1) * int(st) for s, st in zip(shape, strides)) for strides, off in geometries]
    return 32 if max([n, *reach]) < 2**31 and n > 0 else 64


def _formula_args(op, operands: tuple) -> tuple:
    """``(Arg per operand or None, compute dtype)`` for ``op``'s formula over storage dtypes ``operands``."""
    conditions = {i for i, role in enumerate(op.inputs) if role == "condition"}
    values = [d for i, d in enumerate(operands) if d is not None and i not in conditions]
    compute = compute_dtype(values[0] if values else next(d for d in operands if d is not None))
    args = tuple(None if d is None else Arg(i, "bool" if i in conditions else compute) for i, d in enumerate(operands))
    return args, compute


def _present(operands: tuple) -> tuple:
    """Positions of the operands that are given (a missing optional one, ``clamp``'s ``max``, is None)."""
    return tuple(i for i, d in enumerate(operands) if d is not None)


def _check_kinds(expr) -> None:
    """Raise UnrenderableError when an op of ``expr`` is applied to a kind the vocabulary excludes."""
    if not isinstance(expr, Apply):
        return
    if expr.op not in ("cast", "where"):
        if kind(expr.args[0].dtype) not in SCALAR_KINDS[expr.op]:
            raise UnrenderableError(f"cuda: scalar op '{expr.op}' does not take {kind(expr.args[0].dtype)} operands")
    for a in expr.args:
        _check_kinds(a)


def render_elementwise(
    name: str, operands: tuple, *, rank: int, scalars: tuple = (), attrs=None, index_bits: int = 64
) -> StridedSource:
    """The eager kernel of formula op ``name`` over operands of storage dtypes ``operands`` (None: a
    missing optional argument); ``scalars``: positions given as Python numbers (already of the
    compute dtype's kind, as the dispatcher promotes them). The output dtype is the operands'
    storage dtype when the formula's value has their compute dtype, else the value's (bool)."""
    op = OPS.get(name)
    if op is None or op.formula is None:
        raise UnrenderableError(f"cuda: '{name}' is not an op defined by a scalar formula")
    for d in operands:
        if d is not None and d not in DTYPES:
            raise UnrenderableError(f"{name}: no cuda kernel for dtype {d}")
    args, compute = _formula_args(op, operands)
    expr = op.formula(list(args), compute, **(attrs or {}))
    _check_kinds(expr)
    present = _present(operands)
    # the kernel's operands are the given ones, renumbered
    renumber = {i: k for k, i in enumerate(present)}
    expr = _renumbered(expr, renumber)
    storage = tuple(operands[i] for i in present)
    conditions = {i for i, role in enumerate(op.inputs) if role == "condition"}
    value_storage = next((operands[i] for i in present if i not in conditions), storage[0])
    out = value_storage if expr.dtype == compute else _storage_of(expr.dtype)
    return render_strided(name, expr, storage, out, rank, tuple(renumber[i] for i in scalars), index_bits)


def _storage_of(dtype: str) -> str:
    return {"f32": "float32", "f64": "float64", "i64": "int64", "i32": "int32"}.get(dtype, dtype)


def _renumbered(e, renumber: dict):
    if isinstance(e, Arg):
        return Arg(renumber[e.index], e.dtype)
    if isinstance(e, Apply):
        return Apply(e.op, tuple(_renumbered(a, renumber) for a in e.args), e.dtype)
    return e


def supports(name: str, dtype: str) -> bool:
    """Whether formula op ``name`` has a cuda kernel for operands of ``dtype`` (all tensors)."""
    op = OPS[name]
    operands = tuple("bool" if role == "condition" else dtype for role in op.inputs)
    try:
        render_elementwise(name, operands, rank=1, attrs=sample_attrs(op))
    except (UnrenderableError, TypeError, ValueError):  # the formula refuses the dtype
        return False
    return True


def sample_attrs(op) -> dict:
    """Attribute values to instantiate a formula op with when none are given (``supports`` and the
    test suites): which dtypes a formula takes does not depend on them; an attribute of a newer op
    without a sample here gets 0.5."""
    import inspect

    names = [p.name for p in inspect.signature(op.formula).parameters.values() if p.kind == p.KEYWORD_ONLY]
    return {n: _SAMPLES.get(n, 0.5) for n in names}


_SAMPLES = {"threshold": 0.5, "value": -2.0, "min_val": -1.0, "max_val": 1.0, "negative_slope": 0.01, "alpha": 1.0,
            "scale": 1.0, "input_scale": 1.0, "beta": 1.0, "nan": 0.0, "posinf": 1e30, "neginf": -1e30,
            "decimals": 0, "approximate": "none"}  # fmt: skip


def render_cast(source: str, target: str, *, rank: int, index_bits: int = 64) -> StridedSource:
    """The kernel converting a strided ``source``-dtype tensor to ``target`` (NumPy's ``astype``:
    float to int truncates, to bool is ``!= 0``, float64 to a 16-bit float rounds once)."""
    for d in (source, target):
        if d not in DTYPES:
            raise UnrenderableError(f"cast: no cuda kernel for dtype {d}")
    x = Arg(0, compute_dtype(source))
    if source == "float64" and target in ("float16", "bfloat16"):
        expr = x  # stored by the double conversion: one rounding
    else:
        expr = Apply("cast", (x,), compute_dtype(target)) if compute_dtype(target) != x.dtype else x
    return render_strided(f"cast_{source}_{target}", expr, (source,), target, rank, (), index_bits)


def render_copy(dtype: str, *, rank: int, index_bits: int = 64) -> StridedSource:
    """The strided copy of a ``dtype`` tensor (any layout into any layout of the same shape)."""
    if dtype not in DTYPES:
        raise UnrenderableError(f"copy: no cuda kernel for dtype {dtype}")
    if dtype in ("float16", "bfloat16"):
        return _raw_copy(dtype, rank, index_bits)
    return render_strided(f"copy_{dtype}", Arg(0, dtype), (dtype,), dtype, rank, (), index_bits)


def _raw_copy(dtype: str, rank: int, index_bits: int) -> StridedSource:
    """A 16-bit float copy moves the bits as ``unsigned short`` (no float round trip: NaN payloads survive)."""
    src = render_strided(f"copy_{dtype}", Arg(0, "uint16"), ("uint16",), "uint16", rank, (), index_bits)
    return StridedSource(src.name, src.source, src.params, src.block, src.layout, rank, 1, (), dtype, index_bits)
