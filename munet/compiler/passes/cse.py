"""Common subexpression elimination: one node per distinct (op, arguments, attributes)."""

from __future__ import annotations

from munet.compiler.ir import CONSTANT, Graph, Value


def _key_of(obj):
    if isinstance(obj, Value):
        return ("%", obj.id)
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_key_of(x) for x in obj))
    if isinstance(obj, dict):
        return tuple(sorted((k, _key_of(v)) for k, v in obj.items()))
    if isinstance(obj, float):
        return ("f", obj.hex())  # 0.0 and -0.0 differ; hash equality of 1 and 1.0 must not merge dtypes
    try:
        hash(obj)
    except TypeError:
        return ("id", id(obj))
    return (type(obj).__name__, obj)


def eliminate_common_subexpressions(graph: Graph) -> int:
    """Replace each repeated pure node by the first one's outputs; returns how many were merged."""
    seen: dict = {}
    mapping: dict = {}
    kept = []
    for node in graph.nodes:
        if mapping:
            node.replace_inputs(lambda v: mapping.get(v, v))
        if node.effectful or node.op is CONSTANT:
            kept.append(node)
            continue
        key = (id(node.op), _key_of(node.args), _key_of(node.attrs))
        first = seen.get(key)
        if first is None:
            seen[key] = node
            kept.append(node)
            continue
        for old, new in zip(node.outputs, first.outputs):
            mapping[old] = new
    removed = len(graph.nodes) - len(kept)
    graph.nodes = kept
    graph.outputs = [mapping.get(v, v) for v in graph.outputs]
    return removed
