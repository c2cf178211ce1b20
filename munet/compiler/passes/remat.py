"""Rematerialization: kernels recompute cheap elementwise values instead of loading them back.

A training step's forward stores values its backward reads: GELU's forward kernel wrote
``x / 2``, ``1 + erf(x / sqrt 2)`` and ``exp(-x^2 / 2)`` (three tensors of the hidden layer's
size) for one backward kernel to read back, where that kernel can compute ``x / 2`` and the
``exp`` from ``x`` itself. AOTAutograd's min-cut partitioner does this for torch.compile; MuNet
does it in two places, one rule each:

- :func:`rematerialize_pointwise`, after fusion (a whole compiled step, and each program of a
  compiled module): for a fused kernel ``G`` reading outputs of an elementwise fused kernel ``F``
  of the same index space, outputs that only ``G`` reads are recomputed inside ``G`` from ``F``'s
  inputs: ``G`` gets copies of the members of ``F`` that compute them (folded views included) and
  ``F`` stops storing them. Chosen one output at a time, each must lower the bytes moved (one store
  and one load saved per output, one load of its own size per input of ``F`` that ``G`` did not
  read; a broadcast bias costs its few elements).
- :func:`recompute_in_backward`, when a compiled module's joint graph is partitioned: the backward
  recomputes saved values from fewer saved bytes.

Both copy at most :data:`MAX_RECOMPUTED` members into one place, and never compute an expensive
member twice (:data:`CHEAP_OPS`: a transcendental is recomputed only where the producer stops
computing it): so GELU's ``1 + erf`` stays stored. The copies are the same member nodes, rendered
by the same formula code, so a recomputed value is bitwise the value that would have been stored.

``describe()`` shows a kernel that recomputes as ``<n ops: ... (k recomputed)>``;
``stats()['passes']`` counts values no longer stored (``remat``, ``backward_remat``) and saved
values the backward recomputes (``recomputed_in_backward``). ``options={"remat": False}`` turns
both off.
"""

from __future__ import annotations

import math

from munet.compiler.ir import CONSTANT, Graph, Node
from munet.compiler.passes.dce import eliminate_dead_code
from munet.compiler.passes.fuse import FUSED

MAX_RECOMPUTED = 24  # member nodes copied into one kernel, over all the kernels it recomputes from
# ops of a few instructions each: recomputing them costs less than a store and a load. Others (exp,
# erf, tanh, ...: polynomials of tens of operations in the generated C) are recomputed only where the
# producer stops computing them, never computed twice (recomputing GELU's float32 erf in the backward
# made the GPT step's fused kernels slower: docs/perf/cpu.md, "A float32 erf in float32 arithmetic")
CHEAP_OPS = frozenset(
    {"add", "sub", "mul", "div", "neg", "abs", "reciprocal", "sqrt", "rsqrt", "maximum", "minimum", "fmax",
     "fmin", "clamp", "relu", "threshold", "threshold_backward", "leaky_relu", "leaky_relu_backward", "hardtanh",
     "hardtanh_backward", "sign", "copysign", "where", "cast", "clone", "lerp", "lt", "le", "gt", "ge", "eq", "ne",
     "logical_and", "logical_or", "logical_xor", "logical_not", "floor", "ceil", "trunc", "round"}
)  # fmt: skip


def rematerialize_pointwise(graph: Graph) -> int:
    """Recompute in each fused kernel the elementwise values it alone reads (see the module docstring).

    Returns how many stored values were removed.
    """
    readers = _readers(graph)
    returned = set(graph.outputs)
    removed = 0
    for node in graph.nodes:
        if node.op is FUSED:
            removed += _absorb_producers(graph, node, readers, returned)
    if removed:
        eliminate_dead_code(graph)
    return removed


def _readers(graph: Graph) -> dict:
    found: dict = {}
    for node in graph.nodes:
        for v in node.inputs():
            found.setdefault(v, set()).add(node)
    return found


def _absorb_producers(graph: Graph, consumer: Node, readers: dict, returned: set) -> int:
    """Recompute in ``consumer`` what its elementwise fused producers store for it alone; how many values."""
    group = consumer.attrs["group"]
    removed = 0
    budget = MAX_RECOMPUTED - group.recomputed
    producers = []
    for v in group.inputs:
        p = v.producer
        if p is not None and p.op is FUSED and p not in producers:
            producers.append(p)
    for producer in producers:
        source = producer.attrs["group"]
        if source.reduce_dims or tuple(source.shape) != tuple(group.shape):
            continue
        candidates = [v for v in producer.outputs if _read_only_by(v, consumer, readers, returned)]
        stored = _worth_recomputing(source, [v for v in candidates if _read_directly(v, group)], group, budget)
        if not stored:
            continue
        chain = _members_computing(source, stored)
        new_reads = [v for v in _external_inputs(chain, source) if v not in group.inputs]
        _copy_into(graph, group, chain, stored, new_reads)
        consumer.args = tuple(group.inputs)
        for v in new_reads:
            readers.setdefault(v, set()).add(consumer)
        for v in stored:
            readers[v].discard(consumer)
        _stop_storing(producer, stored)
        cost = sum(1 for m in chain if m.op.view is None)
        budget -= cost
        group.recomputed += cost
        removed += len(stored)
    return removed


def _worth_recomputing(source, candidates: list, group, budget: int) -> list:
    """The outputs of ``source`` among ``candidates`` that ``group`` should recompute, chosen one by one
    in order: each must keep the copied members within ``budget``, duplicate no expensive member
    (one ``source`` still computes for its other outputs) and lower the bytes moved."""
    chosen: list = []
    size = math.prod(source.shape)
    for v in candidates:
        trial = chosen + [v]
        chain = _members_computing(source, trial)
        if sum(1 for m in chain if m.op.view is None) > budget:
            continue
        still = set(_members_computing(source, [u for u in source.outputs if u not in trial]))
        if any(m in still and not _cheap(m) for m in chain):
            continue
        new_reads = [u for u in _external_inputs(chain, source) if u not in group.inputs and u.kind == "tensor"]
        if sum(math.prod(u.shape) for u in new_reads) >= 2 * len(trial) * size:
            continue
        chosen = trial
    return chosen


def _read_only_by(v, consumer: Node, readers: dict, returned: set) -> bool:
    return v.kind == "tensor" and v not in returned and readers.get(v) == {consumer}


def _read_directly(v, group) -> bool:
    """Whether ``group``'s members read ``v`` only as an elementwise operand (not through a folded view)."""
    users = [m for m in group.members if v in m.inputs()]
    return bool(users) and all(m.op.view is None for m in users)


def _members_computing(source, values: list) -> list:
    """The members of ``source`` (in order, folded views included) that ``values`` depend on."""
    produced = {m.outputs[0]: m for m in source.members}
    needed, stack = set(), list(values)
    while stack:
        m = produced.get(stack.pop())
        if m is None or m in needed:
            continue
        needed.add(m)
        stack.extend(m.inputs())
    return [m for m in source.members if m in needed]


def _external_inputs(chain: list, source) -> list:
    """The inputs of ``source`` that ``chain`` reads, in ``source.inputs`` order."""
    read = {v for m in chain for v in m.inputs()}
    return [v for v in source.inputs if v in read]


def _copy_into(graph: Graph, group, chain: list, stored: list, new_reads: list) -> None:
    """Put copies of ``chain`` first in ``group.members`` and make the members read them for ``stored``."""
    copies = _copy_nodes(graph, chain)
    for m in group.members:
        m.replace_inputs(lambda v: copies.get(v, v) if v in stored else v)
    cloned = [copies[m.outputs[0]].producer for m in chain]
    group.members[:0] = cloned
    group.folded_views += sum(1 for m in cloned if m.op.view is not None)
    group.inputs = [v for v in group.inputs if v not in stored] + new_reads


def _stop_storing(producer: Node, stored: list) -> None:
    """Drop ``stored`` from ``producer``'s outputs and the members only they needed."""
    source = producer.attrs["group"]
    source.outputs = [v for v in source.outputs if v not in stored]
    producer.outputs = list(source.outputs)
    kept = set(_members_computing(source, source.outputs))
    source.members = [m for m in source.members if m in kept]
    read = {v for m in source.members for v in m.inputs()}
    source.inputs = [v for v in source.inputs if v in read]
    producer.args = tuple(source.inputs)


# Across the joint graph's partition ----------------------------------------------------------------
def recompute_in_backward(graph: Graph, forward: list, backward: list, kept: set) -> int:
    """Copy cheap forward nodes into ``backward`` (a list of the joint graph's backward nodes, edited in
    place) where saving their inputs for the backward takes fewer bytes than saving their outputs.

    Candidates are the saved values computed by elementwise ops and views (:func:`_recomputable`;
    an expensive op only when the forward's results do not need it), followed back through such
    nodes to their *frontier* (a matmul's or reduction's output, an expensive op's, a graph input; a
    constant is copied). Values whose frontiers meet form one cluster, decided together: GELU's
    ``x / 2``, ``x / sqrt 2``, ``1 + erf(x / sqrt 2)``, ``exp(-x^2 / 2)`` and its output (for the next
    layer's weight gradient) share the frontier ``{x W^T, b, erf(x / sqrt 2)}``: two saved tensors
    where there were four. A frontier value costs nothing when it is saved anyway or in ``kept``
    (values the forward returns or holds: graph inputs, results). Returns how many saved values
    were replaced.
    """
    produced_by = {v: n for n in forward for v in n.outputs}
    # an expensive node the forward computes anyway is not computed twice: its output is saved instead
    results = _ancestors([v for v in kept if v in produced_by], produced_by)
    recomputable = {n for n in forward if _recomputable(n) and (_cheap(n) or n not in results)}
    saved = [v for n in backward for v in n.inputs() if v in produced_by and produced_by[v] in recomputable]
    saved = list(dict.fromkeys(v for v in saved if v not in kept))
    cones = {}
    for v in saved:
        cone = _cone(v, produced_by, recomputable)
        if cone is not None:
            cones[v] = cone
    replaced = 0
    for cluster in _clusters(cones):
        nodes = {n for v in cluster for n in cones[v][0]}
        frontier = {u for v in cluster for u in cones[v][1]}
        others = {u for n in backward for u in n.inputs()} - set(cluster)
        after = sum(_nbytes(u) for u in frontier if u not in kept and u not in others)
        if after >= sum(_nbytes(v) for v in cluster):
            continue
        copies = _copy_nodes(graph, [n for n in forward if n in nodes])
        rename = {v: copies[v] for v in cluster}
        for n in backward:
            n.replace_inputs(lambda u, rename=rename: rename.get(u, u))
        backward[:0] = [copies[n.outputs[0]].producer for n in forward if n in nodes]
        replaced += len(cluster)
    return replaced


def _cheap(node: Node) -> bool:
    return node.op.view is not None or node.name in CHEAP_OPS


def _recomputable(node: Node) -> bool:
    """An elementwise op or a view with one tensor output and only tensor or constant operands."""
    from munet.compiler.codegen.kernel import ELEMENTWISE_RULES

    if node.effectful or len(node.outputs) != 1 or node.outputs[0].kind != "tensor":
        return False
    if getattr(node.op, "view", None) is None and node.name not in ELEMENTWISE_RULES:
        return False
    return all(v.kind == "tensor" for v in node.inputs())


def _ancestors(values: list, produced_by: dict) -> set:
    """The nodes (of ``produced_by``) that ``values`` depend on."""
    found, stack = set(), list(values)
    while stack:
        p = produced_by.get(stack.pop())
        if p is not None and p not in found:
            found.add(p)
            stack.extend(p.inputs())
    return found


def _cone(v, produced_by: dict, recomputable: set):
    """``(nodes, frontier)``: the ``recomputable`` nodes ``v`` is computed by and the values they start
    from, or None when that is more than :data:`MAX_RECOMPUTED` nodes."""
    nodes, frontier, stack = set(), set(), [v]
    while stack:
        u = stack.pop()
        p = produced_by.get(u)
        if p is None or p not in recomputable:
            if p is None or p.op is not CONSTANT:
                frontier.add(u)
            continue
        if p in nodes:
            continue
        nodes.add(p)
        if sum(1 for n in nodes if n.op.view is None) > MAX_RECOMPUTED:
            return None
        stack.extend(p.inputs())
    return nodes, frontier


def _clusters(cones: dict) -> list:
    """The saved values grouped so that two values sharing a frontier value are in one group."""
    owner: dict = {}
    groups: list = []
    for v, (_, frontier) in cones.items():
        joined = {owner[u] for u in frontier if u in owner}
        group = [v] + [w for g in sorted(joined) for w in groups[g]]
        for g in joined:
            groups[g] = []
        groups.append(group)
        for w in group:
            for u in cones[w][1]:
                owner[u] = len(groups) - 1
    return [g for g in groups if g]


def _copy_nodes(graph: Graph, nodes: list) -> dict:
    """Copies of ``nodes`` (in order) reading each other's copies; original value -> copied value."""
    copies: dict = {}
    for m in nodes:
        out = m.outputs[0]
        copy = Node(m.op, m.args, dict(m.attrs), origin=m.origin)
        copy.replace_inputs(lambda v: copies.get(v, v))
        copies[out] = graph.new_value(out.shape, out.dtype, out.device, out.kind)
        copies[out].producer = copy
        copy.outputs.append(copies[out])
    return copies


def _nbytes(v) -> int:
    return math.prod(v.shape) * v.dtype.np.itemsize
