"""The kernel IR: what one generated kernel computes, independent of the target language.

A :class:`Kernel` has an index space ``shape`` (the output space; for a reduction kernel the
kept dims) and, when it reduces, a reduction space ``reduce_shape`` (the reduced dims).
Expressions form a scalar DAG of frozen dataclasses (equal subtrees are one value, so
renderers emit each once):

- :class:`Load` reads input buffer ``buffer`` (C-contiguous in memory) at
  ``offset + sum(index[d] * strides[d])``: broadcasting is a zero stride, a folded
  transpose or view is a permuted/partial stride, so views cost nothing;
- :class:`Param` is a runtime host scalar (a learning rate), :class:`Const` a literal;
- :class:`Apply` is one scalar op of :data:`SCALAR_OPS` (these three are the scalar formula IR
  of ``munet/ops/_scalar.py``, which ops are defined with);
- :class:`Reduce` folds an expression over the reduction space;
- :class:`Index` is an affine function of the index itself (``int64``): the position an
  ``argmax`` reports.

Elementwise kernels (``reduce_shape == ()``): every :class:`Store` writes its expression at
each index of ``shape`` into a contiguous output of that shape.

Reduction kernels (``reduce_shape != ()``; ``passes/fuse.py`` makes them from a reduction
with its elementwise producers and consumers):

- An expression *inside* a :class:`Reduce` (its ``expr`` subtree, and a :class:`StoreFull`'s)
  is evaluated at each index of the full space ``shape + reduce_shape``: its loads have
  ``len(shape) + len(reduce_shape)`` strides, kept dims first. This is the prologue
  (elementwise producers inlined into the reduced expression). A ``Reduce`` never contains
  another ``Reduce``; all of a kernel's ``Reduce`` s run over the same ``reduce_shape``.
- An expression *outside* every ``Reduce`` (a :class:`Store`'s, above its ``Reduce`` s) is
  evaluated at each index of ``shape``: its loads have ``len(shape)`` strides, and a
  ``Reduce`` in it stands for the reduced value at that index. This is the epilogue
  (elementwise consumers of the reduced value: ``sum(x) / n``, ``sqrt(sum(x * x))``, an
  optimizer update of a bias from its gradient sum).
- :class:`Store` writes an outside expression at each index of ``shape`` into a contiguous
  output of that shape; :class:`StoreFull` writes an inside expression at each index of the
  full space into output ``buffer`` at ``sum(index[d] * strides[d])`` (a prologue value that
  is also used elsewhere, e.g. the ReLU gradient whose batch sum is a bias gradient), every
  element once.
- ``Reduce("sum", e, dtype)``: the sum of ``e`` over the reduction space, rounded to ``dtype``
  (``e`` has that dtype). Order is the renderer's choice, but float32 sums must be at least as
  accurate as NumPy's pairwise float32 sum: the C renderer accumulates in float64 (8 lanes,
  blocks of 128 folded into a compensated total), so a float32 result is the exact sum
  correctly rounded up to ~1e-13 relative to ``sum(|e|)``; a renderer without float64 (WGSL)
  may use a tree/pairwise float32 order. The sum over an empty space is 0.
- ``Reduce("max", e, dtype)``: NumPy's ``max``: NaN if any element is NaN (NaN propagates),
  else the largest element; which of ``-0.0``/``0.0`` is returned when they tie is unspecified.
  Computed in ``dtype`` (exact). Over an empty space it is ``-inf`` (fusion never forms one:
  eager ``amax`` raises there).
- ``Reduce("argmax", e, "i64", key)``: the value of ``key`` (an :class:`Index` over the full
  space) where ``e`` is largest, by max pooling's rule (PyTorch's): walking the reduction space
  in row-major order, an element replaces the maximum only when strictly greater (the first
  maximum wins, and the first element starts it even when it is ``-inf``); when ``e`` holds NaN,
  the key of the *last* NaN. A renderer may support it only over small spaces (windows).

A renderer (``c.py``; ``wgsl.py``; later CUDA) needs only these classes and the op vocabulary.

``kernel_from_group(group)`` builds the kernel of a fused group (``passes/fuse.py``):
each member node is turned into an expression by its rule in :data:`ELEMENTWISE_RULES`
(an op's scalar formula with the member's operands substituted; a cast, a clone; reductions by
:data:`REDUCTIONS`). No op has a rule of its own: what a fused kernel computes for an op is
its formula, rendered by ``c.py`` and ``wgsl.py`` scalar op by scalar op.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from munet._tensor import contiguous_strides
from munet.ops._registry import DEFINE_HOOKS, OPS
from munet.ops._scalar import SCALAR_OPS, Apply, Const, Param, constant, scalar
from munet.ops._scalar import digest as expression_digest

# the scalar IR and expression builders of munet/ops/_scalar.py, re-exported
__all__ = ["SCALAR_OPS", "Apply", "Const", "Param", "constant", "scalar"]

DTYPES = ("f32", "f64", "bool", "i64")


@dataclass(frozen=True)
class Load:
    buffer: int
    strides: tuple
    offset: int
    dtype: str


@dataclass(frozen=True)
class Index:
    """``offset + sum(index[d] * strides[d])`` over the full space, as an ``i64`` value."""

    strides: tuple
    offset: int = 0
    dtype: str = "i64"


@dataclass(frozen=True)
class Reduce:
    op: str  # "sum", "max" or "argmax" (see the module docstring for accumulation and NaN)
    expr: object  # evaluated over shape + reduce_shape
    dtype: str
    key: object = None  # argmax: the Index it reports


@dataclass(frozen=True)
class Store:
    """Write ``expr`` at each index of ``shape`` into contiguous output ``buffer``."""

    buffer: int
    expr: object


@dataclass(frozen=True)
class StoreFull:
    """Write inside expression ``expr`` at each index of ``shape + reduce_shape`` to ``buffer[index . strides]``."""

    buffer: int
    strides: tuple
    expr: object


@dataclass
class Kernel:
    """One generated kernel; ``inputs``/``outputs`` are dtypes, outputs have shape ``shape``."""

    name: str
    shape: tuple
    reduce_shape: tuple
    inputs: list
    params: list
    outputs: list
    stores: list

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def same_expressions(a, b) -> bool:
    """Whether kernel stores or expressions ``a`` and ``b`` are equal, visiting each shared
    subexpression pair once (``==`` on the dataclasses would walk a DAG as a tree)."""
    seen: set = set()

    def same(x, y) -> bool:
        if x is y:
            return True
        if type(x) is not type(y):
            return False
        if isinstance(x, (tuple, list)):
            return len(x) == len(y) and all(same(p, q) for p, q in zip(x, y))
        if not dataclasses.is_dataclass(x):
            return x == y
        if (id(x), id(y)) in seen:
            return True
        seen.add((id(x), id(y)))
        return all(same(getattr(x, f.name), getattr(y, f.name)) for f in dataclasses.fields(x) if f.compare)

    return same(a, b)


def short_dtype(dtype) -> str | None:
    """``'f32'``, ``'f64'``, ``'bool'`` or ``'i64'`` for a munet dtype, None when kernels do not support it."""
    return {"float32": "f32", "float64": "f64", "bool": "bool", "int64": "i64"}.get(getattr(dtype, "name", str(dtype)))


def broadcast_strides(shape, strides, target) -> tuple:
    """Strides of a ``shape`` operand broadcast to ``target`` (right-aligned, size-1 dims step 0)."""
    pad = len(target) - len(shape)
    out = [0] * pad
    for s, st in zip(shape, strides):
        out.append(0 if s == 1 else st)
    return tuple(out)


def apply_view(node, shape, strides, offset, np_dtype):
    """Geometry after view node ``node`` of a buffer seen as ``shape``/``strides``/``offset`` (elements).

    The view rule reads a tensor with no storage: the geometry is Python ints, of any size (the
    sentinel sizes of ``c_symbolic.py`` are far beyond what an array could hold)."""
    from munet._dtype import from_numpy_dtype
    from munet._tensor import Tensor

    t = Tensor._make(None, tuple(shape), tuple(strides), offset, from_numpy_dtype(np.dtype(np_dtype)), None)
    shape, strides, offset = node.op.view(t, **node.attrs)
    return tuple(shape), tuple(strides), int(offset)


def view_geometry(chain, base):
    """Shape, element strides and offset of view nodes ``chain`` applied to a contiguous ``base``, or None."""
    if base.shape is None or base.dtype is None:
        return None
    geometry = (tuple(base.shape), contiguous_strides(base.shape), 0)
    for node in chain:
        try:
            geometry = apply_view(node, *geometry, base.dtype.np)
        except Exception:  # a view rule this folding cannot imitate: read the view's value instead
            return None
    return geometry


def kernel_from_group(group) -> tuple:
    """``(kernel, tensor inputs, scalar inputs)`` for a fused group (``passes/fuse.py``).

    The kernel's input buffers are the group's tensor inputs in order (read C-contiguous),
    its params the group's scalar inputs, its outputs the group's outputs. A reduction group
    (``group.reduce_dims``) has the reduction's input shape as ``group.shape``: members of
    that shape are inside the reduction (prologue, :class:`StoreFull` outputs), the others
    have the reduced shape up to size-1 dims (epilogue, :class:`Store` outputs). Built once per
    group (memory planning and lowering both ask); named (a digest of its loops and stores) on the
    first call: :func:`unnamed_kernel_of_group` serves callers that render nothing.
    """
    kernel, tensors, scalars = unnamed_kernel_of_group(group)
    if not kernel.name:
        digest = expression_digest((kernel.shape, kernel.reduce_shape, kernel.stores))[:16]
        group.built = (dataclasses.replace(kernel, name=f"fused_{digest}"), tensors, scalars)
    return group.built


def unnamed_kernel_of_group(group) -> tuple:
    """:func:`kernel_from_group`, with the kernel's name empty unless it was named already (naming
    digests every expression: memory planning, and a copy of a group that takes the kernel its
    template compiled, need no name)."""
    if getattr(group, "built", None) is None:
        group.built = _kernel_from_group(group)
    return group.built


def _kernel_from_group(group) -> tuple:

    full = tuple(group.shape)
    dims = tuple(getattr(group, "reduce_dims", ()))
    kept_axes = [a for a in range(len(full)) if a not in dims and full[a] != 1] if dims else list(range(len(full)))
    shape = tuple(full[a] for a in kept_axes)
    reduce_shape = tuple(full[a] for a in dims)
    order = kept_axes + list(dims)
    tensors = [v for v in group.inputs if v.kind == "tensor"]
    scalars = [v for v in group.inputs if v.kind != "tensor"]
    buffer = {v: i for i, v in enumerate(tensors)}
    param = {v: i for i, v in enumerate(scalars)}
    geometry: dict = {}  # folded view value -> (base, shape, strides, offset)
    exprs: dict = {}

    def index_strides(target, vshape, vstrides) -> tuple:
        """Strides in the kernel's index order of an operand ``vshape``/``vstrides`` read by a ``target``-shaped member."""
        strides = broadcast_strides(vshape, vstrides, target)
        if not dims:
            return strides
        if target == full:  # inside the reduction: kept dims, then reduced dims
            return tuple(strides[a] for a in order)
        return tuple(st for s, st in zip(target, strides) if s != 1)  # the reduced shape up to size-1 dims

    def operand(a, dtype, target):
        if not hasattr(a, "kind"):
            return a
        if a in exprs:
            return exprs[a]
        if a in param:
            return Param(param[a], dtype)
        if a in geometry:
            base, vshape, vstrides, offset = geometry[a]
            return Load(buffer[base], index_strides(target, vshape, vstrides), offset, short_dtype(a.dtype))
        strides = index_strides(target, tuple(a.shape), contiguous_strides(a.shape))
        return Load(buffer[a], strides, 0, short_dtype(a.dtype))

    for node in group.members:
        out = node.outputs[0]
        if node.op.view is not None:
            src = node.args[0]
            if src in exprs:  # a view of a reduced value that keeps its element order (checked by fuse)
                exprs[out] = exprs[src]
                continue
            base, g = (
                (src, (tuple(src.shape), contiguous_strides(src.shape), 0))
                if src in buffer
                else (
                    geometry[src][0],
                    geometry[src][1:],
                )
            )
            geometry[out] = (base, *apply_view(node, *g, base.dtype.np))
            continue
        dtype = short_dtype(out.dtype)
        if node.name in REDUCTIONS:
            exprs[out] = Reduce(REDUCTIONS[node.name], operand(node.args[0], dtype, full), dtype)
            continue
        args = [operand(a, dtype, tuple(out.shape)) for a in node.args]
        exprs[out] = ELEMENTWISE_RULES[node.name](node, args, dtype)
    full_strides = tuple(contiguous_strides(full)[a] for a in order)
    stores = [
        StoreFull(i, full_strides, exprs[v]) if dims and tuple(v.shape) == full else Store(i, exprs[v])
        for i, v in enumerate(group.outputs)
    ]
    kernel = Kernel(
        name="",
        shape=shape,
        reduce_shape=reduce_shape,
        inputs=[short_dtype(v.dtype) for v in tensors],
        params=["f64"] * len(scalars),
        outputs=[short_dtype(v.dtype) for v in group.outputs],
        stores=stores,
    )
    return kernel, tensors, scalars


def loads_only_at_write_index(kernel: Kernel, buffer: int) -> bool:
    """Whether every load of input ``buffer`` reads the element at the index being written.

    Then an output may be written over that input: a renderer computes all of an index's loads
    before its stores (``c.py`` emits the loads as locals ahead of the stores), so each element
    is read before it is overwritten. A broadcast, transposed or offset load reads elsewhere,
    and so does a load inside a reduction (or feeding a :class:`StoreFull`): only a reduction
    kernel's epilogue loads qualify there.
    """
    out = contiguous_strides(kernel.shape)
    loads = []
    seen: set = set()
    stack = [(st.expr, isinstance(st, StoreFull)) for st in kernel.stores]
    while stack:
        e, inside = stack.pop()
        if (e, inside) in seen:
            continue
        seen.add((e, inside))
        if isinstance(e, Load) and e.buffer == buffer:
            if inside:
                return False
            loads.append(e)
        if isinstance(e, Reduce):
            stack.append((e.expr, True))
        stack.extend((a, inside) for a in getattr(e, "args", ()))
    return bool(loads) and all(
        e.offset == 0
        and len(e.strides) == len(out)
        and all(a == b for a, b, s in zip(e.strides, out, kernel.shape) if s != 1)
        for e in loads
    )


# Member rules: (node, argument expressions or Python constants, output dtype) -> expression.
def _from_formula(op):
    """The member rule of ``op`` (defined by a formula): its operands substituted for its arguments.

    The formula computes in its value operands' dtype (not a ``where`` condition's), the output
    dtype when all of them are Python numbers; those numbers become literals of that dtype.
    """
    conditions = {i for i, role in enumerate(op.inputs) if role == "condition"}

    def rule(node, args, t):
        values = [a for i, a in enumerate(args) if i not in conditions and hasattr(a, "dtype")]
        compute = values[0].dtype if values else t
        return op.formula([constant(a, compute) for a in args], compute, **node.attrs)

    return rule


def _cast(node, a, t):
    return a[0] if a[0].dtype == t else Apply("cast", (a[0],), t)


def _identity(node, a, t):
    return a[0]


ELEMENTWISE_RULES = {
    **{name: _from_formula(op) for name, op in OPS.items() if op.formula is not None},
    "cast": _cast,
    "clone": _identity,
}


def _add_member_rule(op) -> None:
    """An elementwise op defined later (``define``'s hook) fuses too."""
    if op.formula is not None:
        ELEMENTWISE_RULES[op.name] = _from_formula(op)


DEFINE_HOOKS.append(_add_member_rule)

# Reduction member ops -> the Reduce op they become.
REDUCTIONS = {"sum": "sum", "amax": "max"}


class UnsupportedKernelError(NotImplementedError):
    """A kernel a renderer (WGSL, CUDA C) cannot express; the lowering catches it and runs the
    group's member nodes unfused, so users never meet it."""
