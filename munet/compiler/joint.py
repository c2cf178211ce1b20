"""A compiled forward that autograd can go through: the joint graph of forward and backward, split.

:func:`trace_gradients` extends a forward's trace with the gradients of its differentiable outputs
(as AOTAutograd's joint graph); :func:`partition` splits the optimized joint graph in two programs.
The joint graph holds a compiled forward, then the gradients of its outputs with respect to its
differentiable inputs, written against *cotangent* inputs (the incoming gradients). A node that
depends on a cotangent is backward; every other node is forward, so the forward computes each value
the backward reads that does not need a cotangent, and *saves* it: those values become extra outputs
of the forward graph and the first inputs of the backward graph. Constants the backward reads are
copied into it instead of being saved.
"""

from __future__ import annotations

from dataclasses import dataclass

from munet._tensor import Tensor
from munet.compiler.ir import CONSTANT, Graph, Value
from munet.compiler.passes.dce import eliminate_dead_code
from munet.compiler.passes.remat import recompute_in_backward


@dataclass
class JointGradients:
    """What :func:`trace_gradients` added to a trace.

    ``inputs`` are the differentiable inputs, ``("leaf", tensor)`` for a parameter the trace met (or a
    real tensor with autograd history, made before a graph break) or ``("arg", k)`` for tensor argument ``k``; ``gradients`` holds each one's gradient value, or None
    where the outputs do not depend on it; ``cotangents`` are the graph inputs of the outputs' gradients.
    """

    inputs: list
    gradients: list
    cotangents: list


def trace_gradients(tracer, outputs: list) -> JointGradients:
    """Record, in ``tracer``'s graph, the gradients of ``outputs`` (traced tensors with a history)
    with respect to every leaf that requires grad, given cotangent inputs (call while tracing)."""
    from munet.autograd import grad

    # the leaves this trace met (it also knows earlier traces' leaves, for their .grad before the call):
    # after a graph break, others are reached through the history of an earlier segment, which runs them
    inputs = [("leaf", leaf) for leaf, _ in tracer.leaves.values() if leaf.requires_grad and tracer.met(leaf)]
    inputs += [("leaf", t) for t in tracer.grad_inputs.values()]
    inputs += [("arg", k) for k, t in tracer.arguments if t.requires_grad and t.grad_fn is None]
    tensors = [x if kind == "leaf" else dict(tracer.arguments)[x] for kind, x in inputs]
    cotangents = []
    for j, out in enumerate(outputs):
        value = tracer.graph.add_input(
            tuple(out.shape), out.dtype, out.device, source=("cotangent", j), label=f"gradient of output {j}"
        )
        cotangents.append(tracer.wrap(value, out._storage.backend))
    grads = grad(outputs, tensors, grad_outputs=cotangents, allow_unused=True) if tensors else ()
    gradients = [tracer.value_of(g) if isinstance(g, Tensor) else None for g in grads]
    return JointGradients(inputs, gradients, [tracer.value_of(c) for c in cotangents])


def partition(graph: Graph, n_forward: int, cotangents: list[Value], recompute: bool = True) -> tuple[Graph, int, int]:
    """Split ``graph`` in place; returns ``(backward graph, number of saved values, number recomputed)``.

    ``graph.outputs[:n_forward]`` are the forward's results, the rest the gradients. Afterwards
    ``graph`` is the forward: its inputs lose the cotangents and its outputs are the results then
    the saved values. The backward graph's inputs are the saved values then the cotangents; its
    outputs are the gradients, in order. With ``recompute``, the backward recomputes cheap
    elementwise values from fewer bytes of saved inputs (``passes/remat.py``,
    :func:`~munet.compiler.passes.remat.recompute_in_backward`); the count is the third result.
    """
    backward_of = set(cotangents)
    forward_nodes, backward_nodes = [], []
    for node in graph.nodes:
        if any(v in backward_of for v in node.inputs()):
            backward_nodes.append(node)
            backward_of.update(node.outputs)
        else:
            forward_nodes.append(node)
    kept = set(graph.inputs) | set(graph.outputs[:n_forward])
    recomputed = recompute_in_backward(graph, forward_nodes, backward_nodes, kept) if recompute else 0
    backward_of.update(v for node in backward_nodes for v in node.outputs)  # the copies recompute theirs
    gradients = graph.outputs[n_forward:]
    needed: list[Value] = []
    for v in [v for node in backward_nodes for v in node.inputs()] + gradients:
        if v not in backward_of and v not in needed:
            needed.append(v)
    backward = Graph()
    backward._next_id = graph._next_id
    mapping, saved = {}, []
    for v in needed:
        if v.producer is not None and v.producer.op is CONSTANT:
            mapping[v] = backward.add_constant(v.producer.constant, v.dtype, v.device)
            mapping[v].producer.folded_from = v.producer.folded_from  # folded again at new sizes (resize.py)
            continue
        label = f"saved {v.label or 'value'}" if v.producer is None else "saved value"
        mapping[v] = backward.add_input(v.shape, v.dtype, v.device, source=("saved", len(saved)), label=label)
        saved.append(v)
    backward.inputs += cotangents
    backward.nodes += backward_nodes
    backward.outputs = list(gradients)
    backward.replace_uses(mapping)
    graph.nodes = forward_nodes
    graph.inputs = [v for v in graph.inputs if v not in set(cotangents)]
    graph.outputs = graph.outputs[:n_forward] + saved
    eliminate_dead_code(graph)  # forward nodes whose values the backward now recomputes
    return backward, len(saved), recomputed
