"""Fusion: group elementwise chains (with broadcasting) into ``fused`` nodes, one kernel each.

A node can join a group when its op has a rule in the kernel IR
(:data:`~munet.compiler.codegen.kernel.ELEMENTWISE_RULES`), it produces one float tensor of
the group's shape, its tensor operands have its dtype (a ``where`` condition may be bool),
and joining creates no cycle (none of its other operands depends on the group). View ops
(reshape, permute, expand, ...) between a group and its inputs are folded: the group reads
the view's base and the kernel indexes it through the view's strides.

Each group of two or more elementwise nodes becomes one node ``fused(*inputs, group=...)``
whose outputs are the member values used outside the group. ``group.members`` (copies of
the folded views, then the elementwise nodes, in order) still form a runnable graph, which
is how the NumPy plan runs a group where no C compiler exists. Nodes are then re-ordered
topologically (random draws keep their relative order) and dead views are dropped.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from munet.compiler.codegen.kernel import ELEMENTWISE_RULES, short_dtype, view_geometry
from munet.compiler.ir import CONSTANT, Graph, Node, ScalarOp, Value
from munet.compiler.passes.dce import eliminate_dead_code

_ALLOWED_ATTRS = {"cast": {"dtype"}, "threshold_backward": {"threshold"}}
MIN_MEMBERS = 2


class FusedOp:
    """The op of a ``fused`` node (not a registry op: it has no eager kernel)."""

    name = "fused"
    view = None
    writes_planned_outputs = True  # lower_cpu writes each output into its Arena.target

    @staticmethod
    def reads_at_write_index(node, source) -> bool:
        """Whether the group's kernel reads ``source`` only at the index it writes (memory planning)."""
        from munet.compiler.codegen.kernel import kernel_from_group, loads_only_at_write_index

        group = node.attrs["group"]
        if group.kernel is not None:
            kernel, tensors = group.kernel, [v for v in group.inputs if v.kind == "tensor"]
        else:
            try:
                kernel, tensors, _ = kernel_from_group(group)
            except Exception:  # no kernel: the NumPy plan runs, which writes after reading everything
                return False
        return source in tensors and loads_only_at_write_index(kernel, tensors.index(source))

    def __repr__(self) -> str:
        return "<fused>"


FUSED = FusedOp()


@dataclass(eq=False)
class FusedGroup:
    """A fused node's body: ``members`` compute ``outputs`` from ``inputs`` (all graph ``Value`` s)."""

    members: list
    inputs: list
    outputs: list
    shape: tuple
    folded_views: int = 0
    kernel: object = field(default=None, repr=False)  # filled by lowering, for describe()

    def __repr__(self) -> str:
        ops = [m.name for m in self.members if m.op.view is None]
        return f"<{len(ops)} ops: {' '.join(ops)}>"


def _is_view(node) -> bool:
    return (
        node is not None and node.op is not CONSTANT and not isinstance(node.op, ScalarOp) and node.op.view is not None
    )


def _fusible(node: Node) -> bool:
    if node.op is CONSTANT or isinstance(node.op, (ScalarOp, FusedOp)) or node.effectful:
        return False
    if node.name not in ELEMENTWISE_RULES or len(node.outputs) != 1:
        return False
    out = node.outputs[0]
    if out.kind != "tensor" or short_dtype(out.dtype) not in ("f32", "f64") or out.shape is None:
        return False
    if set(node.attrs) - _ALLOWED_ATTRS.get(node.name, set()):
        return False
    if any(isinstance(v, Value) for v in node.attrs.values()):
        return False
    for k, a in enumerate(node.args):
        if isinstance(a, Value):
            if a.kind == "scalar":
                continue
            dt = short_dtype(a.dtype)
            cond = node.name == "where" and k == 0
            if dt is None:
                return False
            if cond and dt != "bool":
                return False
            if not cond and node.name != "cast" and a.dtype is not out.dtype:
                return False
            if not _broadcastable(a.shape, out.shape):
                return False
        elif isinstance(a, bool) or not isinstance(a, (int, float)):
            return False
    return True


def _broadcastable(shape, target) -> bool:
    if shape is None or len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


def _view_chain(v: Value):
    """``(base, [view nodes from base to v])``: the views ``v`` is made of."""
    chain = []
    while isinstance(v, Value) and _is_view(v.producer) and isinstance(v.producer.args[0], Value):
        chain.append(v.producer)
        v = v.producer.args[0]
    return v, chain[::-1]


def fuse_elementwise(graph: Graph) -> int:
    """Replace fusible chains by ``fused`` nodes; returns how many groups were formed."""
    position = {n: i for i, n in enumerate(graph.nodes)}
    grouping = _Grouping(position)
    for node in graph.nodes:
        if _fusible(node):
            grouping.place(node)
    kept = [sorted(g, key=position.get) for g in grouping.groups() if len(g) >= MIN_MEMBERS]
    if not kept:
        return 0
    users = graph.users()
    fused_at = {}
    for members in kept:
        fused_at[members[-1]] = _make_fused_node(graph, members, users)
    dropped = {n for g in kept for n in g}
    nodes = []
    for node in graph.nodes:
        if node in fused_at:
            nodes.append(fused_at[node])
        elif node not in dropped:
            nodes.append(node)
    graph.nodes = _topological(nodes)
    eliminate_dead_code(graph)
    return len(kept)


class _Grouping:
    """Groups as a union-find: a node joins (and merges) the groups of its same-shaped producers.

    A join is refused when it would make a cycle: a group runs as one kernel, so it depends on
    every input of every member; the check walks back from the new operands through outside
    nodes and other groups (no further back than the chosen groups' first member).
    """

    def __init__(self, position: dict):
        self.position = position
        self.parent: list[int] = []
        self.members: dict = {}  # root id -> nodes
        self.group_of: dict = {}  # node -> group id (maybe not a root)

    def find(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def groups(self) -> list:
        return list(self.members.values())

    def _root_of(self, v):
        p = v.producer
        return self.find(self.group_of[p]) if p is not None and p in self.group_of else None

    def _reaches(self, values: list, chosen: set) -> bool:
        """Whether any of ``values`` depends on a member of the ``chosen`` groups."""
        floor = min(self.position[self.members[g][0]] for g in chosen)
        stack, seen, seen_groups = list(values), set(), set()
        while stack:
            p = stack.pop().producer
            if p is None or p in seen or self.position.get(p, -1) < floor:
                continue
            seen.add(p)
            root = self.find(self.group_of[p]) if p in self.group_of else None
            if root is None:
                stack.extend(p.inputs())
            elif root in chosen:
                return True
            elif root not in seen_groups:
                seen_groups.add(root)
                for m in self.members[root]:
                    stack.extend(m.inputs())
        return False

    def _outside_inputs(self, node, chosen: set) -> list:
        return [u for u in node.inputs() if self._root_of(u) not in chosen]

    def _can_merge(self, node, chosen: set) -> bool:
        nodes = [node] + ([m for g in chosen for m in self.members[g]] if len(chosen) > 1 else [])
        return not any(self._reaches(self._outside_inputs(n, chosen), chosen) for n in nodes)

    def place(self, node) -> int:
        """Put ``node`` in a group (merging its producers' groups when that makes no cycle); its id."""
        shape = node.outputs[0].shape
        candidates = []
        for u in node.inputs():
            g = self._root_of(u)
            if g is not None and g not in candidates and self.members[g][0].outputs[0].shape == shape:
                candidates.append(g)
        chosen: set = set()
        if candidates and self._can_merge(node, set(candidates)):
            chosen = set(candidates)
        else:
            for g in candidates:
                if self._can_merge(node, {g}):
                    chosen = {g}
                    break
        if not chosen:
            root = len(self.parent)
            self.parent.append(root)
            self.members[root] = []
        else:
            root = min(chosen)
            for g in chosen - {root}:
                self.parent[g] = root
                self.members[root].extend(self.members.pop(g))
            self.members[root].sort(key=self.position.get)
        self.members[root].append(node)
        self.group_of[node] = root
        return root


def _make_fused_node(graph: Graph, members: list, users: dict) -> Node:
    produced = {n.outputs[0] for n in members}
    inside_uses: dict = {}
    inputs: list = []
    view_copies: list = []
    folded = {}

    def external(v):
        if v not in inputs:
            inputs.append(v)

    def fold(v):
        """The value a member should read for operand ``v`` (a folded view copy, or ``v``)."""
        if v in produced:
            return v
        if v.kind != "tensor":
            external(v)
            return v
        base, chain = _view_chain(v)
        if not chain or base in produced or view_geometry(chain, base) is None:
            external(v)
            return v
        if v in folded:
            return folded[v]
        external(base)
        current = base
        for view in chain:
            copy = Node(view.op, (current,) + tuple(view.args[1:]), dict(view.attrs))
            out = graph.new_value(view.outputs[0].shape, view.outputs[0].dtype, view.outputs[0].device)
            out.producer = copy
            copy.outputs.append(out)
            view_copies.append(copy)
            current = out
        folded[v] = current
        return current

    for node in members:
        for v in node.inputs():
            inside_uses[v] = inside_uses.get(v, 0) + 1
        node.args = tuple(fold(a) if isinstance(a, Value) else a for a in node.args)
    outputs = [v for v in (n.outputs[0] for n in members) if users.get(v, 0) > inside_uses.get(v, 0)]
    group = FusedGroup(view_copies + members, inputs, outputs, members[0].outputs[0].shape, len(folded))
    fused = Node(FUSED, tuple(inputs), {"group": group})
    fused.outputs = list(outputs)
    for v in outputs:
        v.producer = fused
    return fused


def _topological(nodes: list) -> list:
    """Stable topological order: ready nodes in their current order; random draws keep theirs."""
    position = {n: i for i, n in enumerate(nodes)}
    producer = {v: n for n in nodes for v in n.outputs}
    needs: dict = {n: set() for n in nodes}
    previous_effect = None
    for n in nodes:
        for v in n.inputs():
            p = producer.get(v)
            if p is not None and p is not n:
                needs[n].add(p)
        if n.effectful:
            if previous_effect is not None:
                needs[n].add(previous_effect)
            previous_effect = n
    waiting = {n: len(needs[n]) for n in nodes}
    consumers: dict = {n: [] for n in nodes}
    for n, ps in needs.items():
        for p in ps:
            consumers[p].append(n)
    ready = [(position[n], n) for n in nodes if waiting[n] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(n)
        for c in consumers[n]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, (position[c], c))
    if len(order) != len(nodes):
        raise RuntimeError("fuse_elementwise: fusion created a cycle (a fusion bug)")
    return order
