"""``munet.onnx.load``: read and check an ONNX model, then build a :class:`~munet.onnx.program.Program`.

Everything is checked before anything runs: the model's structure (``onnx.checker``), that every
node's operator is one MuNet runs (default domain, a rule in ``import_ops.py``), and that every
value's element type has a MuNet dtype. The element types of all values come from ONNX shape
inference and are kept: integer and bool outputs come back with their declared types.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from munet.onnx import values
from munet.onnx._deps import require_onnx
from munet.onnx.functions import inline_functions
from munet.onnx.import_ml_ops import ML_DOMAIN, ML_RULES
from munet.onnx.import_ops import HOST_INPUTS, RULES, UnsupportedError
from munet.onnx.program import ImportedNode, Program, Subgraph
from munet.onnx.tensor_data import inline_external_data, tensor_array

DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass
class ImportedGraph:
    """A checked graph: decoded nodes, parameters (trainable initializers), host constants, and the
    declared MuNet dtype of every value whose type is known."""

    opset: int
    nodes: list
    inputs: list
    outputs: list
    parameters: dict
    constants: dict
    dtypes: dict
    optimizations: list = field(default_factory=list)


def load(f, *, device="cpu", optimize: bool = True) -> Program:
    """An ONNX model (a path, a binary file object, bytes, or an ``onnx.ModelProto``) as a MuNet program.

    Operators ONNX defines as functions of others, and model-local functions, are inlined.

    ``optimize=True`` folds BatchNormalization into a preceding Conv and evaluates constant
    subgraphs once; ``program.optimizations`` lists what was done::

        program = munet.onnx.load("model.onnx")
        y = program(x)  # or program(input_name=x)
    """
    onnx = require_onnx()
    model = _read(onnx, f)
    base_dir = os.path.dirname(os.path.abspath(os.fspath(f))) if isinstance(f, (str, os.PathLike)) else None
    graph = import_graph(onnx, model, _source_name(f), base_dir)
    if optimize:
        from munet.onnx.optimize import optimize_graph

        optimize_graph(graph)
    return Program(graph, device)


def _source_name(f) -> str:
    return os.fspath(f) if isinstance(f, (str, os.PathLike)) else "<model>"


def _read(onnx, f):
    if isinstance(f, onnx.ModelProto):
        return f
    if isinstance(f, (bytes, bytearray)):
        data, where = bytes(f), "<bytes>"
    elif isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as stream:
            data, where = stream.read(), os.fspath(f)
    elif hasattr(f, "read"):
        data, where = f.read(), "<file object>"
    else:
        raise TypeError(
            f"munet.onnx.load: expected a path, bytes, a binary file or an onnx.ModelProto, got {type(f).__name__}"
        )
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError
        raise ValueError(f"munet.onnx.load: {where} is not a valid ONNX model: {exc}") from None
    return model


def import_graph(onnx, model, where: str = "<model>", base_dir: str | None = None) -> ImportedGraph:
    """The checked graph of ``model``; external tensor data is read from ``base_dir`` (the model's
    directory; None refuses external data)."""
    model = inline_external_data(onnx, model, base_dir, where)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise ValueError(f"munet.onnx.load: {where} fails onnx's checker: {exc}") from None
    except Exception as exc:  # the checker's own failures on malformed input (a C++ exception surfaced)
        raise ValueError(f"munet.onnx.load: {where} cannot be checked: {exc}") from None
    if len(model.training_info):
        raise UnsupportedError(
            f"munet.onnx.load: {where}: training metadata (training_info) is not supported; MuNet imports the "
            "inference graph only (strip it with `del model.training_info[:]`)"
        )
    opset = next((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS), None)
    ml_opset = next((o.version for o in model.opset_import if o.domain == ML_DOMAIN), None)
    if opset is None and ml_opset is None:
        raise UnsupportedError(f"munet.onnx.load: {where} imports no default-domain (or ai.onnx.ml) opset")
    graph = model.graph
    inferred = _inferred_graph(onnx, model)
    dtypes = _declared_types(onnx, model, inferred, opset, where)
    type_protos = {v.name: v.type for v in list(inferred.input) + list(inferred.value_info) + list(inferred.output)}
    node_protos, opset_of = inline_functions(onnx, graph, opset or 1, model.functions, RULES, type_protos)
    for node in node_protos:
        if node.domain == ML_DOMAIN:
            opset_of[id(node)] = ml_opset
    for node in node_protos:
        _check_supported(node, opset_of.get(id(node), opset), where)
    if graph.sparse_initializer:
        names = [t.values.name for t in graph.sparse_initializer]
        raise UnsupportedError(f"munet.onnx.load: {where}: sparse initializers ({names}) are not supported")
    initializers = {
        t.name: values.as_held(tensor_array(onnx, t, base_dir, f"{where}: initializer {t.name!r}"), dtypes[t.name])
        for t in graph.initializer
    }
    nodes = [_decode(onnx, node, opset_of.get(id(node), opset), where, base_dir) for node in node_protos]
    _check_value_types(nodes, dtypes, where)
    parameters, constants = _split_initializers(initializers, nodes)
    inputs = [v.name for v in graph.input if v.name not in initializers]
    outputs = [v.name for v in graph.output]
    return ImportedGraph(opset, nodes, inputs, outputs, parameters, constants, dtypes)


def _check_supported(node, opset: int, where: str) -> None:
    domain = node.domain or "ai.onnx"
    if node.domain == ML_DOMAIN:
        if node.op_type not in ML_RULES:
            raise UnsupportedError(
                f"munet.onnx.load: {where}: node {node.name!r}: operator {node.op_type} (domain {domain!r}, "
                f"opset {opset}) is not supported"
            )
        return
    if node.domain not in DEFAULT_DOMAINS:
        raise UnsupportedError(
            f"munet.onnx.load: {where}: node {node.name!r}: operator {node.op_type} (domain {domain!r}, opset {opset}) "
            "is not supported: MuNet runs the default ONNX domain (and a few ai.onnx.ml operators) only"
        )
    if node.op_type not in RULES:
        raise UnsupportedError(
            f"munet.onnx.load: {where}: node {node.name!r}: operator {node.op_type} (domain {domain!r}, opset {opset}) "
            "is not supported"
        )


def _inferred_graph(onnx, model):
    """The graph with ONNX shape inference's value types (the model's own where inference fails)."""
    try:
        return onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # a model shape inference cannot follow still runs; types then come from its outputs
        return model.graph


def _declared_types(onnx, model, inferred, opset: int, where: str) -> dict:
    """name -> held type (values.py: a MuNet dtype, an unsigned type, strings, a sequence or an
    optional) of every value ONNX shape inference types; an unsupported type is refused."""
    producers = {out: node for node in model.graph.node for out in node.output}
    dtypes = {}
    for info in list(inferred.input) + list(inferred.value_info) + list(inferred.output):
        kind = values.value_type(onnx, info.type)
        if kind is ...:
            continue
        if kind is None:
            raise UnsupportedError(_type_error(where, info.name, producers, opset, _type_text(onnx, info.type)))
        dtypes[info.name] = kind
    for t in model.graph.initializer:
        kind = values.element_type(onnx, t.data_type)
        if kind is None:
            name = onnx.TensorProto.DataType.Name(t.data_type)
            raise UnsupportedError(
                f"munet.onnx.load: {where}: initializer {t.name!r} has element type {name}, which MuNet lacks"
            )
        dtypes[t.name] = kind
    return dtypes


def _type_text(onnx, type_proto) -> str:
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        return f"element type {onnx.TensorProto.DataType.Name(type_proto.tensor_type.elem_type)}"
    if which in ("sequence_type", "optional_type"):
        return f"a {which.split('_')[0]} of " + _type_text(onnx, getattr(type_proto, which).elem_type)
    return f"a {which} value"


def _check_value_types(nodes: list, dtypes: dict, where: str) -> None:
    """Strings reach only string operators and uint64 values only operators exact on their int64 form."""
    from munet.onnx.import_host_ops import STRING_OPS

    for node in nodes:
        for name in node.input:
            kind = dtypes.get(name)
            if kind is values.STRING and node.op_type not in STRING_OPS:
                raise UnsupportedError(_node_error(where, node, f"string input {name!r}"))
            if isinstance(kind, values.Unsigned) and kind.bits == 64 and node.op_type not in values.UINT64_OPS:
                raise UnsupportedError(_node_error(where, node, f"uint64 input {name!r} (no exact int64 form)"))
        for value in node.attrs.values():
            if isinstance(value, Subgraph):
                _check_value_types(value.nodes, dtypes, where)


def _node_error(where, node, what) -> str:
    return (
        f"munet.onnx.load: {where}: node {node.name!r}: operator {node.op_type} (domain {node.domain or 'ai.onnx'!r}, "
        f"opset {node.opset}): {what} is not supported"
    )


def _type_error(where, value, producers, opset, what) -> str:
    node = producers.get(value)
    if node is None:
        return f"munet.onnx.load: {where}: graph input {value!r}: {what} is not supported"
    return (
        f"munet.onnx.load: {where}: node {node.name!r}: operator {node.op_type} (domain {node.domain or 'ai.onnx'!r}, "
        f"opset {opset}) produces {value!r}: {what} is not supported"
    )


def _decode(onnx, node, opset: int, where: str, base_dir: str | None = None) -> ImportedNode:
    attrs = {}
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH and node.op_type in ("If", "Loop", "Scan", "SequenceMap"):
            attrs[a.name] = _decode_subgraph(onnx, a.g, opset, where, base_dir)
            continue
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            raise UnsupportedError(
                f"munet.onnx.load: {where}: node {node.name!r}: operator {node.op_type} (domain 'ai.onnx', opset {opset}): "
                f"subgraph attribute '{a.name}' is not supported"
            )
        if a.type in (onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.SPARSE_TENSORS):
            raise UnsupportedError(
                f"munet.onnx.load: {where}: node {node.name!r}: operator {node.op_type} (domain 'ai.onnx', opset {opset}): "
                f"sparse tensor attribute '{a.name}' is not supported"
            )
        value = onnx.helper.get_attribute_value(a)
        if a.type == onnx.AttributeProto.TENSOR:
            value = tensor_array(
                onnx, value, base_dir, f"{where}: node {node.name!r} ({node.op_type}) attribute {a.name!r}"
            )
        elif isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        attrs[a.name] = value
    return ImportedNode(node.op_type, node.domain, node.name, node.input, node.output, attrs, opset)


def _decode_subgraph(onnx, graph, opset: int, where: str, base_dir: str | None) -> Subgraph:
    for node in graph.node:
        _check_supported(node, opset, where)
    constants = {}
    for t in graph.initializer:
        kind = values.element_type(onnx, t.data_type)
        if kind is None:
            raise UnsupportedError(
                f"munet.onnx.load: {where}: initializer {t.name!r} of a subgraph has an unsupported type"
            )
        constants[t.name] = values.as_held(tensor_array(onnx, t, base_dir, f"{where}: initializer {t.name!r}"), kind)
    nodes = [_decode(onnx, node, opset, where, base_dir) for node in graph.node]
    return Subgraph([v.name for v in graph.input], nodes, constants, [v.name for v in graph.output])


def _split_initializers(initializers: dict, nodes: list) -> tuple:
    """Float initializers become Parameters unless every use reads them on the host (a shape, a scale);
    the others are constants."""
    tensor_uses = set()
    for node in nodes:
        host = HOST_INPUTS.get(node.op_type, set())
        tensor_uses.update(name for i, name in enumerate(node.input) if i not in host)
    parameters, constants = {}, {}
    for name, array in initializers.items():
        trainable = np.issubdtype(array.dtype, np.floating) and name in tensor_uses
        (parameters if trainable else constants)[name] = array
    return parameters, constants
