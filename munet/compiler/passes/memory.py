"""Memory planning: every planned temporary gets an offset in one arena per dtype.

A value is *planned* when its producer can write into a preallocated buffer (the lowering
says which, through ``writes_into``). Liveness runs over buffers, not values: a view shares
its source's buffer, and the output of an unplanned kernel is assumed to possibly alias its
inputs (a NumPy kernel may hand back an input unchanged), so it keeps them alive too. A
buffer is free after the node that last reads it (graph outputs live to the end); planned
outputs take the best-fitting free block, or extend the arena.

In-place updates: a state output (a parameter, an optimizer moment) whose state input is
read by nobody after the node producing the output takes the input's own memory instead of
an arena block, so the optimizer writes the parameter where it lives and the write-back
after the call has nothing to copy.

    plan = plan_memory(graph, writes_into=lambda node: node.name in ("add", "matmul"))
    plan.arena_bytes   # {'float32': 4096}
"""

from __future__ import annotations

from dataclasses import dataclass, field

from munet.compiler.ir import CONSTANT, Graph, ScalarOp, Value

ALIGNMENT = 64


@dataclass
class MemoryPlan:
    """Where each planned value lives.

    ``offsets``: value -> (dtype name, byte offset) in that dtype's arena; ``inplace``: state
    output -> the state input whose memory it is written into; ``naive_bytes``: what fresh
    allocation of every planned value would take; ``reused``: planned values placed in memory
    an earlier value had freed.
    """

    offsets: dict = field(default_factory=dict)
    inplace: dict = field(default_factory=dict)
    arena_bytes: dict = field(default_factory=dict)
    naive_bytes: int = 0
    reused: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(self.arena_bytes.values())

    def summary(self) -> dict:
        return {
            "arena_bytes": self.total_bytes,
            "planned_values": len(self.offsets),
            "naive_bytes": self.naive_bytes,
            "reused_buffers": self.reused,
            "inplace_updates": len(self.inplace),
        }


def nbytes(v: Value) -> int:
    n = v.dtype.np.itemsize
    for s in v.shape:
        n *= s
    return n


def _is_view(node) -> bool:
    return node.op is not CONSTANT and not isinstance(node.op, ScalarOp) and getattr(node.op, "view", None) is not None


def _tensor(v) -> bool:
    return isinstance(v, Value) and v.kind == "tensor" and v.shape is not None and v.dtype is not None


def plan_memory(graph: Graph, writes_into, donors: dict | None = None, overwrites=None) -> MemoryPlan:
    """Plan ``graph``'s temporaries; see the module docstring.

    ``writes_into(node)``: whether the node's outputs can be written into given buffers.
    ``donors``: state output -> state input (same buffer before and after the call).
    ``overwrites(node, source)``: whether the node may write its output over input ``source``
    that it reads itself (true when it reads every element of ``source`` only at the index it
    writes, e.g. ``exp_avg = lerp(exp_avg, grad, w)``).
    """
    donors = donors or {}
    overwrites = overwrites or (lambda node, source: False)
    end = len(graph.nodes)
    position: dict = {}
    planned: set = set()
    roots: dict = {}  # value -> frozenset of buffers (planned values or inputs) it may alias
    for v in graph.inputs:
        roots[v] = frozenset((v,))
    for i, node in enumerate(graph.nodes):
        ins = [v for v in node.inputs() if _tensor(v)]
        for v in node.outputs:
            position[v] = i
        if node.op is not CONSTANT and node.outputs and all(map(_tensor, node.outputs)) and writes_into(node):
            for out in node.outputs:
                planned.add(out)
                roots[out] = frozenset((out,))
            continue
        if _is_view(node):
            roots[node.outputs[0]] = roots.get(node.args[0], frozenset())
            continue
        for out in node.outputs:
            may_alias = {out}
            if node.op is not CONSTANT and _tensor(out):
                size = out.dtype.np.itemsize
                for v in ins:
                    if v.dtype.np.itemsize == size:
                        may_alias |= roots.get(v, frozenset())
            roots[out] = frozenset(may_alias)

    last: dict = {}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs():
            for r in roots.get(v, ()):
                last[r] = max(last.get(r, -1), i)
    output_count: dict = {}
    for v in graph.outputs:
        output_count[v] = output_count.get(v, 0) + 1
        for r in roots.get(v, ()):
            last[r] = end

    plan = MemoryPlan()
    for out, source in donors.items():
        if out not in planned or output_count.get(out) != 1 or out.producer is None:
            continue
        if out.shape != source.shape or out.dtype is not source.dtype:
            continue
        at = position[out]
        source_last = last.get(source, -1)
        if source_last < at or (
            source_last == at and _reads_only_directly(out.producer, source, roots) and overwrites(out.producer, source)
        ):
            plan.inplace[out] = source

    free: dict = {}  # dtype name -> sorted list of (offset, size)
    top: dict = {}
    release_at: dict = {}
    for i, node in enumerate(graph.nodes):
        for out in node.outputs:
            if out not in planned or out in plan.inplace:
                continue
            size = _aligned(nbytes(out))
            key = out.dtype.np.name
            offset, was_free = _take(free.setdefault(key, []), size, top, key)
            plan.offsets[out] = (key, offset)
            plan.naive_bytes += nbytes(out)
            plan.reused += was_free
            release_at.setdefault(max(last.get(out, i), i), []).append(out)
        for v in release_at.pop(i, ()):
            key, offset = plan.offsets[v]
            _give_back(free[key], offset, _aligned(nbytes(v)), top, key)
    plan.arena_bytes = {k: v for k, v in top.items() if v}
    return plan


def _reads_only_directly(node, source, roots: dict) -> bool:
    """Whether ``node`` reads ``source``'s memory only as ``source`` itself (not also through a view or alias)."""
    return all(v is source or source not in roots.get(v, ()) for v in node.inputs())


def _aligned(n: int) -> int:
    return max(ALIGNMENT, (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT)


def _take(blocks: list, size: int, top: dict, key) -> tuple[int, bool]:
    """Best-fitting free block for ``size`` bytes (split off its front), else the arena's end."""
    best = None
    for j, (_, room) in enumerate(blocks):
        if room >= size and (best is None or room < blocks[best][1]):
            best = j
    if best is None:
        offset = top.get(key, 0)
        if blocks and blocks[-1][0] + blocks[-1][1] == offset:  # grow the free tail instead
            offset = blocks.pop()[0]
        top[key] = offset + size
        return offset, False
    offset, room = blocks[best]
    if room == size:
        blocks.pop(best)
    else:
        blocks[best] = (offset + size, room - size)
    return offset, True


def _give_back(blocks: list, offset: int, size: int, top: dict, key) -> None:
    """Return a block to the sorted free list, merging it with free neighbours."""
    j = 0
    while j < len(blocks) and blocks[j][0] < offset:
        j += 1
    blocks.insert(j, (offset, size))
    if j + 1 < len(blocks) and blocks[j][0] + blocks[j][1] == blocks[j + 1][0]:
        blocks[j] = (offset, size + blocks.pop(j + 1)[1])
    if j > 0 and blocks[j - 1][0] + blocks[j - 1][1] == blocks[j][0]:
        blocks[j - 1] = (blocks[j - 1][0], blocks[j - 1][1] + blocks.pop(j)[1])
