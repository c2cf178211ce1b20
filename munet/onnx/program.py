"""An imported ONNX graph as a MuNet module: nodes run as MuNet ops, initializers are Parameters.

:class:`Program` interprets the graph node by node. Each value is a MuNet tensor (on the program's
device) or, when everything it depends on is known without tensor data (shapes, constants), a
NumPy array computed on the host: shape arithmetic (``Shape -> Gather -> Concat -> Reshape``)
never reaches the device and, under ``munet.compile``, is baked into the trace (input shapes
are guarded, so a new shape retraces). Float initializers become Parameters, so
``program.parameters()``, ``train()``, optimizers and ``munet.save(program.state_dict())`` work
as for any module; integer initializers (and float ones read only as shapes or scales) are
constants.
"""

from __future__ import annotations

import numpy as np

import munet
from munet._tensor import Tensor
from munet.compiler.trace import suspended
from munet.nn.module import Module
from munet.nn.parameter import Parameter
from munet.onnx import values as held
from munet.onnx.import_ml_ops import ML_DOMAIN, ML_RULES
from munet.onnx.import_ops import RULES, UnsupportedError

_REQUIRED = object()


class Call:
    """One node's run: its inputs (tensors, host arrays or None), attributes, opset and device."""

    def __init__(self, node, values: list, device, dtypes: dict | None = None):
        self.node = node
        self.dtypes = dtypes or {}
        self.op_type = node.op_type
        self.opset = node.opset
        self.device = device
        self._values = values
        self.n_inputs = len(node.input)
        self.n_outputs = len(node.output)
        self.scope = ({}, {})  # (enclosing values, declared dtypes), for subgraphs

    def run_subgraph(self, graph: Subgraph, inputs: list = ()) -> list:
        """The outputs of ``graph`` on ``inputs`` (bound to its input names); it may read the values
        enclosing this node."""
        env, dtypes = self.scope
        inner = {**env, **graph.constants, **dict(zip(graph.inputs, inputs))}
        run_nodes(graph.nodes, inner, self.device, dtypes)
        return [inner[name] for name in graph.outputs]

    def has(self, i: int) -> bool:
        return i < len(self._values) and self._values[i] is not None

    def value(self, i: int):
        """Input ``i`` as it is held: a tensor, a host array, a list (a sequence) or None."""
        return self._values[i] if i < len(self._values) else None

    def unsigned(self, i: int) -> int:
        """How many bits input ``i`` has when its ONNX type is uint16/32/64 (held signed, values.py), else 0."""
        kind = self.dtypes.get(self.node.input[i]) if i < len(self.node.input) else None
        return kind.bits if isinstance(kind, held.Unsigned) else 0

    def input_kind(self, i: int):
        """The declared (held) type of input ``i``, None when unknown."""
        kind = self.dtypes.get(self.node.input[i]) if i < len(self.node.input) else None
        return None if kind is ... else kind

    def delegate(self, op_type: str, values: list, attrs: dict, opset: int | None = None):
        """The outputs of operator ``op_type`` (its rule) on ``values`` with ``attrs``: an operator
        defined as another with set attributes (Upsample as Resize)."""
        node = ImportedNode(
            op_type, "", self.node.name, [""] * len(values), self.node.output, attrs, opset or self.opset
        )
        call = Call(node, values, self.device, {})
        call.scope = self.scope
        return RULES[op_type](call)

    def output_kind(self, i: int = 0):
        """The declared (held) type of output ``i``, None when unknown."""
        kind = self.dtypes.get(self.node.output[i]) if i < len(self.node.output) else None
        return None if kind is ... else kind

    def input(self, i: int):
        """Input ``i`` as a MuNet tensor on the program's device (None if absent)."""
        if not self.has(i):
            return None
        v = self._values[i]
        if held.is_string(v) or isinstance(v, list):
            raise self.unsupported("a string or sequence input " + repr(self.node.input[i]))
        if isinstance(v, np.ndarray):
            return munet.from_numpy(np.array(v)).to(self.device)
        return v

    def host(self, i: int) -> np.ndarray | None:
        """Input ``i`` as a NumPy array (reading a tensor's values on the host when it is one)."""
        if not self.has(i):
            return None
        v = self._values[i]
        return v if isinstance(v, np.ndarray) else v.detach().cpu().numpy()

    def scalar(self, i: int):
        """Input ``i``, a one-element tensor, as a Python number (read on the host)."""
        return np.asarray(self.host(i)).reshape(-1)[0].item()

    def shape(self, i: int) -> tuple:
        return tuple(self._values[i].shape)

    def attr(self, name: str, default=_REQUIRED):
        value = self.node.attrs.get(name, default)
        if value is _REQUIRED:
            raise self.unsupported(f"a node without its required attribute '{name}'")
        return value

    def dtype_attr(self, name: str):
        """The element type attribute ``name`` as a MuNet dtype or an unsigned type (values.py)."""
        from munet.onnx._deps import require_onnx

        code = self.attr(name)
        dtype = held.element_type(require_onnx(), code)
        if dtype is None or dtype is held.STRING:
            raise self.unsupported(f"element type {code} ({_type_name(code)})")
        return dtype

    def unsupported(self, what: str) -> UnsupportedError:
        return UnsupportedError(
            f"munet.onnx: node {self.node.name!r}: operator {self.op_type} (domain {self.node.domain or 'ai.onnx'!r}, "
            f"opset {self.opset}): {what} is not supported"
        )


def _type_name(code: int) -> str:
    from munet.onnx._deps import require_onnx

    return require_onnx().TensorProto.DataType.Name(code)


class ImportedNode:
    """A graph node with its attributes decoded to Python values (tensors as NumPy arrays)."""

    __slots__ = ("op_type", "domain", "name", "input", "output", "attrs", "opset")

    def __init__(self, op_type, domain, name, inputs, outputs, attrs, opset: int):
        self.op_type, self.domain, self.name = op_type, domain, name
        self.input, self.output, self.attrs = list(inputs), list(outputs), dict(attrs)
        self.opset = opset  # the default-domain opset the node was written for (a function body's own)


class Subgraph:
    """A graph attribute (an If branch, a Loop or Scan body): its input names, decoded nodes,
    constants, and the names of its outputs."""

    def __init__(self, inputs: list, nodes: list, constants: dict, outputs: list):
        self.inputs, self.nodes, self.constants, self.outputs = inputs, nodes, constants, outputs


# Never run on the host even with host inputs: random, data-dependent, or reading outer values
NOT_ON_HOST = {"Dropout", "NonZero", "If", "Loop", "Scan", "SequenceMap"}


def run_node(node: ImportedNode, values: list, device, dtypes: dict, env: dict | None = None) -> list:
    """Outputs of ``node`` on ``values``: on the host (NumPy results) when every input is a host array."""
    on_host = all(v is None or isinstance(v, np.ndarray) for v in values) and node.op_type not in NOT_ON_HOST
    rules = ML_RULES if node.domain == ML_DOMAIN else RULES
    if on_host:
        with suspended():  # shape arithmetic: eager even inside munet.compile's trace
            outputs = _outputs(rules[node.op_type](Call(node, values, "cpu", dtypes)))
        outputs = [o.detach().numpy() if isinstance(o, Tensor) else o for o in outputs]
    else:
        call = Call(node, values, device, dtypes)
        call.scope = (env, dtypes)
        outputs = _outputs(rules[node.op_type](call))
    return [_as_declared(o, dtypes.get(name)) for o, name in zip(outputs, node.output)]


def run_nodes(nodes: list, env: dict, device, dtypes: dict) -> None:
    """Run ``nodes`` in order, reading and writing values by name in ``env``."""
    for node in nodes:
        values = [env[name] if name else None for name in node.input]
        for name, value in zip(node.output, run_node(node, values, device, dtypes, env)):
            if name:
                env[name] = value


def _outputs(result) -> list:
    """A rule's outputs: a list or tuple holds several (a Sequence is one sequence value)."""
    return list(result) if isinstance(result, (list, tuple)) and not isinstance(result, held.Sequence) else [result]


def _as_declared(value, dtype):
    """``value`` in its declared ONNX type (MuNet promotes some integer results to int64)."""
    if dtype is None or value is None:
        return value
    if not isinstance(dtype, munet.dtype):
        return held.as_held(value, dtype)
    if isinstance(value, list):
        return value
    if isinstance(value, np.ndarray) or np.isscalar(value):
        value = np.asarray(value)
        return value if value.dtype == dtype.np else value.astype(dtype.np)
    return value if value.dtype is dtype else value.to(dtype)


class Program(Module):
    """An ONNX graph run with MuNet ops. Call it with tensors or NumPy arrays, by position or by input
    name (keywords, or one dict); it returns one tensor, or a tuple when the graph has several outputs."""

    def __init__(self, graph, device):
        super().__init__()
        self.input_names = list(graph.inputs)
        self.output_names = list(graph.outputs)
        self.opset = graph.opset
        self.optimizations = list(graph.optimizations)
        self._nodes = graph.nodes
        self._dtypes = graph.dtypes
        self._constants = dict(graph.constants)
        self._parameter_keys = {}  # ONNX initializer name -> parameter name
        for name, array in graph.parameters.items():
            key = _parameter_key(name, self._parameters)
            self.register_parameter(key, Parameter(munet.from_numpy(np.array(array))))
            self._parameter_keys[name] = key
        self._device = munet.device(device)
        self.to(self._device)

    def to(self, *args, **kwargs):
        module = super().to(*args, **kwargs)
        for p in self._parameters.values():
            self._device = p.device
            break
        else:
            device = next((a for a in args if isinstance(a, (str, munet.device))), kwargs.get("device"))
            if device is not None:
                self._device = munet.device(device)
        return module

    def forward(self, *args, **kwargs):
        env = dict(self._constants)
        for name, key in self._parameter_keys.items():
            env[name] = self._parameters[key]
        env.update(self._bind_inputs(args, kwargs))
        run_nodes(self._nodes, env, self._device, self._dtypes)
        outputs = [self._as_tensor(env[name], name) for name in self.output_names]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _bind_inputs(self, args, kwargs) -> dict:
        if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            args, kwargs = (), args[0]
        if len(args) > len(self.input_names):
            raise TypeError(
                f"munet.onnx program: expected at most {len(self.input_names)} inputs {self.input_names}, got {len(args)}"
            )
        bound = dict(zip(self.input_names, args))
        for name, value in kwargs.items():
            if name not in self.input_names:
                raise TypeError(f"munet.onnx program: no input named {name!r}; inputs are {self.input_names}")
            if name in bound:
                raise TypeError(f"munet.onnx program: input {name!r} given twice")
            bound[name] = value
        missing = [n for n in self.input_names if n not in bound]
        if missing:
            raise TypeError(f"munet.onnx program: missing inputs {missing}")
        return {name: self._input_tensor(name, value) for name, value in bound.items()}

    def _input_tensor(self, name: str, value, dtype=_REQUIRED):
        dtype = self._dtypes.get(name) if dtype is _REQUIRED else dtype
        if dtype is ...:
            dtype = None
        if isinstance(dtype, held.HostKind) or isinstance(dtype, held.Unsigned):
            return self._held_input(name, value, dtype)
        if isinstance(value, np.ndarray) or np.isscalar(value):
            value = munet.from_numpy(np.array(value))
        if not isinstance(value, Tensor):
            raise TypeError(
                f"munet.onnx program: input {name!r} must be a tensor or NumPy array, got {type(value).__name__}"
            )
        if dtype is not None and value.dtype is not dtype:
            raise TypeError(f"munet.onnx program: input {name!r} must be {dtype}, got {value.dtype}")
        return value.to(self._device)

    def _held_input(self, name: str, value, kind):
        if isinstance(kind, held.Unsigned):
            if isinstance(value, np.ndarray) or np.isscalar(value):
                value = np.asarray(value)
                if value.dtype not in (kind.np, kind.storage.np):
                    raise TypeError(f"munet.onnx program: input {name!r} must be {kind.name}, got {value.dtype}")
                value = munet.from_numpy(np.array(kind.held(value)))
            return self._input_tensor(name, value, kind.storage)
        if kind is held.STRING:
            array = np.asarray(value, dtype=object)
            if not all(isinstance(v, str) for v in array.reshape(-1)):
                raise TypeError(f"munet.onnx program: input {name!r} must hold strings")
            return array
        if kind.kind == "optional":
            return None if value is None else self._input_tensor(name, value, kind.element)
        if not isinstance(value, (list, tuple)):
            raise TypeError(
                f"munet.onnx program: input {name!r} must be a sequence (a list), got {type(value).__name__}"
            )
        return held.Sequence(self._input_tensor(name, v, kind.element) for v in value)

    def to_numpy(self, outputs) -> tuple:
        """Outputs of this program as NumPy, in their declared ONNX types: uint16/32/64 (held signed
        while the program runs) as NumPy's unsigned types, strings as object arrays, sequences as
        lists, an empty optional as None."""
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return tuple(held.to_numpy(o, self._dtypes.get(n)) for o, n in zip(outputs, self.output_names))

    def _as_tensor(self, value, name):
        if value is None or held.is_string(value):
            return value
        if isinstance(value, list):
            return held.Sequence(self._as_tensor(v, None) for v in value)
        if isinstance(value, np.ndarray):
            value = munet.from_numpy(np.array(value)).to(self._device)
        return _as_declared(value, self._dtypes.get(name))


def _parameter_key(name: str, taken) -> str:
    """A module attribute name for an ONNX initializer name (which may hold '.', '/', ':')."""
    key = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "initializer"
    if key[0].isdigit():
        key = "_" + key
    base, k = key, 1
    while key in taken:
        key, k = f"{base}_{k}", k + 1
    return key
