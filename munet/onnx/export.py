"""``munet.onnx.export``: a model's traced forward graph written as an ONNX model.

The forward is captured by ``munet.compile``'s tracer (``capture.py``), each node is written by
its rule in ``export_ops.py``, parameters and buffers become initializers named after the
model's ``state_dict`` keys, and creation ops (``full``, ``arange``, ``eye``...) become
constants. ``dynamic_axes`` traces the model a second time with those axes resized: attributes
that change with them (a reshape's target, a slice's length) are written in their
shape-polymorphic ONNX form, and the graph is refused if anything else changes.
"""

from __future__ import annotations

import io
import os

import numpy as np

import munet
from munet._tensor import Tensor
from munet.compiler.ir import CONSTANT, map_values
from munet.onnx._deps import require_onnx, tensor_type
from munet.onnx.capture import Capture, capture_forward
from munet.onnx.emitter import Emitter, ExportError
from munet.onnx.export_ops import NOT_EXPORTED, RULES, SHAPE_RULES

MIN_OPSET = 13


def export(
    model_or_fn,
    args,
    f=None,
    *,
    opset_version: int = 18,
    input_names: list | None = None,
    output_names: list | None = None,
    dynamic_axes: dict | None = None,
):
    """Trace ``model_or_fn(*args)`` and write it as ONNX to ``f`` (a path or a binary file object;
    None writes nothing). Returns the ``onnx.ModelProto``.

    ``dynamic_axes`` maps an input or output name to the axes that may vary, as a list of axes or a
    dict ``{axis: symbolic name}`` (PyTorch's format)::

        munet.onnx.export(model, (x,), "model.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    """
    onnx = require_onnx()
    if not MIN_OPSET <= opset_version <= onnx.defs.onnx_opset_version():
        raise ValueError(
            f"munet.onnx.export: opset_version must be between {MIN_OPSET} and {onnx.defs.onnx_opset_version()} "
            f"(the newest this onnx package knows), got {opset_version}"
        )
    args = (args,) if isinstance(args, Tensor) else tuple(args)
    capture = capture_forward(model_or_fn, args)
    input_names = _names(input_names, len(capture.arguments), "input")
    output_names = _names(output_names, len(capture.outputs), "output")
    axes = _parse_dynamic_axes(dynamic_axes or {}, input_names + output_names)
    twin = _twin_capture(model_or_fn, args, capture, input_names, axes) if axes else None
    model = _build(onnx, capture, twin, opset_version, input_names, output_names, axes)
    _write(onnx, model, f)
    return model


def _names(names, count: int, kind: str) -> list:
    if names is None:
        return [f"{kind}_{k}" for k in range(count)]
    names = list(names)
    if len(names) != count:
        raise ValueError(f"munet.onnx.export: {len(names)} {kind}_names given for {count} {kind}s")
    return names


def _parse_dynamic_axes(dynamic_axes: dict, known: list) -> dict:
    """name -> {axis: symbolic name}."""
    parsed = {}
    for name, spec in dynamic_axes.items():
        if name not in known:
            raise ValueError(
                f"munet.onnx.export: dynamic_axes names {name!r}, which is no input or output name {known}"
            )
        if isinstance(spec, dict):
            parsed[name] = {int(k): str(v) for k, v in spec.items()}
        else:
            parsed[name] = {int(k): f"{name}_dim{int(k)}" for k in spec}
    return parsed


def _twin_capture(fn, args, capture: Capture, input_names: list, axes: dict) -> Capture:
    """The model traced again with every dynamic input axis grown by 3 (same symbol, same size)."""
    sizes = {}
    shapes = []
    for x, name in zip(args, input_names):
        shape = list(x.shape)
        for axis, symbol in axes.get(name, {}).items():
            if not -len(shape) <= axis < len(shape):
                raise ValueError(
                    f"munet.onnx.export: dynamic axis {axis} of input {name!r} (shape {tuple(shape)}) is out of range"
                )
            grown = sizes.setdefault(symbol, shape[axis] + 3)
            shape[axis] = grown
        shapes.append(shape)
    twin = capture_forward(fn, args, shapes)
    if [n.name for n in twin.graph.nodes] != [n.name for n in capture.graph.nodes]:
        raise ExportError(
            "munet.onnx.export: the traced graph changes when the dynamic axes change size "
            "(Python control flow reads a shape); export with static shapes instead"
        )
    return twin


def _constants_of(node):
    strip = lambda v: None  # noqa: E731 - values differ between traces by identity only
    return map_values(node.args, strip), {k: map_values(v, strip) for k, v in node.attrs.items() if k != "generator"}


def _build(onnx, capture: Capture, twin: Capture | None, opset: int, input_names, output_names, axes):
    helper = onnx.helper
    twins = dict(zip(capture.graph.nodes, twin.graph.nodes)) if twin is not None else {}
    e = Emitter(opset, twins)
    graph_inputs = []
    for v, name in zip(capture.arguments, input_names):
        e.bind(v, name)
        dims = list(v.shape)
        for axis, symbol in axes.get(name, {}).items():
            dims[axis] = symbol
        graph_inputs.append(helper.make_tensor_value_info(name, tensor_type(v.dtype), dims))
    used_names = set(input_names) | set(output_names)
    for v, (state_name, tensor) in capture.state.items():
        name = state_name if state_name and state_name not in used_names else e.fresh("state")
        used_names.add(name)
        e.initializers.append(e.tensor(tensor.detach().cpu().numpy(), name))
        e.bind(v, name)
    for node in capture.graph.nodes:
        _emit_node(e, node, twins.get(node))
    graph_outputs = []
    for k, (v, name) in enumerate(zip(capture.outputs, output_names)):
        e.nodes.append(helper.make_node("Identity", [e.input(v)], [name]))
        dims = list(v.shape)
        if twin is not None:
            for axis, (a, b) in enumerate(zip(v.shape, twin.outputs[k].shape)):
                if a != b:
                    dims[axis] = axes.get(name, {}).get(axis, f"{name}_dim{axis}")
        graph_outputs.append(helper.make_tensor_value_info(name, tensor_type(v.dtype), dims))
    graph = helper.make_graph(e.nodes, "munet", graph_inputs, graph_outputs, e.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="munet")


def _emit_node(e: Emitter, node, twin) -> None:
    if node.op is CONSTANT:
        e.bind(node.outputs[0], e.const(np.asarray(node.constant)))
        return
    if twin is not None and node.name not in SHAPE_RULES and _constants_of(node) != _constants_of(twin):
        raise ExportError(
            f"munet.onnx.export: {node.name}: its arguments change with the dynamic axes; export with static shapes"
        )
    if all(v in e.constants for v in node.inputs()):
        for v, array in zip(node.outputs, _evaluate(node, e.constants)):
            e.constants[v] = array
        return
    emit = RULES.get(node.name)
    if emit is None:
        reason = NOT_EXPORTED.get(node.name, "has no ONNX export rule")
        raise ExportError(f"munet.onnx.export: op '{node.name}' {reason}; it cannot be exported")
    try:
        names = emit(e, node)
    except ExportError as exc:
        if str(exc).startswith("munet.onnx.export"):
            raise
        raise ExportError(f"munet.onnx.export: {node.name}: {exc}") from None
    for v, name in zip(node.outputs, names):
        if name is not None:
            e.bind(v, name)


def _evaluate(node, constants: dict) -> list:
    """The outputs of a node whose inputs are all constants (creation ops such as ``full``, ``arange``,
    ``eye``, and ops on their results), computed now with MuNet on the cpu: they are constants."""
    from munet.ops._registry import apply, apply_factory

    if node.effectful:
        raise ExportError(f"munet.onnx.export: op '{node.name}' draws random numbers; a random op does not export")
    if not node.inputs():
        results = apply_factory(node.op, "cpu", **node.attrs)
    else:
        tensor = lambda v: munet.from_numpy(np.array(constants[v]))  # noqa: E731
        args = map_values(node.args, tensor)
        attrs = {k: map_values(v, tensor) for k, v in node.attrs.items()}
        results = apply(node.op, *args, **attrs)
    results = results if isinstance(results, tuple) else (results,)
    return [r.numpy().copy() for r in results]


def _write(onnx, model, f) -> None:
    if f is None:
        return
    if isinstance(f, (str, os.PathLike)):
        onnx.save_model(model, os.fspath(f))
    elif isinstance(f, io.IOBase) or hasattr(f, "write"):
        f.write(model.SerializeToString())
    else:
        raise TypeError(f"munet.onnx.export: f must be a path or a binary file object, got {type(f).__name__}")
