"""Fusion: group elementwise chains (with broadcasting) and reductions into ``fused`` nodes, one kernel each.

A node can join a group when its op has a rule in the kernel IR
(:data:`~munet.compiler.codegen.kernel.ELEMENTWISE_RULES`), it produces one tensor of the
group's shape whose dtype the device's fused kernels hold (float32/float64, and the
``fused_dtypes`` its compile target declares: int64 and bool on cpu and cuda), its value
operands share one dtype (a ``where`` condition is bool), its rule yields the output's dtype,
and joining creates no cycle (none of its other operands depends on the group). View ops
(reshape, permute, expand, ...) between a group and its inputs are folded: the group reads
the view's base and the kernel indexes it through the view's strides.

A reduction (``sum``, ``amax`` over dims of a float tensor, more than one element reduced)
starts or joins a *reduction group*: its elementwise producers of the reduction's input shape
join as the prologue (read inside the reduction loop; those used elsewhere are also stored at
full shape), and later elementwise consumers of the reduced shape (up to size-1 dims, also
through views that keep the element order, such as ``view(1, C) -> (C,)``) join as the
epilogue: ``sum(x) / n``, a bias's AdamW update from its gradient sum. Several reductions with
the same input shape and dims share a group when one group would read both (``sum(a) / sum(b)``).
A node of the input shape that reads a reduced value (``x - max(x)``) does not join: that needs
a second pass over the input. A group's kernel is one reduction kernel (``codegen/kernel.py``).

Each group of two or more nodes (or of one large elementwise node reading a broadcast operand,
``_lone_broadcast``) becomes one node ``fused(*inputs, group=...)``
whose outputs are the member values used outside the group. ``group.members`` (copies of
the folded views, then the elementwise nodes, in order) still form a runnable graph, which
is how the NumPy plan runs a group where no C compiler exists. Nodes are then re-ordered
topologically (random draws keep their relative order) and dead views are dropped.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from munet._device import DeviceError, compile_target
from munet.compiler.codegen.kernel import (
    ELEMENTWISE_RULES,
    REDUCTIONS,
    Apply,
    Load,
    Param,
    contiguous_strides,
    short_dtype,
    view_geometry,
)
from munet.compiler.ir import CONSTANT, Graph, Node, ScalarOp, Value
from munet.compiler.passes.dce import eliminate_dead_code
from munet.ops._scalar import INT, SCALAR_OPS
from munet.ops._scalar import kind as dtype_kind

_ALLOWED_ATTRS = {"cast": {"dtype"}}
MIN_MEMBERS = 2
# A lone elementwise node this large that reads a broadcast operand (a bias added to a matmul's output,
# a softmax's division by its row sums) is a group of its own (``_lone_broadcast``).
LONE_MIN_ELEMENTS = 1 << 16


class FusedOp:
    """The op of a ``fused`` node (not a registry op: it has no eager kernel)."""

    name = "fused"
    view = None
    writes_planned_outputs = True  # lower_cpu writes each output into its Arena.target

    @staticmethod
    def reads_at_write_index(node, source) -> bool:
        """Whether the group's kernel reads ``source`` only at the index it writes (memory planning)."""
        from munet.compiler.codegen.kernel import loads_only_at_write_index, unnamed_kernel_of_group

        group = node.attrs["group"]
        if group.kernel is not None:
            kernel, tensors = group.kernel, [v for v in group.inputs if v.kind == "tensor"]
        else:
            try:
                kernel, tensors, _ = unnamed_kernel_of_group(group)
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
    shape: tuple  # the output shape; for a reduction group, the reductions' input shape
    folded_views: int = 0
    kernel: object = field(default=None, repr=False)  # filled by lowering, for describe()
    reduce_dims: tuple = ()  # a reduction group's reduced dims (of ``shape``)
    recomputed: int = 0  # members copied from a producer kernel instead of loading its outputs (passes/remat.py)
    built: object = field(default=None, repr=False)  # kernel_from_group's result, made once
    template: object = field(default=None, repr=False)  # the group this one copies at new sizes (resize.py)
    rendered: object = field(default=None, repr=False)  # how lowering rendered its kernel, for copies of it

    def __repr__(self) -> str:
        ops = [m.name for m in self.members if m.op.view is None]
        again = f" ({self.recomputed} recomputed)" if self.recomputed else ""
        return f"<{len(ops)} ops: {' '.join(ops)}{again}>"


def _is_view(node) -> bool:
    return (
        node is not None and node.op is not CONSTANT and not isinstance(node.op, ScalarOp) and node.op.view is not None
    )


FLOAT_DTYPES = ("f32", "f64")


def _fused_dtypes(device) -> tuple:
    """The kernel-IR dtypes a fused kernel on ``device`` may hold: the floats, plus the exact
    dtypes (bool, int64) its compile target declares (``CompileTarget.fused_dtypes``)."""
    try:
        target = compile_target(device)
    except DeviceError:
        return FLOAT_DTYPES
    return FLOAT_DTYPES + tuple(getattr(target, "fused_dtypes", ()))


def _applies(expr) -> list:
    """The distinct scalar ops (:class:`Apply` nodes) of expression ``expr``."""
    found, stack, seen = [], [expr], set()
    while stack:
        e = stack.pop()
        if e in seen or not isinstance(e, Apply):
            continue
        seen.add(e)
        found.append(e)
        stack.extend(e.args)
    return found


def _operand_kind(e) -> str:
    return dtype_kind(e.args[1].dtype if e.op == "where" else e.args[0].dtype)


def _divides_integers(applies: list) -> bool:
    """Whether an integer ``floor_divide``/``fmod`` is among ``applies`` (a zero divisor must raise)."""
    return any(e.op in ("floor_divide", "fmod") and _operand_kind(e) == INT for e in applies)


def _member_expression(node: Node, out_dtype: str):
    """The node's rule applied to placeholder loads of its operands, or None when it has none."""
    args = []
    for k, a in enumerate(node.args):
        if isinstance(a, Value):
            args.append(Param(k, out_dtype) if a.kind == "scalar" else Load(k, (), 0, short_dtype(a.dtype)))
        else:
            args.append(a)
    try:
        return ELEMENTWISE_RULES[node.name](node, args, out_dtype)
    except (TypeError, ValueError, KeyError):
        return None


def _fusible(node: Node) -> bool:
    """Whether ``node`` may join an elementwise group (see the module docstring).

    Its output and tensor operands have dtypes its device's fused kernels hold; its value
    operands share one dtype (a ``where`` condition is bool; a ``cast`` converts), so the
    formula computes in it; its rule yields the output's dtype (a comparison: bool); a run-time
    scalar operand only where every tensor operand has the output's dtype (the kernel reads it as
    that dtype); an integer division only where the target reports a zero divisor
    (``CompileTarget.fuses_integer_division``).
    """
    if node.op is CONSTANT or isinstance(node.op, (ScalarOp, FusedOp)) or node.effectful:
        return False
    if node.name not in ELEMENTWISE_RULES or len(node.outputs) != 1:
        return False
    out = node.outputs[0]
    if out.kind != "tensor" or out.shape is None:
        return False
    allowed = _fused_dtypes(out.device)
    out_dtype = short_dtype(out.dtype)
    if out_dtype not in allowed:
        return False
    if node.op.formula is None and set(node.attrs) - _ALLOWED_ATTRS.get(node.name, set()):
        return False  # a formula reads its attrs (static numbers: the kernel's literals)
    if any(isinstance(v, Value) for v in node.attrs.values()):
        return False
    value_dtypes, scalars = set(), False
    for k, a in enumerate(node.args):
        if isinstance(a, Value):
            if a.kind == "scalar":
                scalars = True
                continue
            dt = short_dtype(a.dtype)
            if dt not in allowed or not _broadcastable(a.shape, out.shape):
                return False
            if node.name == "where" and k == 0:
                if dt != "bool":
                    return False
            else:
                value_dtypes.add(dt)
        elif isinstance(a, bool) or not isinstance(a, (int, float)):
            return False
        elif isinstance(a, int) and abs(a) > 2**53:
            return False  # a literal holds a float64: eager computes with the exact integer
    if len(value_dtypes) > 1 or (scalars and value_dtypes - {out_dtype}):
        return False
    expr = _member_expression(node, out_dtype)
    if expr is None or getattr(expr, "dtype", None) != out_dtype:
        return False
    applies = _applies(expr)
    if any(_operand_kind(e) not in SCALAR_OPS[e.op].kinds for e in applies):
        return False  # the formula was written for promoted operands (an integer true division)
    if _divides_integers(applies) and not getattr(compile_target(out.device), "fuses_integer_division", False):
        return False
    return True


def _reducible(node: Node) -> bool:
    """A ``sum``/``amax`` of one float tensor over dims reducing more than one element, none empty."""
    if node.op is CONSTANT or isinstance(node.op, (ScalarOp, FusedOp)) or node.effectful:
        return False
    if (
        node.name not in REDUCTIONS
        or len(node.outputs) != 1
        or len(node.args) != 1
        or set(node.attrs) != {"dims", "keepdim"}
    ):
        return False
    x, out = node.args[0], node.outputs[0]
    if not isinstance(x, Value) or x.kind != "tensor" or x.shape is None or out.kind != "tensor":
        return False
    if short_dtype(out.dtype) not in ("f32", "f64") or x.dtype is not out.dtype:
        return False
    dims = node.attrs["dims"]
    if not dims or 0 in x.shape or _numel(x.shape[d] for d in dims) < 2:
        return False
    return True


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _squeezed(shape) -> tuple:
    return tuple(s for s in shape if s != 1)


def _kept(full, dims) -> tuple:
    """The reduced shape without size-1 dims: what a reduction group's epilogue members have."""
    return tuple(s for d, s in enumerate(full) if d not in dims and s != 1)


def _keeps_order(chain, base) -> bool:
    """Whether view nodes ``chain`` of ``base`` only reshape it (element k of the view is element k of base)."""
    geometry = view_geometry(chain, base)
    if geometry is None:
        return False
    shape, strides, offset = geometry
    return (
        offset == 0
        and _numel(shape) == _numel(base.shape)
        and all(a == b for a, b, s in zip(strides, contiguous_strides(shape), shape) if s != 1)
    )


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


def transpose_matmul_outputs(graph: Graph) -> int:
    """``matmul(a, b)`` read only through a transpose of its last two dims becomes ``matmul(b^T, a^T)``.

    A weight gradient is ``(x^T @ g)^T``; the optimizer's fused update then reads it transposed,
    which on a (1024, 1024) matrix costs more than all the update's arithmetic (a strided walk
    through 4 KiB rows). ``g^T @ x`` is the same product written in the weight's layout: BLAS
    takes the transposed operands as flags, so nothing is copied. Returns how many were rewritten.
    """
    from munet.ops._registry import OPS

    readers: dict = {}
    for node in graph.nodes:
        for v in node.inputs():
            readers.setdefault(v, []).append(node)
    returned = set(graph.outputs)
    mapping: dict = {}
    nodes: list = []
    for node in graph.nodes:
        swap = _transposed_only(node, readers, returned)
        if swap is None:
            nodes.append(node)
            continue
        a, b = node.args
        operands = []
        for v in (b, a):
            if _is_view(v.producer) and v.producer.name == "permute" and tuple(v.producer.attrs["dims"]) == swap:
                operands.append(v.producer.args[0])
                continue
            shape = v.shape[:-2] + (v.shape[-1], v.shape[-2])
            view = Node(OPS["permute"], (v,), {"dims": swap}, [graph.new_value(shape, v.dtype, v.device)])
            view.outputs[0].producer = view
            nodes.append(view)
            operands.append(view.outputs[0])
        m = node.outputs[0]
        product = Node(
            node.op,
            tuple(operands),
            {},
            [graph.new_value(m.shape[:-2] + (m.shape[-1], m.shape[-2]), m.dtype, m.device)],
        )
        product.outputs[0].producer = product
        nodes.append(product)
        for reader in readers[m]:
            mapping[reader.outputs[0]] = product.outputs[0]
    if not mapping:
        return 0
    graph.nodes = nodes
    graph.replace_uses(mapping)
    eliminate_dead_code(graph)
    return len({v.producer for v in mapping.values()})


def _transposed_only(node, readers: dict, returned: set):
    """The dims of the last-two-dims transpose when ``node`` is a matmul of equal-rank tensors read only through it."""
    if node.name != "matmul" or node.attrs or len(node.args) != 2 or len(node.outputs) != 1:
        return None
    a, b = node.args
    m = node.outputs[0]
    if not all(isinstance(v, Value) and v.kind == "tensor" and v.shape is not None for v in (a, b)):
        return None
    rank = len(m.shape)
    if rank < 2 or len(a.shape) != rank or len(b.shape) != rank or a.shape[:-2] != b.shape[:-2] or m in returned:
        return None
    swap = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    users = readers.get(m, [])
    if not users or any(u.name != "permute" or tuple(u.attrs.get("dims", ())) != swap for u in users):
        return None
    if any(_reads_layout(u.outputs[0], readers) for u in users):
        return None
    return swap


# Views whose geometry depends on their input's strides, not only its shape: ``view`` (a reshape that
# must not copy) and ``as_strided`` (absolute strides). The trace checked them against the layout the
# permute has; a turned-around matmul changes that layout (the permute becomes contiguous).
_LAYOUT_VIEWS = ("view", "as_strided")


def _reads_layout(v: Value, readers: dict) -> bool:
    """Whether a view reading ``v`` (directly or through other views) depends on ``v``'s strides.

    ``x.reshape(L, N * H, d).transpose(0, 1).view(N, H, L, d)`` (multi-head attention's layout) has
    such a view in its gradient: ``grad.view(N * H, L, d).transpose(0, 1).view(L, N, E)`` is valid
    for the strides of ``permute(matmul)``, not for those of the contiguous turned-around product.
    """
    for reader in readers.get(v, []):
        if not _is_view(reader):
            continue
        if reader.name in _LAYOUT_VIEWS or _reads_layout(reader.outputs[0], readers):
            return True
    return False


def fuse_elementwise(graph: Graph) -> int:
    """Replace fusible chains by ``fused`` nodes; returns how many groups were formed.

    First, matmuls whose product is read only transposed are turned around
    (:func:`transpose_matmul_outputs`), so the groups that read them read contiguous memory.
    """
    transpose_matmul_outputs(graph)
    position = {n: i for i, n in enumerate(graph.nodes)}
    grouping = _Grouping(position)
    for node in graph.nodes:
        if _fusible(node) or _reducible(node):
            grouping.place(node)
    kept = [
        (sorted(g, key=position.get), kind)
        for g, kind in grouping.groups()
        if len(g) >= MIN_MEMBERS or _lone_broadcast(g, kind)
    ]
    if not kept:
        return 0
    users = graph.users()
    fused_at = {}
    for members, kind in kept:
        fused_at[members[-1]] = _make_fused_node(graph, members, users, kind)
    dropped = {n for g, _ in kept for n in g}
    nodes = []
    for node in graph.nodes:
        if node in fused_at:
            nodes.append(fused_at[node])
        elif node not in dropped:
            nodes.append(node)
    graph.nodes = _topological(nodes)
    eliminate_dead_code(graph)
    return len(kept)


def _lone_broadcast(members: list, kind: tuple) -> bool:
    """Whether a group of one elementwise node is kept: it has ``LONE_MIN_ELEMENTS`` elements or more
    and reads a tensor operand broadcast to its shape. Its kernel is one loop nest reading that operand
    at stride 0 and writing the result in place of another operand where the memory plan allows."""
    if len(members) != 1 or kind[1]:
        return False
    out = members[0].outputs[0]
    if _numel(out.shape) < LONE_MIN_ELEMENTS:
        return False
    for a in members[0].args:
        if isinstance(a, Value) and a.kind == "tensor":
            base = _view_chain(a)[0]
            if _numel(a.shape) < _numel(out.shape) or _numel(base.shape) < _numel(out.shape):
                return True
    return False


class _Grouping:
    """Groups as a union-find: a node joins (and merges) the groups of its producers that fit it.

    A group's kind is ``(shape, ())`` for an elementwise group, ``(input shape, dims)`` for a
    reduction group. A join is refused when it would make a cycle: a group runs as one kernel,
    so it depends on every input of every member; the check walks back from the new operands
    through outside nodes and other groups (no further back than ``_floor``).
    """

    def __init__(self, position: dict):
        self.position = position
        # each node's operands, read once: the cycle check reads them at every join it tries
        self.inputs_of = {node: node.inputs() for node in position}
        # per value read through views: (base, view chain), and whether the chain keeps the base's order
        self._views: dict = {}
        self._keeps_order: dict = {}
        self.parent: list[int] = []
        self.members: dict = {}  # root id -> nodes
        self.kind: dict = {}  # root id -> (shape, reduce dims)
        self.group_of: dict = {}  # node -> group id (maybe not a root)
        self._reductions: set = set()  # placed reduction nodes

    def find(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def groups(self) -> list:
        return [(members, self.kind[root]) for root, members in self.members.items()]

    def _root_of(self, v):
        p = v.producer
        return self.find(self.group_of[p]) if p is not None and p in self.group_of else None

    def _reduced_source(self, v):
        """``(root, base)`` when ``v`` is a reduced-shape value of a reduction group seen through views that keep its order."""
        views = self._views.get(v)
        if views is None:
            views = self._views[v] = _view_chain(v)
        base, chain = views
        root = self._root_of(base) if chain else None
        if root is None:
            return None
        full, dims = self.kind[root]
        if not dims or _squeezed(base.shape) != _kept(full, dims):
            return None
        keeps = self._keeps_order.get(v)
        if keeps is None:
            keeps = self._keeps_order[v] = _keeps_order(chain, base)
        return (root, base) if keeps else None

    def _floor(self, chosen: set) -> int:
        """A position before which nothing depends on the ``chosen`` groups: their first member's,
        lowered to the first member of every group that straddles it (a node before a group's
        first member can depend on it only through a group reaching back past it)."""
        floor = min(self.position[self.members[g][0]] for g in chosen)
        position = self.position  # a group of one member straddles nothing
        spans = sorted(((position[m[0]], position[m[-1]]) for m in self.members.values() if len(m) > 1), reverse=True)
        for first, last in spans:  # descending firsts: a span passed never straddles a lower floor
            if first < floor <= last:
                floor = first
        return floor

    def _reaches(self, values: list, chosen: set, floor: int) -> bool:
        """Whether any of ``values`` depends on a member of the ``chosen`` groups (``floor``: ``_floor(chosen)``)."""
        stack, seen, seen_groups = list(values), set(), set()
        while stack:
            p = stack.pop().producer
            if p is None or p in seen or self.position.get(p, -1) < floor:
                continue
            seen.add(p)
            root = self.find(self.group_of[p]) if p in self.group_of else None
            if root is None:
                stack.extend(self.inputs_of[p])
            elif root in chosen:
                return True
            elif root not in seen_groups:
                seen_groups.add(root)
                for m in self.members[root]:
                    stack.extend(self.inputs_of[m])
        return False

    def _inside(self, u, chosen: set) -> bool:
        if self._root_of(u) in chosen:
            return True
        source = self._reduced_source(u)
        return source is not None and source[0] in chosen

    def _outside_inputs(self, node, chosen: set) -> list:
        return [u for u in self.inputs_of[node] if not self._inside(u, chosen)]

    def _merged_kind(self, kind: tuple, chosen: set) -> tuple:
        if kind[1]:
            return kind
        return next((self.kind[g] for g in chosen if self.kind[g][1]), kind)

    def _can_merge(self, node, chosen: set, kind: tuple) -> bool:
        nodes = [node] + ([m for g in chosen for m in self.members[g]] if len(chosen) > 1 else [])
        floor = self._floor(chosen)
        # one walk from all their outside inputs: it reaches the chosen groups when any one walk would
        if self._reaches([u for n in nodes for u in self._outside_inputs(n, chosen)], chosen, floor):
            return False
        full, dims = self._merged_kind(kind, chosen)
        if not dims:
            return True
        # inside the reduction loop (full-shape members, reductions) nothing may read a reduced value
        everyone = [node, *(m for g in chosen for m in self.members[g])]
        for n in everyone:
            if n in self._reductions or tuple(n.outputs[0].shape) == full:
                if any(self._inside(u, chosen) and tuple(u.shape) != full for u in self.inputs_of[n]):
                    return False
        return True

    def _fits(self, node, g: int) -> bool:
        """Whether every operand ``node`` reads from group ``g`` has the shape ``node``'s role in it needs."""
        full, dims = self.kind[g]
        if node in self._reductions:
            x = node.args[0]
            return tuple(x.shape) == full and (not dims or dims == tuple(node.attrs["dims"]))
        shape = tuple(node.outputs[0].shape)
        for u in self.inputs_of[node]:
            if self._root_of(u) == g:
                if not dims:
                    ok = shape == full
                elif shape == full:  # a full-shape member: reads only full-shape members
                    ok = tuple(u.shape) == full
                else:  # an epilogue member: reads reduced-shape members
                    ok = _squeezed(shape) == _kept(full, dims) and _squeezed(u.shape) == _kept(full, dims)
            else:
                source = self._reduced_source(u)
                if source is None or source[0] != g:
                    continue
                ok = _squeezed(shape) == _kept(full, dims)
            if not ok:
                return False
        return True

    def _candidates(self, node) -> list:
        found = []
        for u in self.inputs_of[node]:
            g = self._root_of(u)
            if g is None:
                source = self._reduced_source(u)
                g = None if source is None else source[0]
            if g is not None and g not in found and self._fits(node, g):
                found.append(g)
        reductions = [g for g in found if self.kind[g][1]]
        if reductions:  # one reduction space per group
            want = self.kind[reductions[0]]
            found = [g for g in found if not self.kind[g][1] or self.kind[g] == want]
        return found

    def place(self, node) -> int:
        """Put ``node`` in a group (merging its producers' groups when that makes no cycle); its id."""
        if node.name in REDUCTIONS and _reducible(node):
            self._reductions.add(node)
            kind = (tuple(node.args[0].shape), tuple(node.attrs["dims"]))
        else:
            kind = (tuple(node.outputs[0].shape), ())
        candidates = self._candidates(node)
        chosen: set = set()
        if candidates and self._can_merge(node, set(candidates), kind):
            chosen = set(candidates)
        else:
            for g in candidates:
                if self._can_merge(node, {g}, kind):
                    chosen = {g}
                    break
        new_kind = self._merged_kind(kind, chosen)
        if not chosen:
            root = len(self.parent)
            self.parent.append(root)
            self.members[root] = []
        else:
            root = min(chosen)
            for g in chosen - {root}:
                self.parent[g] = root
                self.members[root].extend(self.members.pop(g))
                del self.kind[g]
            self.members[root].sort(key=self.position.get)
        self.kind[root] = new_kind
        self.members[root].append(node)
        self.group_of[node] = root
        return root


def _make_fused_node(graph: Graph, members: list, users: dict, kind: tuple) -> Node:
    shape, reduce_dims = kind
    produced = {n.outputs[0] for n in members}
    inside_uses: dict = {}
    inputs: list = []
    view_copies: list = []  # folded views of inputs: they run first
    body: list = []  # members, with copies of the views of reduced values they read
    folded = {}

    def external(v):
        if v not in inputs:
            inputs.append(v)

    def copy_chain(chain, current, into: list):
        for view in chain:
            copy = Node(view.op, (current,) + tuple(view.args[1:]), dict(view.attrs))
            out = graph.new_value(view.outputs[0].shape, view.outputs[0].dtype, view.outputs[0].device)
            out.producer = copy
            copy.outputs.append(out)
            into.append(copy)
            current = out
        return current

    def fold(v):
        """The value a member should read for operand ``v`` (a folded view copy, or ``v``)."""
        if v in produced:
            return v
        if v.kind != "tensor":
            external(v)
            return v
        base, chain = _view_chain(v)
        if chain and base in produced and reduce_dims:  # a reduced value seen through a reshape (fits, by _Grouping)
            if v not in folded:
                folded[v] = copy_chain(chain, base, body)
            return folded[v]
        if not chain or base in produced or view_geometry(chain, base) is None:
            external(v)
            return v
        if v not in folded:
            external(base)
            folded[v] = copy_chain(chain, base, view_copies)
        return folded[v]

    for node in members:
        for v in node.inputs():
            inside_uses[v] = inside_uses.get(v, 0) + 1
        node.args = tuple(fold(a) if isinstance(a, Value) else a for a in node.args)
        body.append(node)
    outputs = [v for v in (n.outputs[0] for n in members) if users.get(v, 0) > inside_uses.get(v, 0)]
    group = FusedGroup(view_copies + body, inputs, outputs, shape, len(folded), reduce_dims=reduce_dims)
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
