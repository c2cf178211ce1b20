"""Reading and validation: a program file's manifest and tensors back into a ``Program``.

Everything is checked before anything runs: op names against ``munet.ops.OPS``, attribute
encodings, each node's output types against its op's shape rule, the graph verifier, every
tensor's shape and dtype against the graph, and that the file holds no unused tensor.
``load_program`` builds the :class:`LoadedProgram` from the result.
"""

from __future__ import annotations

import numpy as np

from munet._device import as_device, host_device
from munet._tensor import Tensor
from munet.compiler.ir import CONSTANT, SCALAR_OPS, Graph, Node, ScalarOp, Value, VerificationError, verify
from munet.compiler.saving.encoding import COMPARISONS, Decoder
from munet.compiler.saving.host import infer_host, place_transfers
from munet.compiler.saving.program import PROGRAM_VERSION, GuardScalar, Program
from munet.compiler.saving.runtime import LoadedProgram
from munet.ops._registry import Meta
from munet.ops.convert import transfer_op
from munet.ops.random import Generator
from munet.serialization import CheckpointError


def load_program(path, manifest: dict, arrays: dict, device) -> LoadedProgram:
    """Build a :class:`LoadedProgram` from a validated container (``munet.load`` calls this).

    ``path`` names the file in errors. A graph that passes every check but that the executor
    still cannot compile (a forged file the op rules accept) is a ``CheckpointError`` too.
    """
    prog = decode_program(path, manifest, arrays, as_device(device))
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


def decode_program(path, manifest: dict, arrays: dict, device) -> Program:
    version = manifest.get("program_version")
    if type(version) is not int or version < 1:
        _fail(path, f"program manifest has no valid program_version ({version!r})")
    if version > PROGRAM_VERSION:
        _fail(path, f"program written by a newer MuNet (program version {version}); this one reads {PROGRAM_VERSION}")
    prog = Program()
    prog.device = device
    prog.fuse = manifest.get("fuse") is True
    host = host_device()
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
    decoder = Decoder(path, values, [g for _, g in generators], device)
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
    if version == 1 and device != host:  # written before host marks: place as a cpu trace
        prog.host = infer_host(graph, prog)
        for v in values.values():
            if v.id in prog.host:
                v.device = host
    place_transfers(graph)
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


def _decode_value(decoder: Decoder, info, device, host):
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


def _decode_node(decoder: Decoder, info, k: int, arrays: dict) -> Node:
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


def _check_node_types(decoder: Decoder, node: Node, k: int) -> None:
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


def _check_dims(decoder: Decoder, node: Node, where: str) -> None:
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


def _meta_of(decoder: Decoder, node: Node, where: str):
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


def _decode_roles(path, manifest: dict, prog: Program, arrays: dict) -> None:
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
        dtypes[info["name"]] = Decoder(path, {}, []).dtype(info.get("dtype"), f"state '{info['name']}'")
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


def _take_state(path, prog: Program, name: str, v: Value, arrays: dict, *, required: bool) -> None:
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


def _decode_outputs(path, manifest: dict, prog: Program, decoder: Decoder, arrays: dict) -> None:
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
        if not isinstance(compare, str) or compare not in COMPARISONS or not isinstance(g.get("outcome"), bool):
            _fail(path, f"malformed guard {g!r}")
        scalar = _decode_expression(path, g.get("scalar"), prog)
        guards.append((scalar, COMPARISONS[g["compare"]], decoder.decode(g.get("other"), "guard"), g["outcome"]))
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


def _decode_expression(path, expr, prog: Program):
    """A guard's scalar expression, as a function of the program's hyperparameters."""
    names = {v.id: key for v, (kind, key) in zip(prog.graph.inputs, prog.roles) if kind == "hyper"}
    if isinstance(expr, dict) and set(expr) == {"input"}:
        if type(expr["input"]) is not int or expr["input"] not in names:
            _fail(path, f"guard reads %{expr['input']}, which is not a hyperparameter input")
        name = names[expr["input"]]
        return GuardScalar(expr, lambda hyper: hyper[name])
    if isinstance(expr, dict) and set(expr) == {"op", "args"}:
        op = SCALAR_OPS.get(expr["op"]) if isinstance(expr["op"], str) else None
        if op is None or not isinstance(expr["args"], list):
            _fail(path, f"guard uses unknown scalar op {expr['op']!r}")
        parts = [_decode_expression(path, a, prog) for a in expr["args"]]
        return GuardScalar(expr, lambda hyper: op.fn(*(p(hyper) for p in parts)))
    if isinstance(expr, dict) and set(expr) == {"float"}:
        number = Decoder(path, {}, []).decode(expr, "guard")
        return GuardScalar(expr, lambda hyper: number)
    if isinstance(expr, int) and not isinstance(expr, bool):
        return GuardScalar(expr, lambda hyper: expr)
    _fail(path, f"malformed guard expression {expr!r}")
