"""Algebraic simplification: identities that let a value stand for a node's output.

Rules (each applies only when the output keeps the input's shape and dtype):
``x * 1``, ``1 * x``, ``x + 0``, ``0 + x``, ``x - 0``, ``x / 1`` (a Python number or an
all-ones/all-zeros constant); ``cast`` to the same dtype, ``view``/``expand`` to the
same shape, the identity ``permute`` and ``copy(x, y)`` of a same-typed ``y`` are that value; ``permute(permute(x))`` composes into one
permute (or ``x``); ``view(view(x))`` becomes one view of ``x`` when ``x`` is not itself a view.

Gradients of views: ``as_strided_scatter(base, src)`` whose region is all of ``base`` is ``src``
(the gradient of ``w[:n]`` when ``n`` is ``w``'s length), and a sum of scatters into zeros whose
regions tile the result along one dim is one ``cat`` of their sources (the gradient of
``q, k, v = qkv.split(c, dim=-1)``: one copy instead of three zero-filled scatters and two adds).
"""

from __future__ import annotations

import numpy as np

from munet._tensor import contiguous_strides
from munet.compiler.ir import CONSTANT, Graph, Value
from munet.ops.movement import cat_op

_NEUTRAL = {"mul": (1, True), "add": (0, True), "sub": (0, False), "div": (1, False)}


def _same_type(out: Value, x) -> bool:
    return isinstance(x, Value) and x.kind == "tensor" and x.shape == out.shape and x.dtype is out.dtype


def _is_number(a, target) -> bool:
    if isinstance(a, bool) or not isinstance(a, (int, float)):
        return False
    return a == target and type(a).__name__ in ("int", "float")


def _is_filled(a, target) -> bool:
    if isinstance(a, Value):
        p = a.producer
        if p is not None and p.op is CONSTANT:
            return bool(np.all(p.constant == target))
        return False
    return _is_number(a, target)


def _neutral(node):
    rule = _NEUTRAL.get(node.name)
    if rule is None or len(node.args) != 2 or node.attrs.get("alpha", 1) != 1:
        return None
    target, commutes = rule
    out = node.outputs[0]
    x, y = node.args
    if _same_type(out, x) and _is_filled(y, target):
        return x
    if commutes and _same_type(out, y) and _is_filled(x, target):
        return y
    return None


def _identity(node):
    out = node.outputs[0]
    x = node.args[0] if node.args else None
    if node.name == "copy" and len(node.args) == 2 and _same_type(out, node.args[1]):
        return node.args[1]  # a functional copy of a same-shaped source is the source
    if not _same_type(out, x):
        return None
    # ``clone`` stays: values are immutable in the graph, but clone also makes a transposed
    # view contiguous, and elementwise kernels on mixed layouts are many times slower.
    if node.name in ("cast", "view", "expand"):
        return x
    if node.name == "permute" and tuple(node.attrs["dims"]) == tuple(range(len(out.shape))):
        return x
    if node.name == "as_strided_scatter" and _region_dim(node) is None and _same_type(out, node.args[1]):
        return node.args[1]
    return None


def _region_dim(scatter):
    """For ``as_strided_scatter`` of a slab ``[start, start + n)`` along one dim of its contiguous base:
    ``(dim, start, n)``; None when the region is the whole base; False for any other region."""
    shape = tuple(scatter.outputs[0].shape)
    size, stride, offset = (scatter.attrs[k] for k in ("size", "stride", "storage_offset"))
    if len(size) != len(shape) or tuple(stride) != contiguous_strides(shape):
        return False
    dims = [d for d, (n, full) in enumerate(zip(size, shape)) if n != full]
    if not dims:
        return None if offset == 0 else False
    if len(dims) > 1:
        return False
    d = dims[0]
    start, rest = divmod(offset, stride[d]) if stride[d] else (0, offset)
    if rest or start < 0 or start + size[d] > shape[d]:
        return False
    return d, start, size[d]


def _plain_add(node) -> bool:
    return node.name == "add" and len(node.args) == 2 and node.attrs.get("alpha", 1) == 1


def _add_leaves(v: Value, users: dict, leaves: list) -> None:
    """The operands of the tree of single-use plain ``add`` nodes that ends in ``v``."""
    p = v.producer
    inner = p is not None and p.op is not CONSTANT and _plain_add(p) and users.get(v) == 1
    if inner and all(isinstance(a, Value) and _same_type(v, a) for a in p.args):
        for a in p.args:
            _add_leaves(a, users, leaves)
    else:
        leaves.append(v)


def _scatters_to_cat(node, users: dict) -> bool:
    """Rewrite a sum of zero-based scatters that tile the result along one dim into ``cat``."""
    if not _plain_add(node):
        return False
    out = node.outputs[0]
    if not all(isinstance(a, Value) and _same_type(out, a) for a in node.args):
        return False
    leaves: list = []
    for a in node.args:
        _add_leaves(a, users, leaves)
    pieces = []
    for v in leaves:
        p = v.producer
        if p is None or p.op is CONSTANT or p.name != "as_strided_scatter" or not _is_filled(p.args[0], 0):
            return False
        region = _region_dim(p)
        if not region or p.args[1].dtype is not out.dtype:
            return False
        pieces.append((region, p.args[1]))
    dim = pieces[0][0][0]
    pieces.sort(key=lambda piece: piece[0][1])
    end = 0
    for (d, start, n), _ in pieces:
        if d != dim or start != end:
            return False
        end = start + n
    if end != out.shape[dim]:
        return False
    node.op, node.args = cat_op, ([src for _, src in pieces],)
    node.attrs = {"dim": dim, "sizes": tuple(n for (_, _, n), _ in pieces)}
    return True


def _compose(node, graph: Graph):
    """Rewrite permute∘permute and view∘view in place; returns True when it changed ``node``."""
    x = node.args[0] if node.args else None
    inner = x.producer if isinstance(x, Value) else None
    if inner is None or inner.op is CONSTANT or inner.name != node.name:
        return False
    if node.name == "permute":
        p, q = inner.attrs["dims"], node.attrs["dims"]
        node.args = (inner.args[0],)
        node.attrs = dict(node.attrs, dims=tuple(p[i] for i in q))
        return True
    if node.name == "view":
        source = inner.args[0]
        producer = source.producer if isinstance(source, Value) else None
        if producer is not None and getattr(producer.op, "view", None) is not None:
            return False
        node.args = (source,)
        return True
    return False


def simplify_algebra(graph: Graph) -> int:
    """Apply the rules until none fires; returns how many rewrites were made."""
    rewrites = 0
    changed = True
    while changed:
        changed = False
        mapping = {}
        users = graph.users()
        for node in graph.nodes:
            if mapping:
                node.replace_inputs(lambda v, m=mapping: m.get(v, v))
            if node.op is CONSTANT or len(node.outputs) != 1 or node.effectful:
                continue
            if _compose(node, graph) or _scatters_to_cat(node, users):
                rewrites += 1
                changed = True
            replacement = _neutral(node) or _identity(node)
            if replacement is not None:
                mapping[node.outputs[0]] = replacement
                rewrites += 1
                changed = True
        graph.replace_uses(mapping)
        if mapping:
            kept = [n for n in graph.nodes if not (len(n.outputs) == 1 and n.outputs[0] in mapping)]
            graph.nodes = kept
    return rewrites
