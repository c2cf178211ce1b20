"""Saving and loading compiled programs: ``munet.save(compiled, path)`` / ``munet.load(path)``.

A program file is the safetensors container of :mod:`munet.serialization` (atomic write,
SHA-256 per tensor and a header digest, so any changed byte is refused; no pickle). Its
manifest (format ``munet-program``) holds the optimized SSA graph as JSON: values with their
types; nodes with registry op names, arguments and attributes (tuples, floats, dtypes, devices
and generators tagged explicitly); which graph inputs are call arguments, state or
hyperparameters; which outputs are results and which update state; and the hyperparameter
guards. The tensors are the current state:

- ``state.<name>``: parameters and buffers (named as in the model's ``state_dict``),
  optimizer state (``optimizer.state.<param>.<key>``) and gradients (``<param>.grad``);
- ``hyper.<name>``: hyperparameter inputs as float64 scalars (``optimizer.param_groups.0.lr``);
- ``rng.<i>``: the state of each random generator the graph draws from;
- ``constant.<id>``: folded constants.

The file does not depend on the device that wrote it: values marked ``host`` live on the cpu
whatever the device (Adam's step count), the others on the device the program is loaded onto,
and ``load`` inserts the ``to_device`` copies that device needs (none on the cpu). On vulkan
the state is read back to save, and uploaded once to load; it then stays on the device.

``munet.load(path, device=...)`` rebuilds the program without the Python code that traced it,
after validating everything: op names against ``munet.ops.OPS``, attribute encodings, each
node's output types against its op's shape rule, the graph verifier, and every tensor's shape
and dtype against the graph. The result, a :class:`LoadedProgram`, is called with the tensor
arguments of the original call (in order) and runs one step, updating its own state::

    munet.save(step, "run.munet")            # step = munet.compile(train_step), called >= 2 times
    program = munet.load("run.munet")
    loss = program(x, y)                     # the tensors of step(model, opt, x, y)
    program.model_state_dict()["0.weight"]   # the trained parameters
"""

from __future__ import annotations

import operator
import threading
import time
from collections import OrderedDict

import numpy as np

from munet import _dtype as D
from munet._device import as_device
from munet._device import device as Device
from munet._tensor import Tensor
from munet.compiler.ir import CONSTANT, SCALAR_OPS, Graph, Node, ScalarOp, Value, VerificationError, verify
from munet.ops._registry import Meta
from munet.ops.convert import transfer_op
from munet.ops.random import Generator
from munet.serialization import PROGRAM_FORMAT, CheckpointError, write_file

__all__ = ["LoadedProgram", "is_program", "load_program", "save_program"]

PROGRAM_VERSION = 2  # 2: host placement marks and to_device nodes (version 1 files still load)

_COMPARISONS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt}
_COMPARISONS["ge"] = operator.ge
_COMPARISON_NAMES = {fn: name for name, fn in _COMPARISONS.items()}


def is_program(obj) -> bool:
    """Whether ``munet.save`` should write ``obj`` as a compiled program."""
    from munet.compiler.compiled import CompiledFunction

    return isinstance(obj, (CompiledFunction, LoadedProgram))


# encoding ----------------------------------------------------------------------------------------


def _encode(x, generator_index, program_device=None):
    """A JSON form of an argument or attribute; tuples, floats, dtypes, devices, generators tagged.

    A device equal to the program's is written as ``"program"`` (it becomes the device the
    program is loaded onto), any other by name.
    """
    if isinstance(x, Value):
        return {"value": x.id}
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return {"float": float(x).hex()}
    if isinstance(x, tuple):
        return {"tuple": [_encode(v, generator_index, program_device) for v in x]}
    if isinstance(x, list):
        return {"list": [_encode(v, generator_index, program_device) for v in x]}
    if isinstance(x, D.dtype):
        return {"dtype": x.name}
    if isinstance(x, Device):
        return {"device": "program" if program_device is not None and x == program_device else str(x)}
    if isinstance(x, Generator):
        return {"generator": generator_index(x)}
    raise TypeError(f"munet.save: cannot save a compiled program holding a {type(x).__name__} ({x!r}) in its graph")


class _Decoder:
    """Turns the JSON forms back into Python objects, raising ``CheckpointError`` on anything unexpected."""

    def __init__(self, path, values: dict, generators: list, device=None):
        self.path = path
        self.values = values
        self.generators = generators
        self.device = device  # what "program" devices become

    def fail(self, where: str, message: str):
        raise CheckpointError(f"munet.load: {self.path}: {where}: {message}")

    def decode(self, x, where: str):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return x
        if not isinstance(x, dict) or len(x) != 1:
            self.fail(where, f"malformed value {x!r} (expected null, a bool, an int, a string or a tagged object)")
        ((tag, body),) = x.items()
        if tag == "value":
            if type(body) is not int or body not in self.values:
                self.fail(where, f"refers to value %{body}, which the graph does not define")
            return self.values[body]
        if tag == "float":
            try:
                return float.fromhex(body)
            except (TypeError, ValueError):
                self.fail(where, f"malformed float {body!r}")
        if tag in ("tuple", "list"):
            if not isinstance(body, list):
                self.fail(where, f"malformed {tag} {body!r}")
            items = [self.decode(v, where) for v in body]
            return tuple(items) if tag == "tuple" else items
        if tag == "dtype":
            return self.dtype(body, where)
        if tag == "device":
            if body == "program" and self.device is not None:
                return self.device
            try:
                return as_device(body)
            except Exception as exc:  # noqa: BLE001 - any failure is a bad file
                self.fail(where, f"invalid device {body!r} ({exc})")
        if tag == "generator":
            if type(body) is not int or not 0 <= body < len(self.generators):
                self.fail(where, f"refers to generator {body!r}; the file has {len(self.generators)}")
            return self.generators[body]
        self.fail(where, f"unknown tag {tag!r} in {x!r}")

    def dtype(self, name, where: str):
        try:
            return D._by_name(name)
        except (KeyError, TypeError):
            self.fail(where, f"unknown dtype {name!r}")


# the program description ---------------------------------------------------------------------------


class _Program:
    """Everything a saved program holds, in the same form whether extracted or loaded.

    ``roles[i]`` says where graph input ``i`` comes from: ``("arg", position)``,
    ``("state", name)`` or ``("hyper", name)``. ``state_outputs`` lists ``(output index, name)``
    pairs written into state after a run, ``cleared`` the state names set to None (gradients
    dropped by ``zero_grad``). ``results`` holds, per result leaf, an output index or
    ``("const", value)``; ``tree`` is the structure of the result (see ``_structure``).
    """

    def __init__(self):
        self.graph: Graph | None = None
        self.roles: list = []
        self.state: OrderedDict = OrderedDict()  # name -> NumPy array (host memory, as in the file)
        self.state_dtypes: dict = {}  # name -> munet dtype
        self.state_kinds: dict = {}  # name -> parameter / buffer / optimizer / grad / tensor
        self.hyper: OrderedDict = OrderedDict()  # name -> float
        self.generators: list = []  # (name, Generator)
        self.state_outputs: list = []
        self.cleared: list = []
        self.results: list = []
        self.tree = None
        self.guards: list = []  # (scalar Value, comparison, other, outcome)
        self.device = None
        self.host: set = set()  # ids of the tensor values that live on the host cpu whatever the device
        self.fuse = False  # fuse elementwise chains when lowering (the file holds the unfused graph)


def _extract(compiled) -> _Program:
    """The most recently used specialization of a ``CompiledFunction`` with its current state."""
    from munet.compiler.compiled import _hyper_fetcher

    spec = compiled._last
    if spec is None:
        raise RuntimeError("munet.save: the compiled function has not been called yet; nothing is traced to save")
    if any(target[0] == "item" for target, _ in spec.bindings):
        raise RuntimeError(
            "munet.save: the last compiled call created optimizer state (the first optimizer step), so its graph "
            "is not the steady training step; call the compiled step once more before saving"
        )
    written = sorted(
        {target[1] for target, _ in spec.bindings if target[0] == "arg_grad"}
        | {v.source[1] for v in spec.graph.inputs if isinstance(v.source, tuple) and v.source[0] == "arg_grad"}
    )
    if written:
        raise RuntimeError(
            f"munet.save: the compiled step writes the .grad of tensor argument(s) {written} (leaves that require "
            "grad); a saved program takes plain arguments: pass them detached, or return the gradients instead"
        )
    names = _StateNames(compiled)
    prog = _Program()
    graph = spec.graph
    prog.graph = graph
    prog.device = spec.backend.device
    for v in graph.inputs:
        src = v.source
        if isinstance(src, Tensor):
            name = names.of_storage(src)
            prog.roles.append(("state", name))
            prog.state[name] = _host_array(src)
            prog.state_dtypes[name] = v.dtype
        elif isinstance(src, tuple) and src[0] == "arg":
            prog.roles.append(("arg", src[1]))
        else:
            name = names.of_hyper(*src)
            prog.roles.append(("hyper", name))
            prog.hyper[name] = _hyper_fetcher(*src)(None)
    n = spec.n_results
    for j, t in enumerate(spec.state_writes):
        prog.state_outputs.append((n + j, names.of_storage(t)))
    for target, index in spec.bindings:
        leaf = target[1]
        name = names.of_grad(leaf)
        if index is None:
            prog.cleared.append(name)
            continue
        prog.state_outputs.append((index, name))
        if leaf.grad is not None and name not in prog.state:
            prog.state[name] = _host_array(leaf.grad)
        prog.state_dtypes[name] = graph.outputs[index].dtype
    prog.state_kinds = {name: names.kinds.get(name, "tensor") for name in prog.state_dtypes}
    for name in prog.cleared:
        prog.state_kinds.setdefault(name, "grad")
    prog.results = list(spec.out_template)
    prog.tree = _structure(spec.out_rebuild, len(spec.out_template))
    prog.guards = list(spec.guards)
    prog.fuse = bool(getattr(spec, "fuse", False)) and compiled.optimize
    generators = []
    for node in _registry_nodes(graph):
        for v in node.attrs.values():
            if isinstance(v, Generator) and all(g is not v for g in generators):
                generators.append(v)
    prog.generators = [(f"rng.{i}", g) for i, g in enumerate(generators)]
    prog.host = _host_values(graph, prog)
    return prog


def _host_array(t: Tensor) -> np.ndarray:
    """A tensor's data in host memory (read back from the device once, at save time)."""
    return t._data if t.device.type == "cpu" else t.detach().cpu().numpy()


def _host_values(graph: Graph, prog: _Program) -> set:
    """Ids of the tensor values that live on the host cpu whatever device the program runs on.

    On a non-cpu device that is where the trace put them (Adam's step count is a cpu tensor, as
    in PyTorch, and what is computed from it). A cpu trace cannot tell, so the step counts
    (optimizer state ``*.step``), float64 state and float64 results (a GradScaler's scale and
    its update) are the host values, with what is computed from them and from nothing on the
    device; constants and other values computed from neither go to the host when
    a host node reads them. ``munet.load`` onto a device inserts the ``to_device`` copies.
    """
    values = list(graph.inputs) + [v for node in _registry_nodes(graph) for v in node.outputs]
    tensors = [v for v in values if v.kind == "tensor"]
    if prog.device.type != "cpu":
        others = {str(v.device) for v in tensors if as_device(v.device) not in (prog.device, as_device("cpu"))}
        if others:
            raise RuntimeError(
                f"munet.save: the compiled program on '{prog.device}' holds values on {sorted(others)}; a saved "
                "program runs on one device plus the host cpu. Move those tensors to the program's device."
            )
        return {v.id for v in tensors if as_device(v.device).type == "cpu"}
    others = {str(v.device) for v in tensors if as_device(v.device).type != "cpu"}
    if others:
        raise RuntimeError(
            f"munet.save: the compiled program on 'cpu' holds values on {sorted(others)} (a .to(device) inside the "
            "step); a saved program runs on one device plus the host cpu. Compile the step on that device instead."
        )
    return _infer_host(graph, prog)


def _infer_host(graph: Graph, prog: _Program) -> set:
    """See :func:`_host_values`: the host values of a graph traced on the cpu."""
    place = {}  # Value -> "host" | "device" | None (computed from neither)
    for v, (kind, key) in zip(graph.inputs, prog.roles):
        if v.kind == "tensor":
            step = kind == "state" and prog.state_kinds.get(key) == "optimizer" and key.endswith(".step")
            wide = kind == "state" and v.dtype is D.float64  # a GradScaler's scale: no float64 on vulkan
            place[v] = "host" if step or wide else "device"
    nodes = list(_registry_nodes(graph))
    for node in nodes:
        found = {place.get(a) for a in node.inputs() if a.kind == "tensor"}
        if any(v.kind == "tensor" and v.dtype is D.float64 for v in node.outputs):
            where = "host"  # float64 arithmetic (GradScaler's scale update): vulkan has no float64
        else:
            where = "device" if "device" in found else "host" if "host" in found else None
        for v in node.outputs:
            place[v] = where
    inputs = {key: v for v, (kind, key) in zip(graph.inputs, prog.roles) if kind == "state"}
    for index, name in prog.state_outputs:  # an update is computed where its state lives
        v, state = graph.outputs[index], inputs.get(name)
        if state is not None and v.producer is not None and place[v] != place[state]:
            for out in v.producer.outputs:
                place[out] = place[state]
    readers: dict = {}
    for node in nodes:
        for a in node.inputs():
            readers.setdefault(a, []).append(node)
    for node in reversed(nodes):  # readers come later, so they are decided already
        free = [v for v in node.outputs if place[v] is None]
        for v in free:
            host = any(place[r.outputs[0]] == "host" for r in readers.get(v, []) if r.outputs)
            place[v] = "host" if host and v not in graph.outputs else "device"
    return {v.id for v, where in place.items() if where == "host" and v.kind == "tensor"}


class _StateNames:
    """Names for the real tensors a trace met: model ``state_dict`` names, optimizer paths, or ``tensor.<k>``."""

    def __init__(self, compiled):
        self.by_storage: dict = {}
        self.by_param: dict = {}
        self.kinds: dict = {}
        self._opt_prefix: dict = {}
        self._fallback = 0
        modules = list(compiled._modules)
        children = {id(c) for m in modules for c in m.children()}
        roots = [m for m in modules if id(m) not in children]
        for j, root in enumerate(roots):
            prefix = "" if len(roots) == 1 else f"module{j}."
            for name, p in root.named_parameters(prefix=prefix.rstrip(".")):
                self._add(p, name, "parameter")
                self.by_param.setdefault(id(p), name)
                if p.grad is not None:
                    self._add(p.grad, name + ".grad", "grad")
            for name, b in root.named_buffers(prefix=prefix.rstrip(".")):
                self._add(b, name, "buffer")
        optimizers = list(compiled._optimizers)
        for i, opt in enumerate(optimizers):
            prefix = "optimizer" if len(optimizers) == 1 else f"optimizer{i}"
            self._opt_prefix[id(opt)] = prefix
            for g, group in enumerate(opt.param_groups):
                for k, p in enumerate(group["params"]):
                    pname = self.by_param.setdefault(id(p), f"{prefix}.param_groups.{g}.params.{k}")
                    self._add(p, pname, "parameter")
                    for key, v in opt.state.get(p, {}).items():
                        if isinstance(v, Tensor):
                            self._add(v, f"{prefix}.state.{pname}.{key}", "optimizer")

    def _add(self, t: Tensor, name: str, kind: str) -> None:
        if id(t._storage) not in self.by_storage:
            self.by_storage[id(t._storage)] = name
            self.kinds[name] = kind

    def of_storage(self, t: Tensor) -> str:
        name = self.by_storage.get(id(t._storage))
        if name is None:
            name = f"tensor.{self._fallback}"
            self._fallback += 1
            self._add(t, name, "tensor")
        return name

    def of_grad(self, leaf: Tensor) -> str:
        name = self.by_param.get(id(leaf))
        if name is None:
            name = self.of_storage(leaf)
        self.kinds[name + ".grad"] = "grad"
        return name + ".grad"

    def of_hyper(self, opt, g: int, key: str, index) -> str:
        prefix = self._opt_prefix.get(id(opt), "optimizer")
        return f"{prefix}.param_groups.{g}.{key}" + ("" if index is None else f".{index}")


class _Leaf:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _structure(rebuild, n: int):
    """The result's nesting (lists, tuples, dicts) as JSON, with ``{"leaf": i}`` for each leaf."""
    built = rebuild([_Leaf(i) for i in range(n)])

    def walk(x):
        if isinstance(x, _Leaf):
            return {"leaf": x.index}
        if isinstance(x, (list, tuple)):
            return {"list" if isinstance(x, list) else "tuple": [walk(v) for v in x]}
        if isinstance(x, dict):
            for k in x:
                if not isinstance(k, (str, int, float, bool)) and k is not None:
                    raise TypeError(f"munet.save: result dict keys must be str, int, float, bool or None, got {k!r}")
            return {"dict": [[_encode(k, None), walk(v)] for k, v in x.items()]}
        raise TypeError(f"munet.save: unexpected {type(x).__name__} in the compiled function's result")

    return walk(built)


def _rebuild(tree, leaves: list):
    if "leaf" in tree:
        return leaves[tree["leaf"]]
    if "list" in tree:
        return [_rebuild(v, leaves) for v in tree["list"]]
    if "tuple" in tree:
        return tuple(_rebuild(v, leaves) for v in tree["tuple"])
    return {k: _rebuild(v, leaves) for k, v in tree["dict"]}


# saving ----------------------------------------------------------------------------------------------


def save_program(obj, f, *, metadata: dict | None = None) -> None:
    """Write a compiled step (its last specialization) or a loaded program to ``f``; see the module doc."""
    prog = obj._host_program() if isinstance(obj, LoadedProgram) else _extract(obj)
    manifest, entries = _encode_program(prog)
    write_file(f, entries, manifest, metadata)


def _encode_program(prog: _Program) -> tuple[dict, list]:
    from munet.serialization import FORMAT_VERSION

    graph = prog.graph
    generator_ids = {id(g): i for i, (_, g) in enumerate(prog.generators)}

    def generator_index(g):
        return generator_ids[id(g)]

    entries = []
    values = []
    nodes = []
    seen = set()

    def add_value(v: Value):
        if v.id in seen:
            return
        seen.add(v.id)
        shape = None if v.shape is None else [int(s) for s in v.shape]
        entry = {"id": v.id, "kind": v.kind, "shape": shape, "dtype": None if v.dtype is None else v.dtype.name}
        if v.id in prog.host:
            entry["host"] = True
        values.append(entry)

    for v in graph.inputs:
        add_value(v)
    for node in _registry_nodes(graph):
        for v in node.outputs:
            add_value(v)
        transfer = node.op is transfer_op  # its source device is its argument's: no attributes
        # a device attribute of a node on the program's device follows the program; on the host it stays cpu
        device = None if node.outputs and node.outputs[0].id in prog.host else prog.device
        record = {
            "op": _op_name(node.op),
            "args": [_encode(a, generator_index, device) for a in node.args],
            "attrs": {} if transfer else {k: _encode(v, generator_index, device) for k, v in node.attrs.items()},
            "outputs": [v.id for v in node.outputs],
        }
        if node.op is CONSTANT:
            name = f"constant.{node.outputs[0].id}"
            record["constant"] = name
            value = node.outputs[0]
            array = _constant_array(node.constant, value)
            entries.append((name, value.dtype, value.shape, _bytes(array)))
        nodes.append(record)
    for name, array in prog.state.items():
        entries.append((f"state.{name}", prog.state_dtypes[name], tuple(array.shape), _bytes(array)))
    for name, number in prog.hyper.items():
        entries.append((f"hyper.{name}", D.float64, (), np.float64(number).tobytes()))
    for name, g in prog.generators:
        state = g.get_state().numpy()
        entries.append((name, D.uint8, tuple(state.shape), _bytes(state)))
    manifest = {
        "format": PROGRAM_FORMAT,
        "version": FORMAT_VERSION,
        "program_version": PROGRAM_VERSION,
        "device": str(prog.device),  # where it was saved from (information only: it loads on any device)
        "fuse": prog.fuse,
        "graph": {
            "values": values,
            "inputs": [v.id for v in graph.inputs],
            "nodes": nodes,
            "outputs": [v.id for v in graph.outputs],
        },
        "roles": [list(r) for r in prog.roles],
        "state": [
            {"name": name, "kind": prog.state_kinds.get(name, "tensor"), "dtype": prog.state_dtypes[name].name}
            for name in prog.state_dtypes
        ],
        "state_outputs": [[index, name] for index, name in prog.state_outputs],
        "cleared": list(prog.cleared),
        "generators": [{"name": name} for name, _ in prog.generators],
        "results": [r if isinstance(r, int) else {"const": _encode(r[1], None)} for r in prog.results],
        "tree": prog.tree,
        "guards": [
            {
                "scalar": _scalar_expression(value, graph),
                "compare": _COMPARISON_NAMES[fn],
                "other": _encode(other, None),
                "outcome": bool(outcome),
            }
            for value, fn, other, outcome in prog.guards
        ],
    }
    return manifest, entries


def _registry_nodes(graph: Graph):
    """The graph's nodes with every ``fused`` node replaced by its members (registry ops only).

    Fusion is a lowering decision: the file keeps the unfused graph and ``load`` fuses again.
    """
    for node in graph.nodes:
        group = node.attrs.get("group") if node.name == "fused" else None
        if group is not None and hasattr(group, "members"):
            yield from group.members
        else:
            yield node


def _op_name(op) -> str:
    if op is CONSTANT:
        return "constant"
    if isinstance(op, ScalarOp):
        return "scalar." + op.name
    return op.name


def _constant_array(constant, value: Value) -> np.ndarray:
    """A folded constant in host memory with its value's dtype (a device graph may hold it on the device)."""
    from munet._device import get_backend

    if not isinstance(constant, np.ndarray) and hasattr(constant, "buffer"):  # a VkView
        constant = get_backend(as_device(value.device)).to_numpy(constant)
    return np.asarray(constant, dtype=value.dtype.np).reshape(value.shape)


def _bytes(array) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def _scalar_expression(value: Value, graph: Graph):
    """A guard's scalar as an expression tree over hyperparameter inputs (its nodes may be gone from the graph)."""
    if isinstance(value, _GuardScalar):
        return value.expression
    if not isinstance(value, Value):
        return _encode(value, None)
    if value.producer is None:
        if value not in graph.inputs:
            raise RuntimeError(f"munet.save: guard on {value}, which is not a graph input")
        return {"input": value.id}
    node = value.producer
    return {"op": node.op.name, "args": [_scalar_expression(a, graph) for a in node.args]}


# loading ---------------------------------------------------------------------------------------------


def load_program(path, manifest: dict, arrays: dict, device) -> LoadedProgram:
    """Build a :class:`LoadedProgram` from a validated container (``munet.load`` calls this).

    ``path`` names the file in errors. A graph that passes every check but that the executor
    still cannot compile (a forged file the op rules accept) is a ``CheckpointError`` too.
    """
    prog = _decode_program(path, manifest, arrays, as_device(device))
    try:
        return LoadedProgram(prog)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(
            f"munet.load: {path}: the program's graph cannot be compiled ({type(exc).__name__}: {exc})"
        ) from exc


def _fail(path, message: str):
    raise CheckpointError(f"munet.load: {path}: {message}")


def _field(path, mapping, key, kind):
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if not isinstance(value, kind):
        _fail(path, f"program manifest field {key!r} is missing or malformed")
    return value


def _decode_program(path, manifest: dict, arrays: dict, device) -> _Program:
    version = manifest.get("program_version")
    if type(version) is not int or version < 1:
        _fail(path, f"program manifest has no valid program_version ({version!r})")
    if version > PROGRAM_VERSION:
        _fail(path, f"program written by a newer MuNet (program version {version}); this one reads {PROGRAM_VERSION}")
    prog = _Program()
    prog.device = device
    prog.fuse = manifest.get("fuse") is True
    host = as_device("cpu")
    spec = _field(path, manifest, "graph", dict)
    generators = []
    for i, info in enumerate(_field(path, manifest, "generators", list)):
        name = info.get("name") if isinstance(info, dict) else None
        if name != f"rng.{i}" or name not in arrays:
            _fail(path, f"generator entry {i} is malformed or its state tensor is missing")
        state = arrays[name]
        if state.dtype != np.uint8 or state.shape != (16,):
            _fail(path, f"generator state '{name}' must be uint8[16], got {state.dtype}{list(state.shape)}")
        g = Generator(device)
        g.set_state(Tensor._from_numpy(np.array(state)))
        generators.append((name, g))
    prog.generators = generators
    values = {}
    decoder = _Decoder(path, values, [g for _, g in generators], device)
    for info in _field(path, spec, "values", list):
        values_id, value = _decode_value(decoder, info, device, host)
        if values_id in values:
            _fail(path, f"value %{values_id} is declared twice")
        values[values_id] = value
        if isinstance(info, dict) and info.get("host") is True:
            prog.host.add(values_id)
    graph = Graph()
    graph._next_id = max(values, default=-1) + 1
    prog.graph = graph
    for vid in _field(path, spec, "inputs", list):
        graph.inputs.append(decoder.decode({"value": vid}, "graph inputs"))
    for k, info in enumerate(_field(path, spec, "nodes", list)):
        graph.nodes.append(_decode_node(decoder, info, k, arrays))
    graph.outputs = [decoder.decode({"value": vid}, "graph outputs") for vid in _field(path, spec, "outputs", list)]
    try:
        verify(graph)
    except VerificationError as exc:
        _fail(path, f"the graph fails verification: {exc}")
    for k, node in enumerate(graph.nodes):
        _check_node_types(decoder, node, k)
    _decode_roles(path, manifest, prog, arrays)
    _decode_outputs(path, manifest, prog, decoder, arrays)
    if version == 1 and device.type != "cpu":  # written before host marks: place as a cpu trace
        prog.host = _infer_host(graph, prog)
        for v in values.values():
            if v.id in prog.host:
                v.device = host
    _place(graph)
    inputs = {key: v for v, (kind, key) in zip(graph.inputs, prog.roles) if kind == "state"}
    for index, name in prog.state_outputs:
        v, state = graph.outputs[index], inputs.get(name)
        if state is not None and as_device(v.device) != as_device(state.device):
            _fail(path, f"state '{name}' lives on {state.device} but the graph computes its update on {v.device}")
    expected = {f"state.{n}" for n in prog.state} | {f"hyper.{n}" for n in prog.hyper} | {n for n, _ in generators}
    expected |= {f"constant.{node.outputs[0].id}" for node in graph.nodes if node.op is CONSTANT}
    extra = set(arrays) - expected
    if extra:
        _fail(path, f"the file holds tensors the program does not use: {sorted(extra)[:5]}")
    return prog


def _decode_value(decoder: _Decoder, info, device, host):
    where = f"value {info.get('id') if isinstance(info, dict) else info!r}"
    keys = {"id", "kind", "shape", "dtype"}
    if not isinstance(info, dict) or not keys <= set(info) <= keys | {"host"} or type(info["id"]) is not int:
        decoder.fail(where, f"malformed value entry {info!r}")
    if info.get("host", True) is not True:
        decoder.fail(where, f"malformed host mark {info['host']!r} (true or absent)")
    kind = info["kind"]
    if kind == "scalar":
        if info["shape"] is not None or info["dtype"] is not None:
            decoder.fail(where, "a scalar value has no shape or dtype")
        return info["id"], Value(info["id"], kind="scalar")
    if kind != "tensor":
        decoder.fail(where, f"unknown value kind {kind!r}")
    shape = info["shape"]
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        decoder.fail(where, f"invalid shape {shape!r}")
    on = host if info.get("host") else device  # host values stay on the cpu (Adam's step count)
    return info["id"], Value(info["id"], tuple(shape), decoder.dtype(info["dtype"], where), on)


def _place(graph: Graph) -> None:
    """Copy values between the program's device and the host where a node reads one from the other side.

    The file's ``to_device`` nodes are dropped and the copies inserted again for the device the
    program is loaded onto: none on the cpu, host-to-device ones where a device node reads a
    host value (one per value). A graph output stays where the file put it.
    """
    alias: dict = {}
    copies: dict = {}
    nodes: list = []

    def on(v: Value, device) -> Value:
        v = alias.get(v, v)
        if v.kind != "tensor" or device is None or as_device(v.device) == as_device(device):
            return v
        key = (v, as_device(device))
        if key not in copies:
            out = Value(graph._next_id, v.shape, v.dtype, as_device(device))
            graph._next_id += 1
            node = Node(transfer_op, (v,), {"source": v.device}, [out])
            out.producer = node
            nodes.append(node)
            copies[key] = out
        return copies[key]

    for node in graph.nodes:
        if node.op is transfer_op:
            alias[node.outputs[0]] = alias.get(node.args[0], node.args[0])
            continue
        device = node.outputs[0].device if node.outputs and node.outputs[0].kind == "tensor" else None
        node.replace_inputs(lambda v, device=device: on(v, device))
        nodes.append(node)
    graph.nodes = nodes
    graph.outputs = [on(v, v.device if v.kind == "tensor" else None) for v in graph.outputs]
    verify(graph)


def _decode_node(decoder: _Decoder, info, k: int, arrays: dict) -> Node:
    from munet.ops import OPS

    where = f"node {k}"
    if not isinstance(info, dict) or not {"op", "args", "attrs", "outputs"} <= set(info) <= {
        "op",
        "args",
        "attrs",
        "outputs",
        "constant",
    }:
        decoder.fail(where, f"malformed node entry {str(info)[:200]}")
    name = info["op"]
    if name == "constant":
        op = CONSTANT
    elif name == transfer_op.name:  # not a registered op (no kernel): a copy between device and host
        op = transfer_op
    elif isinstance(name, str) and name.startswith("scalar."):
        op = SCALAR_OPS.get(name[len("scalar.") :])
    else:
        op = OPS.get(name) if isinstance(name, str) else None
    if op is None:
        decoder.fail(
            where, f"unknown op {name!r}: not in munet.ops.OPS (a newer or different MuNet, or a damaged file)"
        )
    where = f"node {k} ({name})"
    if (
        not isinstance(info["args"], list)
        or not isinstance(info["attrs"], dict)
        or not isinstance(info["outputs"], list)
    ):
        decoder.fail(where, "args must be a list, attrs an object and outputs a list")
    args = tuple(decoder.decode(a, where) for a in info["args"])
    attrs = {}
    for key, v in info["attrs"].items():
        attrs[key] = decoder.decode(v, f"{where} attribute {key!r}")
    outputs = [decoder.decode({"value": vid}, f"{where} outputs") for vid in info["outputs"]]
    if op is transfer_op and (
        len(args) != 1
        or not isinstance(args[0], Value)
        or args[0].kind != "tensor"
        or attrs
        or len(outputs) != 1
        or outputs[0].kind != "tensor"
    ):
        decoder.fail(where, "a to_device node takes one tensor value, no attributes, and has one tensor output")
    node = Node(op, args, attrs, outputs)
    for v in outputs:
        if v.producer is not None:
            decoder.fail(where, f"output {v} is already produced by another node")
        v.producer = node
    if op is CONSTANT:
        cname = info.get("constant")
        if cname != f"constant.{outputs[0].id}" or cname not in arrays or len(outputs) != 1 or args or attrs:
            decoder.fail(where, "a constant node needs one output and its tensor 'constant.<id>'")
        array = np.array(arrays[cname])
        array.flags.writeable = False  # shared by every call: no kernel may write it
        node.constant = array
    return node


def _check_node_types(decoder: _Decoder, node: Node, k: int) -> None:
    """Re-run the op's shape/dtype rule on the recorded input types; it must give the recorded outputs."""
    where = f"node {k} ({node.name})"
    if node.op is CONSTANT:
        v = node.outputs[0]
        if v.kind != "tensor" or node.constant.shape != v.shape or node.constant.dtype != v.dtype.np:
            decoder.fail(
                where,
                f"constant tensor is {node.constant.dtype}{list(node.constant.shape)}, the graph says {v.type_str()}",
            )
        return
    if isinstance(node.op, ScalarOp):
        if len(node.outputs) != 1 or node.outputs[0].kind != "scalar" or node.attrs:
            decoder.fail(where, "a scalar op has one scalar output and no attributes")
        for a in node.args:
            if isinstance(a, Value) and a.kind != "scalar" or not isinstance(a, (Value, int, float)):
                decoder.fail(where, f"a scalar op takes scalars, got {a!r}")
        return
    if any(v.kind != "tensor" for v in node.outputs):
        decoder.fail(where, "tensor ops produce tensors")
    _check_dims(decoder, node, where)
    meta = _meta_of(decoder, node, where)
    metas = meta if isinstance(meta, tuple) and not isinstance(meta, Meta) else (meta,)
    if len(metas) != len(node.outputs):
        decoder.fail(where, f"the op produces {len(metas)} outputs, the graph lists {len(node.outputs)}")
    for m, v in zip(metas, node.outputs):
        if (m.shape is not None and tuple(m.shape) != v.shape) or m.dtype is not v.dtype:
            shape = "?" if m.shape is None else list(m.shape)
            dtype = getattr(m.dtype, "name", repr(m.dtype))
            decoder.fail(where, f"the op's rule gives {dtype}{shape} for {v}, the graph says {v.type_str()}")


def _check_dims(decoder: _Decoder, node: Node, where: str) -> None:
    """A ``dims`` attribute names distinct axes of the input (all of them for ``permute``).

    Public functions validate dims before ``apply``; op shape rules trust them, so a forged
    file is checked here.
    """
    dims = node.attrs.get("dims")
    source = node.args[0] if node.args else None
    if dims is None or not isinstance(source, Value) or source.kind != "tensor":
        return
    rank = len(source.shape)
    ok = isinstance(dims, tuple) and all(type(d) is int and -max(rank, 1) <= d < max(rank, 1) for d in dims)
    normalized = [d % max(rank, 1) for d in dims] if ok else []
    ok = ok and len(set(normalized)) == len(normalized)
    if ok and node.name == "permute":
        ok = sorted(normalized) == list(range(rank))
    if not ok:
        decoder.fail(where, f"invalid arguments or attributes for this op: dims={dims!r} for an input of rank {rank}")


def _meta_of(decoder: _Decoder, node: Node, where: str):
    from munet._device import get_backend
    from munet.compiler.trace import Tracer

    tracer = Tracer()
    backend = get_backend(node.outputs[0].device)

    def stand_in(v: Value):
        return 1.0 if v.kind == "scalar" else tracer.wrap(v, backend)

    from munet.compiler.ir import map_values

    args = map_values(node.args, stand_in)
    attrs = {key: map_values(v, stand_in) for key, v in node.attrs.items()}
    try:
        return node.op.meta(*args, **attrs)
    except Exception as exc:  # noqa: BLE001 - any rejection by the op's rule is a bad file
        decoder.fail(where, f"invalid arguments or attributes for this op: {type(exc).__name__}: {exc}")


def _decode_roles(path, manifest: dict, prog: _Program, arrays: dict) -> None:
    graph = prog.graph
    roles = _field(path, manifest, "roles", list)
    if len(roles) != len(graph.inputs):
        _fail(path, f"{len(roles)} input roles for {len(graph.inputs)} graph inputs")
    kinds = {}
    dtypes = {}
    for info in _field(path, manifest, "state", list):
        if not isinstance(info, dict) or not isinstance(info.get("name"), str) or not isinstance(info.get("kind"), str):
            _fail(path, f"malformed state entry {info!r}")
        kinds[info["name"]] = info["kind"]
        dtypes[info["name"]] = _Decoder(path, {}, []).dtype(info.get("dtype"), f"state '{info['name']}'")
    positions = set()
    for v, role in zip(graph.inputs, roles):
        if not (isinstance(role, list) and len(role) == 2 and role[0] in ("arg", "state", "hyper")):
            _fail(path, f"malformed input role {role!r}")
        kind, key = role
        if kind == "arg":
            if type(key) is not int or key in positions or v.kind != "tensor":
                _fail(path, f"input {v}: malformed argument role {role!r}")
            positions.add(key)
        elif kind == "state":
            if not isinstance(key, str) or key not in dtypes or v.kind != "tensor":
                _fail(path, f"input {v}: state {key!r} is not declared")
            _take_state(path, prog, key, v, arrays, required=True)
        else:
            name = f"hyper.{key}"
            if name not in arrays or arrays[name].dtype != np.float64 or arrays[name].shape != () or v.kind != "scalar":
                _fail(path, f"input {v}: hyperparameter '{key}' needs a float64 scalar tensor '{name}'")
            prog.hyper[key] = float(arrays[name])
        prog.roles.append((kind, key))
    prog.state_dtypes = dtypes
    prog.state_kinds = kinds


def _take_state(path, prog: _Program, name: str, v: Value, arrays: dict, *, required: bool) -> None:
    key = f"state.{name}"
    if key not in arrays:
        if required:
            _fail(path, f"state '{name}' has no tensor '{key}' in the file")
        return
    array = arrays[key]
    if tuple(array.shape) != v.shape or array.dtype != v.dtype.np:
        _fail(
            path,
            f"state '{name}' is {array.dtype}{list(array.shape)} in the file but the graph uses it as {v.type_str()}",
        )
    prog.state[name] = np.array(array)  # writable, owned


def _decode_outputs(path, manifest: dict, prog: _Program, decoder: _Decoder, arrays: dict) -> None:
    graph = prog.graph
    n_outputs = len(graph.outputs)
    for item in _field(path, manifest, "state_outputs", list):
        if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is int and 0 <= item[0] < n_outputs):
            _fail(path, f"malformed state output {item!r}")
        index, name = item
        if not isinstance(name, str) or name not in prog.state_dtypes:
            _fail(path, f"state output {name!r} is not declared")
        v = graph.outputs[index]
        if v.kind != "tensor" or v.dtype is not prog.state_dtypes[name]:
            _fail(path, f"state output '{name}' is {v.type_str()}, declared {prog.state_dtypes[name].name}")
        if name in prog.state and prog.state[name].shape != v.shape:
            _fail(path, f"state '{name}' has shape {list(prog.state[name].shape)} but the graph writes {v.type_str()}")
        if name not in prog.state:
            _take_state(path, prog, name, v, arrays, required=False)
        prog.state_outputs.append((index, name))
    for name in _field(path, manifest, "cleared", list):
        if not isinstance(name, str) or name not in prog.state_dtypes:
            _fail(path, f"cleared state {name!r} is not declared")
        prog.cleared.append(name)
    results = []
    for item in _field(path, manifest, "results", list):
        if type(item) is int and 0 <= item < n_outputs:
            results.append(item)
        elif isinstance(item, dict) and set(item) == {"const"}:
            results.append(("const", decoder.decode(item["const"], "results")))
        else:
            _fail(path, f"malformed result entry {item!r}")
    prog.results = results
    prog.tree = _check_tree(path, manifest.get("tree"), len(results))
    guards = []
    for g in _field(path, manifest, "guards", list):
        compare = g.get("compare") if isinstance(g, dict) else None
        if not isinstance(compare, str) or compare not in _COMPARISONS or not isinstance(g.get("outcome"), bool):
            _fail(path, f"malformed guard {g!r}")
        scalar = _decode_expression(path, g.get("scalar"), prog)
        guards.append((scalar, _COMPARISONS[g["compare"]], decoder.decode(g.get("other"), "guard"), g["outcome"]))
    prog.guards = guards


def _check_tree(path, tree, n: int):
    def walk(x):
        if not isinstance(x, dict) or len(x) != 1:
            _fail(path, f"malformed result structure {x!r}")
        ((tag, body),) = x.items()
        if tag == "leaf":
            if type(body) is not int or not 0 <= body < n:
                _fail(path, f"result structure refers to leaf {body!r} of {n}")
        elif tag in ("list", "tuple"):
            if not isinstance(body, list):
                _fail(path, f"malformed result {tag}")
            for v in body:
                walk(v)
        elif tag == "dict":
            if not isinstance(body, list) or not all(isinstance(kv, list) and len(kv) == 2 for kv in body):
                _fail(path, "malformed result dict")
            for _, v in body:
                walk(v)
        else:
            _fail(path, f"unknown result structure tag {tag!r}")

    walk(tree)
    return tree


def _decode_expression(path, expr, prog: _Program):
    """A guard's scalar expression, as a function of the program's hyperparameters."""
    names = {v.id: key for v, (kind, key) in zip(prog.graph.inputs, prog.roles) if kind == "hyper"}
    if isinstance(expr, dict) and set(expr) == {"input"}:
        if type(expr["input"]) is not int or expr["input"] not in names:
            _fail(path, f"guard reads %{expr['input']}, which is not a hyperparameter input")
        name = names[expr["input"]]
        return _GuardScalar(expr, lambda hyper: hyper[name])
    if isinstance(expr, dict) and set(expr) == {"op", "args"}:
        op = SCALAR_OPS.get(expr["op"]) if isinstance(expr["op"], str) else None
        if op is None or not isinstance(expr["args"], list):
            _fail(path, f"guard uses unknown scalar op {expr['op']!r}")
        parts = [_decode_expression(path, a, prog) for a in expr["args"]]
        return _GuardScalar(expr, lambda hyper: op.fn(*(p(hyper) for p in parts)))
    if isinstance(expr, dict) and set(expr) == {"float"}:
        number = _Decoder(path, {}, []).decode(expr, "guard")
        return _GuardScalar(expr, lambda hyper: number)
    if isinstance(expr, int) and not isinstance(expr, bool):
        return _GuardScalar(expr, lambda hyper: expr)
    _fail(path, f"malformed guard expression {expr!r}")


class _GuardScalar:
    """A loaded guard's scalar: its JSON expression (to save again) and an evaluator over hyperparameters."""

    __slots__ = ("expression", "evaluate")

    def __init__(self, expression, evaluate):
        self.expression = expression
        self.evaluate = evaluate

    def __call__(self, hyper):
        return self.evaluate(hyper)


# running -----------------------------------------------------------------------------------------------


class LoadedProgram:
    """A compiled training step loaded from a file: call it with the tensor arguments it was saved with.

    It owns its state (parameters, buffers, optimizer state, gradients, random generators and
    hyperparameters) and updates it at every call; the state lives on the program's device
    (uploaded once when loaded, read back only by ``munet.save``), host values such as Adam's
    step counts on the cpu. ``state_dict()`` returns the tensors (live:
    they change with the next call), ``model_state_dict()`` only the module parameters and
    buffers, ``hyperparameters`` is a dict read at every call (set a new learning rate there).
    It cannot retrace: a call with another signature, or hyperparameters that change a branch
    the trace took, raises.
    """

    def __init__(self, program: _Program):
        from munet.compiler.compiled import _ownership
        from munet.compiler.executable import Executable

        self._program = program
        self.graph = program.graph
        self.device = program.device
        self.hyperparameters = program.hyper  # the same dict: edits are read at the next call
        from munet.compiler.passes.decompose import decompose_composites

        # composites the saving device kept as one node (cpu's max-pool gradient kernel) may have no
        # kernel here: a program loaded on another device, or where no C compiler exists
        decompose_composites(program.graph, fusing=program.fuse)
        if program.fuse:
            from munet.compiler.passes.fuse import fuse_elementwise

            fuse_elementwise(program.graph)
        verify(program.graph)
        # a state update may be written over its input (the memory plan decides), as in the compiled step
        state_inputs = {key: v for v, (kind, key) in zip(self.graph.inputs, program.roles) if kind == "state"}
        donors = {self.graph.outputs[i]: state_inputs[n] for i, n in program.state_outputs if n in state_inputs}
        self.executable = ex = Executable(program.graph, program.device, donors=donors)
        self.backend = ex.backend
        # each state on the target of the device the graph reads (or writes) it on; uploaded once
        self._targets, self._shapes = {}, {}  # by state name
        inputs = [(key, v) for v, (kind, key) in zip(self.graph.inputs, program.roles) if kind == "state"]
        for name, v in inputs + [(name, self.graph.outputs[i]) for i, name in program.state_outputs]:
            self._targets.setdefault(name, ex.target_on(v.device))
            self._shapes.setdefault(name, v.shape)
        self._state = OrderedDict(
            (name, Tensor._from_numpy(a, self._targets[name].backend.device)._data) for name, a in program.state.items()
        )
        self._owned = _ownership(ex)  # outputs that are fresh results, handed over without a copy
        self._output_targets = [ex.target_on(v.device) for v in self.graph.outputs]
        args = sorted((key, i) for i, (kind, key) in enumerate(program.roles) if kind == "arg")
        self._arg_inputs = [i for _, i in args]
        self._calls = 0
        self._run_ms = 0.0
        self._lock = threading.Lock()  # one call at a time: the plan's arena and the state are shared

    @property
    def signature(self) -> list[str]:
        """The argument types a call takes, e.g. ``['f32[16, 12]', 'i64[16]']``."""
        return [self.graph.inputs[i].type_str() for i in self._arg_inputs]

    def __call__(self, *tensors):
        """Calls from several threads run one at a time."""
        with self._lock:
            return self._call(tensors)

    def _call(self, tensors):
        inputs = self._inputs(tensors)
        self._check_guards()
        start = time.perf_counter()
        prog = self._program
        leaves = []
        with self.executable.scope():  # vulkan: the call and its state write-back are one command buffer
            outs = self.executable.run(inputs)
            updates = []
            for index, name in prog.state_outputs:
                target = self._targets[name]
                updates.append((name, outs[index] if self._owned[index] else target.clone(outs[index]), target))
            for name, data, target in updates:
                current = self._state.get(name)
                if current is None:
                    self._state[name] = data
                elif not target.same_memory(data, current):
                    target.copy_into(current, data)
            for name in prog.cleared:
                self._state.pop(name, None)
            for item in prog.results:
                if isinstance(item, tuple):
                    leaves.append(item[1])
                    continue
                v, target = self.graph.outputs[item], self._output_targets[item]
                data = outs[item] if self._owned[item] else target.clone(outs[item])
                leaves.append(Tensor._from_kernel(target.backend, data, Meta(v.shape, v.dtype)))
        self._calls += 1
        self._run_ms += (time.perf_counter() - start) * 1e3
        return _rebuild(prog.tree, leaves)

    def _inputs(self, tensors) -> list:
        prog = self._program
        if len(tensors) != len(self._arg_inputs):
            raise TypeError(
                f"loaded program: expected {len(self._arg_inputs)} tensor arguments {self.signature}, got "
                f"{len(tensors)}; pass the tensors of the saved call, in order (modules and optimizers are in the program)"
            )
        by_input = {}
        for k, (i, t) in enumerate(zip(self._arg_inputs, tensors)):
            v = self.graph.inputs[i]
            if not isinstance(t, Tensor):
                raise TypeError(f"loaded program: argument {k} must be a tensor {v.type_str()}, got {type(t).__name__}")
            if tuple(t.shape) != v.shape or t.dtype is not v.dtype or t.device != self.device:
                got = f"{t.dtype.name}{list(t.shape)} on {t.device}"
                raise ValueError(
                    f"loaded program: argument {k} expected {v.dtype.name}{list(v.shape)} on {self.device}, got {got}. "
                    "A loaded program cannot retrace (the Python code is not in the file); call it with the "
                    "shapes and dtypes it was saved with, or save a specialization for these inputs."
                )
            by_input[i] = self.executable.target_on(v.device).argument(t.contiguous())
        inputs = []
        for i, (kind, key) in enumerate(prog.roles):
            if kind == "arg":
                inputs.append(by_input[i])
            elif kind == "state":
                inputs.append(self._state[key])
            else:
                inputs.append(float(prog.hyper[key]))
        return inputs

    def _check_guards(self) -> None:
        for scalar, fn, other, outcome in self._program.guards:
            if fn(scalar(self.hyperparameters), other) != outcome:
                name = _COMPARISON_NAMES[fn]
                raise RuntimeError(
                    f"loaded program: a hyperparameter changed so that a branch the trace took ({name} {other!r} was "
                    f"{outcome}) no longer holds; a loaded program cannot retrace. Hyperparameters: "
                    f"{dict(self.hyperparameters)}"
                )

    # state ---------------------------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict:
        """Every state tensor by name (parameters, buffers, ``optimizer.state.*``, ``*.grad``), sharing memory."""
        return OrderedDict((name, self._tensor(name, data)) for name, data in self._state.items())

    def model_state_dict(self) -> OrderedDict:
        """Only the module parameters and buffers, named as in the model's ``state_dict``."""
        kinds = self._program.state_kinds
        return OrderedDict(
            (name, t) for name, t in self.state_dict().items() if kinds.get(name) in ("parameter", "buffer")
        )

    def generators(self) -> OrderedDict:
        """The program's own random generators (restored from the file), by name."""
        return OrderedDict(self._program.generators)

    def _tensor(self, name: str, data) -> Tensor:
        dtype = self._program.state_dtypes[name]
        return Tensor._from_kernel(self._targets[name].backend, data, Meta(self._shapes[name], dtype))

    def _host_program(self) -> _Program:
        """The program with its current state read back into host memory (what ``munet.save`` writes)."""
        prog = self._program
        prog.state = OrderedDict(
            (name, self._targets[name].download(d).reshape(self._shapes[name])) for name, d in self._state.items()
        )  # reshape: a 0-d array comes back 1-d
        return prog

    # reporting -----------------------------------------------------------------------------------------
    def describe(self) -> str:
        return self.executable.describe()

    def stats(self) -> dict:
        return {
            "backend": str(self.backend.device),
            "kernels": self.executable.kernels,
            "nodes": len(self.graph.nodes),
            "calls": self._calls,
            "run_ms": round(self._run_ms, 3),
            "traces": 0,
        }

    def __repr__(self) -> str:
        return f"<munet LoadedProgram on {self.device}: {len(self.graph.nodes)} nodes, arguments {self.signature}>"
