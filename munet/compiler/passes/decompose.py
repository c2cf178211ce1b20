"""Decomposition: composite nodes replaced by their ops before fusion, on every device.

A composite op (``define(..., decomposition=fn)``, ``munet/ops/_registry.py``) is written in
public ops beside its definition. Tracing records it as one node (its gradient rule, when it has
one, is traced as usual); this pass runs ``fn`` again on the node's inputs under a tracer that
emits into the graph itself, so the composite becomes the primitives its decomposition applies,
and fusion turns them into fused kernels (softmax: a max and a sum reduction and the elementwise
ops joining whatever produces and consumes them). Composites inside a decomposition are
decomposed in turn.

A node stays one node when its device's compile target generates a kernel for it
(``target.generates(node)``: cpu's gather form of ``max_pool_backward``), or when its backend has
a fast kernel for it and the plan is not fusing (the single kernel then beats several unfused
ones, and an unfused plan runs eager's kernels, bit for bit). A fusing plan decomposes every other
composite, on every device: the decomposition is what fuses with its producers and consumers.
"""

from __future__ import annotations

from munet._device import compile_target, get_backend
from munet.autograd.grad_mode import no_grad
from munet.compiler.ir import Graph, Node, Value
from munet.compiler.passes.dce import eliminate_dead_code
from munet.compiler.trace import Tracer, tracing
from munet.ops._registry import apply, decompose


class _Expander(Tracer):
    """A tracer emitting into an existing graph: decompositions see the node's input values as
    symbolic tensors, and every op they apply is appended to ``graph.nodes``."""

    def __init__(self, graph: Graph):
        super().__init__()
        self.graph = graph
        self.origin: tuple = ()

    def _emit(self, op, args, attrs, meta, device):
        outputs = super()._emit(op, args, attrs, meta, device)
        outputs[0].producer.origin = self.origin  # run-time errors name the user's line of the composite
        return outputs

    def _new_state(self, t):
        raise RuntimeError(
            "munet.compile: a decomposition read a tensor that is not one of its inputs; a composite's "
            "decomposition must compute from its arguments only"
        )

    def expand(self, node: Node) -> list[Value]:
        """Apply ``node``'s decomposition to its inputs; the values that replace its outputs."""
        self.origin = node.origin
        views: dict = {}

        def symbolic(a):
            if isinstance(a, list):
                return [symbolic(x) for x in a]
            if not isinstance(a, Value):
                return a
            producer = a.producer
            if producer is None or producer.op.view is None or len(producer.args) != 1:
                return self.wrap(a, get_backend(a.device))
            if a not in views:
                # a view keeps its geometry (an expand's zero strides, a transpose's order), so the
                # decomposition's own views and reshapes of it are what they are at run time: the
                # view op applied again to its base
                views[a] = apply(producer.op, symbolic(producer.args[0]), **producer.attrs)
            return views[a]

        with tracing(self), no_grad():
            args = [symbolic(a) for a in node.args]
            result = decompose(node.op, args, dict(node.attrs))
        results = result if isinstance(result, tuple) else (result,)
        return [self.value_of(t) for t in results]


def decompose_composites(graph: Graph, fusing: bool) -> int:
    """Replace composite nodes by their decompositions (see the module docstring); returns how
    many composite nodes were replaced, nested ones included."""
    pending, graph.nodes = graph.nodes, []
    expander = _Expander(graph)
    mapping: dict = {}
    replaced = 0

    def resolve(v):
        return mapping.get(v, v)

    def place(node: Node) -> None:
        nonlocal replaced
        node.replace_inputs(resolve)
        if not _decomposes(node, fusing):
            graph.nodes.append(node)
            return
        start = len(graph.nodes)
        values = expander.expand(node)
        emitted = graph.nodes[start:]
        del graph.nodes[start:]
        for inner in emitted:
            place(inner)
        for old, new in zip(node.outputs, values):
            mapping[old] = resolve(new)
        replaced += 1

    for node in pending:
        place(node)
    if replaced:
        graph.replace_uses(mapping)
        eliminate_dead_code(graph)
    return replaced


def _decomposes(node: Node, fusing: bool) -> bool:
    op = node.op
    if getattr(op, "decomposition", None) is None or not node.args:
        return False  # a creation node exists only where its device has a kernel for it (``apply_factory``)
    if any(v.kind == "scalar" for v in node.inputs()):
        return False  # a scalar read at each call: the decomposition would need its value
    device = node.outputs[0].device
    target = compile_target(device)
    if target.generates(node):
        return False
    if op.name not in get_backend(device).kernels:
        return True
    return fusing
