"""The forward graph of a model or function, captured by ``munet.compile``'s tracer.

Tracing runs under ``no_grad``, so the graph holds the forward ops only (no backward, no
optimizer step). Real tensors the trace meets (parameters, buffers, constants) are graph
inputs whose ``source`` is the tensor; :func:`capture_forward` names them after the model's
``state_dict`` keys where it can.
"""

from __future__ import annotations

from dataclasses import dataclass

from munet._device import get_backend
from munet._tensor import Tensor
from munet.autograd.grad_mode import no_grad
from munet.compiler.ir import Graph
from munet.compiler.passes.dce import eliminate_dead_code
from munet.compiler.trace import Tracer, tracing


@dataclass
class Capture:
    """A traced forward: ``graph`` (inputs: the arguments, then state), its ``arguments`` (one Value
    per tensor argument), ``state`` (Value -> (name, tensor)) and ``outputs`` (one Value per tensor
    the function returned, in order)."""

    graph: Graph
    arguments: list
    state: dict
    outputs: list


def capture_forward(fn, args: tuple, shapes: list | None = None) -> Capture:
    """Trace ``fn(*args)`` without running it; ``shapes`` overrides the argument shapes (the tracer
    needs no data, only shapes and dtypes)."""
    tracer = Tracer()
    graph = tracer.graph
    symbolic, arguments = [], []
    for k, x in enumerate(args):
        if not isinstance(x, Tensor):
            raise TypeError(f"munet.onnx.export: argument {k} must be a Tensor, got {type(x).__name__}")
        shape = tuple(x.shape) if shapes is None else tuple(shapes[k])
        v = graph.add_input(shape, x.dtype, x.device, source=("arg", k), label=f"argument {k}")
        arguments.append(v)
        symbolic.append(tracer.wrap(v, get_backend(x.device)))
    try:
        with no_grad(), tracing(tracer):
            result = fn(*symbolic)
        outputs = [tracer.value_of(t) for t in _flat_outputs(result)]
    finally:
        tracer.restore(failed=False)
    graph.outputs = list(outputs)
    eliminate_dead_code(graph)
    used = {v for node in graph.nodes for v in node.inputs()} | set(graph.outputs)
    names = _state_names(fn)
    state = {}
    for v in graph.inputs[len(arguments) :]:
        if v in used:
            tensor = v.source
            state[v] = (names.get(id(tensor._storage)), tensor)
    return Capture(graph, arguments, state, outputs)


def _flat_outputs(result) -> list:
    if isinstance(result, Tensor):
        return [result]
    if isinstance(result, (list, tuple)):
        flat = []
        for item in result:
            flat.extend(_flat_outputs(item))
        return flat
    if isinstance(result, dict):
        return _flat_outputs(list(result.values()))
    raise TypeError(
        f"munet.onnx.export: the model must return tensors (or lists, tuples, dicts of them), got {type(result).__name__}"
    )


def _state_names(fn) -> dict:
    """id(storage) -> state_dict key, for a Module (or a bound method of one)."""
    from munet.nn import Module

    module = fn if isinstance(fn, Module) else getattr(fn, "__self__", None)
    if not isinstance(module, Module):
        return {}
    return {id(t._storage): name for name, t in module.state_dict().items() if isinstance(t, Tensor)}
