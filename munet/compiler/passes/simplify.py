"""Algebraic simplification: identities that let a value stand for a node's output.

Rules (each applies only when the output keeps the input's shape and dtype):
``x * 1``, ``1 * x``, ``x + 0``, ``0 + x``, ``x - 0``, ``x / 1`` (a Python number or an
all-ones/all-zeros constant); ``cast`` to the same dtype, ``view``/``expand`` to the
same shape, the identity ``permute`` and ``copy(x, y)`` of a same-typed ``y`` are that value; ``permute(permute(x))`` composes into one
permute (or ``x``); ``view(view(x))`` becomes one view of ``x`` when ``x`` is not itself a view.
"""

from __future__ import annotations

import numpy as np

from munet.compiler.ir import CONSTANT, Graph, Value

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
    return None


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
        for node in graph.nodes:
            if mapping:
                node.replace_inputs(lambda v, m=mapping: m.get(v, v))
            if node.op is CONSTANT or len(node.outputs) != 1 or node.effectful:
                continue
            if _compose(node, graph):
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
