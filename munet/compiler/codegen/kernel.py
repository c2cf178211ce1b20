"""The kernel IR: what one generated kernel computes, independent of the target language.

A :class:`Kernel` has an index space (``shape``, the output space) and, when it reduces, a
trailing reduction space (``reduce_shape``). Expressions form a scalar DAG of frozen
dataclasses (equal subtrees are one value, so renderers emit each once):

- :class:`Load` reads input buffer ``buffer`` (C-contiguous in memory) at
  ``offset + sum(index[d] * strides[d])``: broadcasting is a zero stride, a folded
  transpose or view is a permuted/partial stride, so views cost nothing;
- :class:`Param` is a runtime host scalar (a learning rate), :class:`Const` a literal;
- :class:`Apply` is one scalar op of :data:`SCALAR_OPS`;
- :class:`Reduce` folds an expression over the reduction space (``sum`` in NumPy's
  pairwise order, ``max`` propagating NaN); loads inside it index ``shape + reduce_shape``.

``stores`` write expressions over the output space into contiguous outputs. A renderer
(``c.py``; later CUDA and WGSL) needs only these classes and the op vocabulary.

``kernel_from_group(group)`` builds the kernel of a fused group (``passes/fuse.py``):
each member node is turned into an expression by its rule in :data:`ELEMENTWISE_RULES`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Scalar op vocabulary every renderer implements: name -> arity.
SCALAR_OPS = {
    "add": 2,
    "sub": 2,
    "mul": 2,
    "div": 2,
    "maximum": 2,  # NumPy's maximum: NaN propagates
    "lt": 2,
    "gt": 2,
    "ge": 2,
    "neg": 1,
    "abs": 1,
    "exp": 1,
    "log": 1,
    "sqrt": 1,
    "tanh": 1,
    "erf": 1,  # float64 only: a float32 erf is expanded into arithmetic (see _erf)
    "cast": 1,
    "where": 3,
}

DTYPES = ("f32", "f64", "bool")


@dataclass(frozen=True)
class Load:
    buffer: int
    strides: tuple
    offset: int
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
    op: str
    args: tuple
    dtype: str


@dataclass(frozen=True)
class Reduce:
    op: str  # "sum" or "max"
    expr: object
    dtype: str


@dataclass(frozen=True)
class Store:
    buffer: int
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
        return int(np.prod(self.shape, dtype=np.int64))


def short_dtype(dtype) -> str | None:
    """``'f32'``, ``'f64'`` or ``'bool'`` for a munet dtype, None when kernels do not support it."""
    return {"float32": "f32", "float64": "f64", "bool": "bool"}.get(getattr(dtype, "name", str(dtype)))


def contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return tuple(reversed(strides))


def broadcast_strides(shape, strides, target) -> tuple:
    """Strides of a ``shape`` operand broadcast to ``target`` (right-aligned, size-1 dims step 0)."""
    pad = len(target) - len(shape)
    out = [0] * pad
    for s, st in zip(shape, strides):
        out.append(0 if s == 1 else st)
    return tuple(out)


def apply_view(node, shape, strides, offset, np_dtype):
    """Geometry after view node ``node`` of a buffer seen as ``shape``/``strides``/``offset`` (elements)."""
    from munet._tensor import Tensor

    item = np.dtype(np_dtype).itemsize
    fake = np.lib.stride_tricks.as_strided(
        np.zeros(1, np_dtype), tuple(shape), tuple(s * item for s in strides), writeable=False
    )
    t = Tensor._from_numpy(fake)
    t._offset = offset
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
    its params the group's scalar inputs, its outputs the group's outputs.
    """
    import hashlib

    shape = tuple(group.shape)
    tensors = [v for v in group.inputs if v.kind == "tensor"]
    scalars = [v for v in group.inputs if v.kind != "tensor"]
    buffer = {v: i for i, v in enumerate(tensors)}
    param = {v: i for i, v in enumerate(scalars)}
    geometry: dict = {}  # folded view value -> (base, shape, strides, offset)
    exprs: dict = {}

    def operand(a, dtype):
        if not hasattr(a, "kind"):
            return a
        if a in exprs:
            return exprs[a]
        if a in param:
            return Param(param[a], dtype)
        if a in geometry:
            base, vshape, vstrides, offset = geometry[a]
            return Load(buffer[base], broadcast_strides(vshape, vstrides, shape), offset, short_dtype(a.dtype))
        strides = broadcast_strides(a.shape, contiguous_strides(a.shape), shape)
        return Load(buffer[a], strides, 0, short_dtype(a.dtype))

    for node in group.members:
        out = node.outputs[0]
        if node.op.view is not None:
            src = node.args[0]
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
        args = [operand(a, dtype) for a in node.args]
        exprs[out] = ELEMENTWISE_RULES[node.name](node, args, dtype)
    stores = [Store(i, exprs[v]) for i, v in enumerate(group.outputs)]
    digest = hashlib.sha1(repr((shape, stores)).encode()).hexdigest()[:16]
    kernel = Kernel(
        name=f"fused_{digest}",
        shape=shape,
        reduce_shape=(),
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
    is read before it is overwritten. A broadcast, transposed or offset load reads elsewhere.
    """
    if kernel.reduce_shape:
        return False
    out = contiguous_strides(kernel.shape)
    loads = []
    seen: set = set()
    stack = [st.expr for st in kernel.stores]
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if isinstance(e, Load) and e.buffer == buffer:
            loads.append(e)
        stack.extend(getattr(e, "args", ()))
    return bool(loads) and all(
        e.offset == 0
        and len(e.strides) == len(out)
        and all(a == b for a, b, s in zip(e.strides, out, kernel.shape) if s != 1)
        for e in loads
    )


# Member rules: (node, argument expressions or Python constants, output dtype) -> expression.
def _c(x, dtype):
    return x if not isinstance(x, (int, float, bool)) else Const(float(x), dtype)


def _binary(op):
    return lambda node, a, t: Apply(op, (_c(a[0], t), _c(a[1], t)), t)


def _unary(op):
    return lambda node, a, t: Apply(op, (a[0],), t)


def _lerp(node, a, t):
    # As the cpu kernel: where(|w| < 0.5, start + w * (end - start), end - (end - start) * (1 - w))
    start, end, w = (_c(x, t) for x in a)
    diff = Apply("sub", (end, start), t)
    low = Apply("add", (start, Apply("mul", (w, diff), t)), t)
    high = Apply("sub", (end, Apply("mul", (diff, Apply("sub", (Const(1.0, t), w), t)), t)), t)
    return Apply("where", (Apply("lt", (Apply("abs", (w,), t), Const(0.5, t)), "bool"), low, high), t)


def _relu(node, a, t):
    return Apply("maximum", (a[0], Const(0.0, t)), t)


def _threshold_backward(node, a, t):
    grad, x = a
    above = Apply("gt", (x, Const(float(node.attrs["threshold"]), t)), "bool")
    return Apply("where", (above, grad, Const(0.0, t)), t)


def _where(node, a, t):
    return Apply("where", (a[0], _c(a[1], t), _c(a[2], t)), t)


def _cast(node, a, t):
    return a[0] if a[0].dtype == t else Apply("cast", (a[0],), t)


def _identity(node, a, t):
    return a[0]


# erf(x) = x * g(x*x) with g(t) = erf(sqrt(t)) / sqrt(t) on t in [0, 16]: a degree-17 Chebyshev fit
# (relative error 2.5e-9) in monomial form in u = t / 8 - 1. Evaluated in float64 by Estrin's scheme
# (short dependency chains, so the loop vectorizes well), then rounded: a float32 erf within 0.54 ulp,
# about 8x faster than the C library's scalar erff. |x| >= 4 gives +-1 (erf(4) rounds to 1 in float32).
_ERF_G = (0.3535309963615689, -0.17657623587308396, 0.131675001456858, -0.10771028937932434, 0.0902120426726717,
          -0.07473053609886163, 0.059855993577738034, -0.04574400172857171, 0.03321700110805473,
          -0.02256359771211882, 0.01390814619362078, -0.008382074119608637, 0.005577363702497675,
          -0.002911839025843321, 0.0006166107016690305, -0.0003243025630073823, 0.0005964250771541936,
          -0.0002467088299454191)  # fmt: skip


def _erf(node, a, t):
    if t != "f32":
        return Apply("erf", (a[0],), t)
    d = "f64"

    def op(name, *args):
        return Apply(name, tuple(_c(v, d) for v in args), d)

    x = Apply("cast", (a[0],), d)
    above, below = Apply("gt", (x, Const(4.0, d)), "bool"), Apply("lt", (x, Const(-4.0, d)), "bool")
    clamped = op("where", above, 4.0, op("where", below, -4.0, x))  # NaN passes through
    u = op("sub", op("mul", op("mul", clamped, clamped), 0.125), 1.0)
    terms, power = [Const(c, d) for c in _ERF_G], u
    while len(terms) > 1:
        pairs = [terms[i : i + 2] for i in range(0, len(terms), 2)]
        terms = [op("add", p[0], op("mul", p[1], power)) if len(p) == 2 else p[0] for p in pairs]
        power = op("mul", power, power)
    return Apply("cast", (op("mul", terms[0], clamped),), t)


ELEMENTWISE_RULES = {
    "add": _binary("add"),
    "sub": _binary("sub"),
    "mul": _binary("mul"),
    "div": _binary("div"),
    "neg": _unary("neg"),
    "exp": _unary("exp"),
    "log": _unary("log"),
    "sqrt": _unary("sqrt"),
    "tanh": _unary("tanh"),
    "erf": _erf,
    "lerp": _lerp,
    "relu": _relu,
    "threshold_backward": _threshold_backward,
    "where": _where,
    "cast": _cast,
    "clone": _identity,
}

REDUCTIONS = ("sum", "max")
