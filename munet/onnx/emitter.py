"""Builds the nodes and initializers of an ONNX graph for the exporter's op rules.

An op rule (``export_ops.py``) asks the :class:`Emitter` for the ONNX name of a MuNet value
(``e.input(v)``, cast to a dtype with ``e.input(v, dtype)``), for a constant (``e.const``) and
appends nodes with ``e.op("Add", a, b)``, which returns the new output name (a list when
``outputs > 1``).
"""

from __future__ import annotations

import numpy as np

from munet.compiler.ir import Value
from munet.onnx._deps import require_onnx, tensor_type


class ExportError(RuntimeError):
    """A MuNet op (or an argument of one) that cannot be written as ONNX."""


class Emitter:
    def __init__(self, opset: int, twins: dict | None = None):
        self.onnx = require_onnx()
        self.opset = opset
        self._twins = twins or {}  # node -> the same node in the second trace of a dynamic-axes export
        self.nodes: list = []
        self.initializers: list = []
        self.names: dict = {}  # Value -> ONNX name
        self.constants: dict = {}  # Value -> NumPy array, for values computed at export (written when used)
        self._count = 0
        self._consts: dict = {}

    def twin(self, node):
        """``node`` in the trace with the dynamic axes resized, or None for a static export."""
        return self._twins.get(node)

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def bind(self, value: Value, name: str) -> None:
        self.names[value] = name

    def input(self, v, dtype=None) -> str:
        """The ONNX name of ``v`` (a Value or a Python number), cast to ``dtype`` when given."""
        if not isinstance(v, Value):
            if dtype is None:
                raise ExportError(f"a constant operand {v!r} needs a dtype")
            return self.const(np.asarray(v, dtype=dtype.np))
        if v.kind == "scalar":
            raise ExportError("a symbolic host scalar (an optimizer hyperparameter) has no ONNX form")
        name = self.names.get(v)
        if name is None and v in self.constants:
            name = self.names[v] = self.const(self.constants[v])
        if name is None:
            raise ExportError(f"value %{v.id} is used before it is defined (its producer did not export)")
        if dtype is not None and v.dtype is not dtype:
            return self.cast(name, dtype)
        return name

    def cast(self, name: str, dtype) -> str:
        return self.op("Cast", name, to=tensor_type(dtype))

    def const(self, array, hint: str = "const") -> str:
        """A constant's name (small ones are shared)."""
        array = np.asarray(array)
        key = (array.dtype.str, array.shape, array.tobytes())
        if array.size <= 16 and key in self._consts:
            return self._consts[key]
        name = self.fresh(hint)
        # a Constant node, not an initializer: initializers are the model's state (importers train them)
        self.nodes.append(self.onnx.helper.make_node("Constant", [], [name], value=self.tensor(array, name)))
        if array.size <= 16:
            self._consts[key] = name
        return name

    def tensor(self, array, name: str):
        """A ``TensorProto`` of a NumPy array (bfloat16 arrays included)."""
        numpy_helper = self.onnx.numpy_helper
        array = np.asarray(array)
        if array.dtype.name == "bfloat16":
            proto = self.onnx.helper.make_tensor(
                name, self.onnx.TensorProto.BFLOAT16, array.shape, array.view(np.uint16).ravel().tolist(), raw=False
            )
            return proto
        return numpy_helper.from_array(np.ascontiguousarray(array), name)

    def ints(self, values) -> str:
        return self.const(np.asarray(list(values), dtype=np.int64), "ints")

    def op(self, op_type: str, *inputs, outputs: int = 1, **attrs):
        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(
            self.onnx.helper.make_node(op_type, [i if i is not None else "" for i in inputs], names, **attrs)
        )
        return names[0] if outputs == 1 else names

    # opset-dependent forms ---------------------------------------------------------------------------
    def reduce(self, op_type: str, x: str, axes, keepdim: bool) -> str:
        """``ReduceX`` over ``axes``: an input from opset 18 (13 for ReduceSum), an attribute before."""
        axes = list(axes)
        since = 13 if op_type == "ReduceSum" else 18
        if self.opset >= since:
            return self.op(op_type, x, self.ints(axes), keepdims=int(keepdim))
        return self.op(op_type, x, axes=axes, keepdims=int(keepdim))

    def unsqueeze(self, x: str, axes) -> str:
        return self.op("Unsqueeze", x, self.ints(axes))

    def squeeze(self, x: str, axes) -> str:
        return self.op("Squeeze", x, self.ints(axes))
