"""Inlining of function operators: an ONNX operator MuNet has no rule for, but which ONNX defines as a
function of other operators (``Swish``, ``RMSNormalization``, ``Attention``, the losses...), or a
model-local function, is replaced by the function's body before import.

A body node keeps the opset its function was written for (``opset_of``), so version-dependent
operators (a ReduceMean's axes, an attribute before opset 18 and an input after) read right. A
context-dependent function (its body depends on input types) is built from the input types ONNX
shape inference gives.
"""

from __future__ import annotations

MAX_DEPTH = 8  # functions calling functions


def inline_functions(onnx, graph, opset: int, local_functions, known_ops, types: dict) -> tuple[list, dict]:
    """``(nodes, opset_of)``: ``graph``'s nodes with function operators replaced by their bodies, and the
    opset of each body node (by ``id``)."""
    local = {(f.domain, f.name): f for f in local_functions}
    nodes, opsets = list(graph.node), {}
    counter = [0]
    for _ in range(MAX_DEPTH):
        expanded, changed = [], False
        for node in nodes:
            body = _body(onnx, node, opsets.get(id(node), opset), local, known_ops, types)
            if body is None:
                expanded.append(node)
                continue
            changed = True
            function, version, node = body
            counter[0] += 1
            for inner in _instantiate(onnx, node, function, f"{node.op_type}_{counter[0]}__"):
                opsets[id(inner)] = version
                expanded.append(inner)
        nodes = expanded
        if not changed:
            break
        types = {**types, **_infer_types(onnx, graph, nodes, opset)}  # the next round's bodies may need them
    return nodes, opsets


def _infer_types(onnx, graph, nodes, opset: int) -> dict:
    """Value types of ``graph`` with ``nodes`` in place of its own (for context-dependent bodies)."""
    trial = onnx.GraphProto()
    trial.CopyFrom(graph)
    del trial.node[:]
    trial.node.extend(nodes)
    model = onnx.helper.make_model(trial, opset_imports=[onnx.helper.make_opsetid("", opset)])
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # bodies that inference cannot follow: their internal types stay unknown
        return {}
    return {v.name: v.type for v in inferred.value_info}


def _body(onnx, node, opset: int, local: dict, known_ops, types: dict):
    """``(FunctionProto, its default-domain opset, the node with default attributes)`` to inline, or None."""
    function = local.get((node.domain, node.op_type))
    if function is not None:
        return function, _default_opset(function, opset), node
    if node.domain not in ("", "ai.onnx") or node.op_type in known_ops:
        return None
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except Exception:  # no such operator at this opset: the support check reports it
        return None
    candidates = [(v, False) for v in schema.function_opset_versions if v <= opset]
    candidates += [(v, True) for v in schema.context_dependent_function_opset_versions if v <= opset]
    if not candidates:
        return None
    version, context_dependent = max(candidates)
    with_defaults = onnx.NodeProto()
    with_defaults.CopyFrom(node)
    given = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in given and attr.default_value and attr.default_value.type:
            with_defaults.attribute.extend([attr.default_value])
    if context_dependent:
        input_types = [types.get(name, onnx.TypeProto()).SerializeToString() for name in node.input]
        data = schema.get_context_dependent_function_with_opset_version(
            version, with_defaults.SerializeToString(), input_types
        )
    else:
        data = schema.get_function_with_opset_version(version)
    function = onnx.FunctionProto()
    function.ParseFromString(data)
    return function, _default_opset(function, version), with_defaults


def _default_opset(function, fallback: int) -> int:
    return next((o.version for o in function.opset_import if o.domain in ("", "ai.onnx")), fallback)


def _instantiate(onnx, node, function, prefix: str) -> list:
    """The body of ``function`` for ``node``: formal inputs and outputs renamed to the node's,
    internal values prefixed, attribute references resolved."""
    names = {formal: (node.input[i] if i < len(node.input) else "") for i, formal in enumerate(function.input)}
    for i, formal in enumerate(function.output):
        if i < len(node.output) and node.output[i]:
            names[formal] = node.output[i]
    attributes = {a.name: a for a in node.attribute}

    def rename(name: str) -> str:
        if name in names:
            return names[name]
        return prefix + name if name else ""

    body = []
    for inner in function.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        copy.ClearField("input")
        copy.ClearField("output")
        copy.ClearField("attribute")
        copy.input.extend(rename(n) for n in inner.input)
        copy.output.extend(rename(n) for n in inner.output)
        for attr in inner.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:  # a branch reads the body's values by their new names
                renamed = onnx.AttributeProto()
                renamed.CopyFrom(attr)
                _rename_graph(renamed.g, rename)
                copy.attribute.extend([renamed])
            elif attr.ref_attr_name:
                if attr.ref_attr_name in attributes:
                    resolved = onnx.AttributeProto()
                    resolved.CopyFrom(attributes[attr.ref_attr_name])
                    resolved.name = attr.name
                    copy.attribute.extend([resolved])
            else:
                copy.attribute.extend([attr])
        copy.name = prefix + (inner.name or inner.op_type)
        body.append(copy)
    return body


def _rename_graph(graph, rename) -> None:
    """Every value name in ``graph`` (and its nested graphs) through ``rename``."""
    for node in graph.node:
        node.input[:] = [rename(n) for n in node.input]
        node.output[:] = [rename(n) for n in node.output]
        for attr in node.attribute:
            if attr.HasField("g"):
                _rename_graph(attr.g, rename)
    for value in list(graph.input) + list(graph.output):
        value.name = rename(value.name)
    for tensor in graph.initializer:
        tensor.name = rename(tensor.name)
