"""The compiler's SSA intermediate representation: ``Graph``, ``Node``, ``Value``.

A :class:`Value` is defined exactly once, by a graph input or by one node output. A
:class:`Node` applies one op to its arguments: ``args`` mirrors the positional arguments the
op was applied with (a ``Value`` where a tensor or a symbolic scalar was, a Python constant
otherwise, lists for variadic ops) and ``attrs`` its keyword attributes (which may hold scalar
``Value`` s, e.g. a learning rate read at each call). Ops are registry ``Op`` s, or the
compiler's own :class:`ScalarOp` (host arithmetic on symbolic scalars) and ``CONSTANT``.

``verify(graph)`` checks single definition, definition before use and that outputs are
defined; ``str(graph)`` prints one line per node::

    %3: f32[256, 1024] = matmul(%0, %1)
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field


class ScalarOp:
    """Host arithmetic on Python numbers (hyperparameter expressions such as ``1 - beta1``)."""

    __slots__ = ("name", "fn")

    def __init__(self, name: str, fn):
        self.name = name
        self.fn = fn

    def __repr__(self) -> str:
        return f"<scalar op {self.name}>"


SCALAR_OPS = {
    name: ScalarOp(name, fn)
    for name, fn in {
        "add": operator.add,
        "sub": operator.sub,
        "mul": operator.mul,
        "truediv": operator.truediv,
        "pow": operator.pow,
        "neg": operator.neg,
    }.items()
}


class _ConstantOp:
    name = "constant"

    def __repr__(self) -> str:
        return "<constant>"


CONSTANT = _ConstantOp()


class Value:
    """One SSA value: a tensor (shape, dtype, device) or a host scalar (``kind == 'scalar'``)."""

    __slots__ = ("id", "shape", "dtype", "device", "kind", "producer", "source", "label")

    def __init__(self, id: int, shape=None, dtype=None, device=None, kind: str = "tensor"):
        self.id = id
        self.shape = tuple(shape) if shape is not None else None
        self.dtype = dtype
        self.device = device
        self.kind = kind
        self.producer: Node | None = None
        self.source = None  # for graph inputs: where the runtime value comes from
        self.label = ""

    def type_str(self) -> str:
        if self.kind == "scalar":
            return "scalar"
        dims = ", ".join(str(s) for s in self.shape) if self.shape is not None else "?"
        return f"{_short_dtype(self.dtype)}[{dims}]"

    def __repr__(self) -> str:
        return f"%{self.id}"


def _short_dtype(dtype) -> str:
    name = getattr(dtype, "name", str(dtype))
    return {
        "float32": "f32",
        "float64": "f64",
        "float16": "f16",
        "bfloat16": "bf16",
        "int64": "i64",
        "int32": "i32",
    }.get(name, name)


def iter_values(obj):
    """Every ``Value`` inside an argument (a Value, a list/tuple of them, or a constant)."""
    if isinstance(obj, Value):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from iter_values(item)


def map_values(obj, fn):
    """``obj`` with every Value replaced by ``fn(value)``, structure kept."""
    if isinstance(obj, Value):
        return fn(obj)
    if isinstance(obj, list):
        return [map_values(x, fn) for x in obj]
    if isinstance(obj, tuple):
        return tuple(map_values(x, fn) for x in obj)
    return obj


@dataclass(eq=False)
class Node:
    """``outputs = op(*args, **attrs)``; ``effectful`` nodes (random draws, device-side checks) are never
    removed, merged or folded."""

    op: object
    args: tuple
    attrs: dict
    outputs: list = field(default_factory=list)
    constant: object = None  # the array of a CONSTANT node
    origin: tuple = ()  # (file, line) of the user's code that traced it: run-time errors name it
    folded_from: object = None  # a CONSTANT made by constant folding: the node it evaluated (resize.py)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def effectful(self) -> bool:
        return "generator" in self.attrs or getattr(self.op, "effectful", False)

    def inputs(self) -> list[Value]:
        found = list(iter_values(self.args))
        for v in self.attrs.values():
            found.extend(iter_values(v))
        return found

    def replace_inputs(self, fn) -> None:
        self.args = map_values(self.args, fn)
        self.attrs = {k: map_values(v, fn) for k, v in self.attrs.items()}


class Graph:
    """Inputs, nodes in execution order, and outputs (values the caller needs)."""

    def __init__(self):
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self._next_id = 0

    # building ----------------------------------------------------------------------------------
    def new_value(self, shape=None, dtype=None, device=None, kind: str = "tensor") -> Value:
        v = Value(self._next_id, shape, dtype, device, kind)
        self._next_id += 1
        return v

    def add_input(self, shape=None, dtype=None, device=None, *, kind: str = "tensor", source=None, label="") -> Value:
        v = self.new_value(shape, dtype, device, kind)
        v.source, v.label = source, label
        self.inputs.append(v)
        return v

    def add_node(self, op, args, attrs, out_types) -> Node:
        """Append ``op(*args, **attrs)``; ``out_types`` is a list of ``(shape, dtype, device, kind)``."""
        node = Node(op, tuple(args), dict(attrs))
        for shape, dtype, device, kind in out_types:
            v = self.new_value(shape, dtype, device, kind)
            v.producer = node
            node.outputs.append(v)
        self.nodes.append(node)
        return node

    def add_constant(self, array, dtype, device) -> Value:
        node = self.add_node(CONSTANT, (), {}, [(array.shape, dtype, device, "tensor")])
        node.constant = array
        return node.outputs[0]

    # editing -------------------------------------------------------------------------------------
    def replace_uses(self, mapping: dict) -> None:
        """Rewrite every use of ``old`` to ``mapping[old]`` (by value identity), outputs included."""
        if not mapping:
            return

        def resolve(v):
            while v in mapping:
                v = mapping[v]
            return v

        for node in self.nodes:
            node.replace_inputs(resolve)
        self.outputs = [resolve(v) for v in self.outputs]

    def users(self) -> dict:
        """Value -> number of uses (node inputs and graph outputs)."""
        count: dict = {}
        for node in self.nodes:
            for v in node.inputs():
                count[v] = count.get(v, 0) + 1
        for v in self.outputs:
            count[v] = count.get(v, 0) + 1
        return count

    # printing ------------------------------------------------------------------------------------
    def __str__(self) -> str:
        lines = ["graph("]
        for v in self.inputs:
            lines.append(f"    {v}: {v.type_str()}  # {v.label}")
        lines.append("):")
        for node in self.nodes:
            lines.append("    " + format_node(node))
        lines.append("    return " + ", ".join(str(v) for v in self.outputs))
        return "\n".join(lines)

    __repr__ = __str__


def _format_arg(a) -> str:
    if isinstance(a, Value):
        return str(a)
    if isinstance(a, list):
        return "[" + ", ".join(_format_arg(x) for x in a) + "]"
    if isinstance(a, tuple):
        return "(" + ", ".join(_format_arg(x) for x in a) + ("," if len(a) == 1 else "") + ")"
    if hasattr(a, "philox_advance"):
        return "<generator>"
    return repr(a)


def format_node(node: Node) -> str:
    outs = ", ".join(f"{v}: {v.type_str()}" for v in node.outputs)
    if node.op is CONSTANT:
        return f"{outs} = constant(shape={list(node.constant.shape)})"
    parts = [_format_arg(a) for a in node.args]
    parts += [f"{k}={_format_arg(v)}" for k, v in node.attrs.items()]
    return f"{outs} = {node.name}({', '.join(parts)})"


class VerificationError(RuntimeError):
    """The graph breaks an SSA rule (a pass bug, not a user error)."""


def verify(graph: Graph) -> None:
    """Raise :class:`VerificationError` unless every value is defined once, before its uses."""
    defined = set()
    for v in graph.inputs:
        if v in defined:
            raise VerificationError(f"input {v} is defined twice")
        defined.add(v)
    for node in graph.nodes:
        for v in node.inputs():
            if v not in defined:
                raise VerificationError(f"{format_node(node)}: uses {v} before it is defined")
        for v in node.outputs:
            if v in defined:
                raise VerificationError(f"{format_node(node)}: redefines {v}")
            if v.producer is not node:
                raise VerificationError(f"{format_node(node)}: output {v} does not name this node as producer")
            defined.add(v)
    for v in graph.outputs:
        if v not in defined:
            raise VerificationError(f"graph output {v} is never defined")
