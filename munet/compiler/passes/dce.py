"""Dead-code elimination: drop nodes none of whose outputs reach a graph output."""

from __future__ import annotations

from munet.compiler.ir import Graph


def eliminate_dead_code(graph: Graph) -> int:
    """Remove unused nodes (effectful ones, such as random draws, stay); returns how many."""
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if node.effectful or any(v in live for v in node.outputs):
            kept.append(node)
            live.update(node.inputs())
    removed = len(graph.nodes) - len(kept)
    graph.nodes = kept[::-1]
    return removed
