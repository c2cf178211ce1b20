"""One lowered program for every size of a dynamic dim: matching a new trace to a cached program,
and the program's graph at the new sizes.

A compiled function whose dims became dynamic (``munet.compile(dynamic=...)``) still traces each
new shape: running the Python is what decides the graph (Python branches on sizes, munet's own
size-1 broadcasting and empty-tensor paths). What it no longer repeats is everything after that.
The traced graph (after composites are decomposed, which reads sizes too) is described without
its sizes (``breaks.segment_signature(graph, layout, sizes)``: ints of 2 or more in shapes,
attributes and arguments); a cached :class:`Program` with the same description was optimized and
fused from a graph of the same structure. :func:`size_renaming` pairs the two graphs' sizes in
order: the new graph is the old one at new sizes when the pairing is a renaming, each old size
always becoming the same new size and two different old sizes never becoming one (so every
equality between sizes a pass or the fusion decided on holds again; sizes 0 and 1 are never
renamed: a graph with them is its own structure, as PyTorch specializes them).
:func:`resized_graph` then copies the program's optimized graph with each renamed size replaced,
keeping its fusion groups; lowering it re-plans the memory and reuses the groups' kernels
(``lower_cpu.prepare_fused``). A compiled module's joint graph (``joint.py``: its forward and
backward, traced with cotangent inputs) is a traced graph like any other; its :class:`Program` is
the pair of programs the partition made, both copied: the forward's extra outputs and the
backward's first inputs, the values saved between them, take the new sizes too.

What the passes wrote that the trace did not is where a renaming could be wrong: a literal a pass
computed from a size (a folded constant, a float) is not a size the renaming can see.
:meth:`Program.refusal` therefore refuses a renaming that changes a size occurring in more distinct
nodes of the optimized graphs than of the traced graph (:func:`literals`: copies of a node, which the
fusion and the backward's recomputation make, count once), and refuses programs
whose passes made float literals the trace did not have, or constants the trace did not have that
are neither zeros and ones (made at the new shape) nor folded (``passes/fold.py`` keeps the node a
constant was evaluated from: it is evaluated again with its sizes renamed, so a causal mask of
``(time, time)`` is made at the new length); a refused call is optimized from its own graph, as before
(``stats()["last_reuse_refusal"]`` says why).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from munet.compiler.ir import CONSTANT, Graph, Node, Value
from munet.compiler.passes.fold import evaluate
from munet.compiler.passes.fuse import FUSED, FusedGroup


def size_renaming(old: list, new: list) -> dict | None:
    """``{old size: new size}`` for the sizes that changed, pairing ``old`` and ``new`` in order, or
    None when the pairing is not a renaming (an old size becoming two new ones, or two old sizes one)."""
    forward: dict = {}
    backward: dict = {}
    for a, b in zip(old, new):
        if forward.setdefault(a, b) != b or backward.setdefault(b, a) != a:
            return None
    return {a: b for a, b in forward.items() if a != b}


class Program:
    """A cached optimized graph, with what matching a new trace against it needs. A compiled module's
    joint graph (``joint.py``) is cached as its two programs after the partition: ``graph`` is the
    forward (its outputs end with the values it saves), ``backward`` the backward (its inputs are the
    saved values, then the cotangents of the traced graph), ``n_saved`` how many values are saved."""

    def __init__(
        self,
        traced_inputs: list,
        sizes: list,
        traced_literals: tuple,
        graph: Graph,
        pass_report: dict,
        backward: Graph | None = None,
        n_saved: int = 0,
    ):
        self.traced_inputs = traced_inputs  # the traced graph's inputs, in order
        self.sizes = sizes  # the traced graph's sizes (segment_signature order)
        self.graph = graph  # optimized and fused
        self.backward, self.n_saved = backward, n_saved
        self.pass_report = pass_report
        graphs = [graph] if backward is None else [graph, backward]
        ints, floats, constants = traced_literals
        optimized_ints, optimized_floats, _ = literals(*graphs)
        self._extra_ints = optimized_ints - ints  # distinct nodes holding the int that the passes added
        self._made_literals = bool(optimized_floats - floats)
        self._constant_sizes: set = set()  # dims of traced constants that are not zeros or ones
        for node in (node for g in graphs for node in _all_nodes(g)):
            if node.op is not CONSTANT or _fill(node.constant) in (0, 1):
                continue  # zeros and ones are made at any shape (resized_graph)
            if _constant_key(node.constant) in constants:
                self._constant_sizes.update(np.shape(node.constant))
            elif node.folded_from is None:
                self._made_literals = True
            # else: folded by the passes, folded again at the new sizes (resized_graph)

    def refusal(self, renaming: dict) -> str | None:
        """Why the optimized graph cannot be renamed with ``renaming``, or None when it can."""
        if self._made_literals:
            return "the passes made float literals, or constants not folded from the trace, that the trace did not hold"
        for size in renaming:
            if size in self._constant_sizes:
                return f"a traced constant has a dim of size {size}, which changed"
            if self._extra_ints[size]:
                return f"the passes wrote the int {size} where the trace did not, and that size changed"
        return None


_PLAIN = (int, float, bool, str, type(None))  # literals a node is told apart by (others: by type)


def literals(*graphs: Graph) -> tuple:
    """(Counter of the ints of 2 or more, set of the floats, set of the constants' bytes) in the
    arguments and attributes of ``graphs``' nodes and of their fused groups' members.

    The ints are counted once per distinct node: nodes of the same op with the same literals count
    once, so the copies the optimization makes of a node (a view a fused kernel or the backward
    recomputes, ``passes/remat.py``) are not ints it wrote; a node it made with new literals is."""
    ints: Counter = Counter()
    floats: set = set()
    constants: set = set()
    distinct: set = set()
    for node in (node for graph in graphs for node in _all_nodes(graph)):
        if node.op is CONSTANT:
            constants.add(_constant_key(node.constant))
            continue
        leaves = tuple(_leaves((node.args, {k: v for k, v in node.attrs.items() if k != "group"})))
        key = (node.op, tuple(leaf if type(leaf) in _PLAIN else type(leaf) for leaf in leaves))
        if key in distinct:
            continue
        distinct.add(key)
        for leaf in leaves:
            if type(leaf) is int and leaf >= 2:
                ints[leaf] += 1
            elif type(leaf) is float:
                floats.add(repr(leaf))
    return ints, floats, constants


def resized_graph(graph: Graph, renaming: dict, inputs: dict) -> Graph:
    """A copy of optimized ``graph`` with every size in ``renaming`` renamed, in shapes, arguments and
    attributes (fused groups' members included); ``inputs`` maps its input values to the new graph's.
    An input it does not map (a value a backward program reads from its forward: ``Program``) becomes a
    new input of the copy, its shape renamed. Each copied group points to the group it copies
    (``FusedGroup.template``)."""
    copy = Graph()
    values = dict(inputs)
    changed = set(renaming)

    def rename(obj, value=values.__getitem__):
        if isinstance(obj, Value):
            return value(obj)
        if type(obj) is int:
            return renaming.get(obj, obj)
        if isinstance(obj, (list, tuple)):
            return type(obj)(rename(x, value) for x in obj)
        if isinstance(obj, dict):
            return {k: rename(v, value) for k, v in obj.items()}
        return obj

    def rename_literals(obj):  # the sizes in ``obj``, its values kept (constant folding's arguments)
        return rename(obj, lambda v: v)

    def defined(v: Value, producer: Node) -> Value:
        shape = None if v.shape is None else tuple(renaming.get(s, s) for s in v.shape)
        new = values.get(v)
        if new is None:
            new = values[v] = copy.new_value(shape, v.dtype, v.device, v.kind)
            new.label = v.label
        new.producer = producer
        return new

    def copied(node: Node) -> Node:
        attrs = {k: (copied_group(v) if k == "group" else rename(v)) for k, v in node.attrs.items()}
        new = Node(node.op, rename(node.args), attrs, constant=node.constant, origin=node.origin)
        new.outputs = [defined(v, new) for v in node.outputs]
        if node.op is CONSTANT and node.folded_from is not None and _ingredients(node.folded_from) & changed:
            new.constant = refolded(node.outputs[0])
        elif node.op is CONSTANT and new.outputs[0].shape != np.shape(node.constant):  # a fill (Program)
            new.constant = np.full(new.outputs[0].shape, _fill(node.constant), np.asarray(node.constant).dtype)
        return new

    folded: dict = {}  # a node constant folding evaluated -> its outputs' arrays at the new sizes

    def refolded(v: Value):
        """The array of constant ``v`` at the new sizes: its folded node evaluated again, renamed."""
        node = v.producer
        source = node.folded_from
        if source is None or not _ingredients(source) & changed:
            return node.constant
        if source not in folded:
            inputs = {u: refolded(u) for u in source.inputs()}
            folded[source] = evaluate(source, rename_literals(source.args), rename_literals(source.attrs), inputs)
        return folded[source][_folded_output(node)]

    def copied_group(group: FusedGroup) -> FusedGroup:
        members = [copied(m) for m in group.members]
        return FusedGroup(
            members,
            [values[v] for v in group.inputs],
            [values[v] for v in group.outputs],
            tuple(renaming.get(s, s) for s in group.shape),
            group.folded_views,
            reduce_dims=group.reduce_dims,
            template=group,
        )

    copy._next_id = max((inputs[v].id for v in graph.inputs if v in inputs), default=-1) + 1
    for v in graph.inputs:
        if v not in values:
            shape = None if v.shape is None else tuple(renaming.get(s, s) for s in v.shape)
            values[v] = copy.new_value(shape, v.dtype, v.device, v.kind)
            values[v].source, values[v].label = v.source, v.label
    copy.inputs = [values[v] for v in graph.inputs]
    for node in graph.nodes:
        copy.nodes.append(copied(node))  # a fused node's outputs are its members' values: it produces them
    copy.outputs = [values[v] for v in graph.outputs]
    return copy


def size_symbols(renaming: dict, max_bases: int = 3) -> tuple | None:
    """How the sizes ``renaming`` changes (``{old: new}``) follow from a few of them, the *bases*:
    ``(sizes, terms, n_bases)``, the bases first, ``terms[i] = (coefficient, powers)`` saying size ``i``
    is ``coefficient * prod(base ** power)`` at its old and at its new value (a ``batch * time`` of 27
    becoming 36 beside a time of 9 becoming 12 is ``3 * time``), or None beyond ``max_bases`` bases.
    Two values agreeing is evidence, not proof: a kernel built on it is checked at every size it
    serves (``c_symbolic.counts_for``)."""
    bases: list = []
    derived: list = []
    for old in sorted(renaming):
        new = renaming[old]
        term = _as_product(old, new, bases, renaming)
        if term is None:
            if len(bases) == max_bases:
                return None
            bases.append(old)
        else:
            derived.append((old, term))
    n = len(bases)
    unit = [(1, tuple(int(i == j) for j in range(n))) for i in range(n)]
    terms = unit + [(c, tuple(powers) + (0,) * (n - len(powers))) for _, (c, powers) in derived]
    return tuple(bases) + tuple(old for old, _ in derived), tuple(terms), n


def _as_product(old: int, new: int, bases: list, renaming: dict):
    """``(coefficient, powers)`` with ``old`` and ``new`` that product of one or two of ``bases`` (at their
    old and new values) times the same coefficient, else None."""
    for picked in [(i,) for i in range(len(bases))] + [(i, j) for i in range(len(bases)) for j in range(i, len(bases))]:
        before = math.prod(bases[i] for i in picked)
        after = math.prod(renaming[bases[i]] for i in picked)
        if old % before == 0 and new == old // before * after:
            powers = [0] * len(bases)
            for i in picked:
                powers[i] += 1
            return old // before, tuple(powers)
    return None


def resized_group(group: FusedGroup, renaming: dict) -> FusedGroup:
    """A copy of fused ``group`` with every size in ``renaming`` renamed, over new input values (its
    kernel at other sizes: ``codegen/c_symbolic.py`` builds it at sentinel sizes)."""
    graph = Graph()
    graph.inputs = list(group.inputs)
    node = Node(FUSED, tuple(group.inputs), {"group": group})
    node.outputs = list(group.outputs)
    graph.nodes = [node]
    return resized_graph(graph, renaming, {}).nodes[0].attrs["group"]


def group_renaming(template: FusedGroup, group: FusedGroup) -> dict | None:
    """``{size: new size}`` from fused ``template`` to ``group``, a copy of it at new sizes
    (:func:`resized_graph`), over the sizes of their values and the literals of their members."""
    return size_renaming(group_sizes(template), group_sizes(group))


def group_sizes(group: FusedGroup) -> list:
    """The sizes (ints of 2 or more) of fused ``group``'s values and of its members' literals, in order."""
    sizes = [s for v in group.inputs if v.shape is not None for s in v.shape]
    for node in group.members:
        sizes += [s for v in node.outputs if v.shape is not None for s in v.shape]
        sizes += [leaf for leaf in _leaves((node.args, node.attrs)) if type(leaf) is int]
    return [s for s in sizes if s >= 2]


def _constant_key(constant) -> tuple:
    array = np.asarray(constant)
    return array.shape, str(array.dtype), array.tobytes()


def _fill(constant):
    """The value every element of ``constant`` has, or None (it holds two values, or is empty)."""
    array = np.asarray(constant)
    if array.size == 0:
        return None
    first = array.reshape(-1)[0]
    return first.item() if np.all(array == first) else None


def _folded_output(constant: Node) -> int:
    """Which output of the node it was folded from ``constant`` holds: its own value, or for the copy
    a backward program holds of a forward's constant (``joint.partition``), the one of the same array."""
    outputs = constant.folded_from.outputs
    if constant.outputs[0] in outputs:
        return outputs.index(constant.outputs[0])
    return next(k for k, v in enumerate(outputs) if v.producer.constant is constant.constant)


def _ingredients(node: Node) -> set:
    """The ints of 2 or more a folded constant was computed from: its node's arguments and attributes,
    and those of the folded constants it read."""
    found = {leaf for leaf in _leaves((node.args, node.attrs)) if type(leaf) is int and leaf >= 2}
    for v in node.inputs():
        if v.producer is not None and v.producer.folded_from is not None:
            found |= _ingredients(v.producer.folded_from)
    return found


def _all_nodes(graph: Graph):
    for node in graph.nodes:
        yield node
        if node.op is FUSED:
            yield from node.attrs["group"].members


def _leaves(obj):
    if isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _leaves(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _leaves(x)
    elif not isinstance(obj, Value):
        yield obj
