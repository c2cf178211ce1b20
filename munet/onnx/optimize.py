"""Import-time rewrites of an :class:`~munet.onnx.load.ImportedGraph`, exact up to float32 rounding.

``fold_batch_norm``: a BatchNormalization that alone reads a Conv's output, with constant
statistics, becomes new Conv weights and bias (``w * s``, ``(b - mean) * s + beta`` with
``s = scale / sqrt(var + eps)``). ``fold_constants``: a node whose inputs are all constants
(Constant nodes, integer initializers, results of other folded nodes) is evaluated once, at
import. Each records a line in ``graph.optimizations``.
"""

from __future__ import annotations

import numpy as np

from munet.onnx.program import NOT_ON_HOST, Subgraph, run_node


def optimize_graph(graph) -> None:
    fold_batch_norm(graph)
    fold_constants(graph)
    drop_unused(graph)


def drop_unused(graph) -> None:
    """Forget initializers and constants no node reads (a folded BatchNormalization's statistics)."""
    used = _names_read(graph.nodes) | set(graph.outputs)
    graph.parameters = {k: v for k, v in graph.parameters.items() if k in used}
    graph.constants = {k: v for k, v in graph.constants.items() if k in used}


def _names_read(nodes) -> set:
    """Every value name ``nodes`` read, their If branches' included (a branch reads enclosing values)."""
    names = set()
    for node in nodes:
        names.update(node.input)
        for value in node.attrs.values():
            if isinstance(value, Subgraph):
                names |= _names_read(value.nodes) | set(value.outputs)
    return names


def fold_batch_norm(graph) -> int:
    uses = {}
    for node in graph.nodes:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    for name in graph.outputs:
        uses[name] = uses.get(name, 0) + 1
    for node in graph.nodes:  # a value an If branch reads counts as used more than once
        for value in node.attrs.values():
            if isinstance(value, Subgraph):
                for name in _names_read(value.nodes):
                    uses[name] = uses.get(name, 0) + 2
    producer = {out: node for node in graph.nodes for out in node.output}
    folded = []
    for bn in graph.nodes:
        if bn.op_type != "BatchNormalization" or bn.attrs.get("training_mode", 0) or len(bn.output) != 1:
            continue
        conv = producer.get(bn.input[0])
        if conv is None or conv.op_type != "Conv" or uses.get(bn.input[0]) != 1:
            continue
        stats = [graph.parameters.get(n, graph.constants.get(n)) for n in bn.input[1:5]]
        weight = graph.parameters.get(conv.input[1])
        if weight is None or any(s is None for s in stats) or uses.get(conv.input[1]) != 1:
            continue
        bias_name = conv.input[2] if len(conv.input) > 2 and conv.input[2] else None
        bias = graph.parameters.get(bias_name) if bias_name else np.zeros(weight.shape[0], weight.dtype)
        if bias is None or (bias_name and uses.get(bias_name) != 1):
            continue
        scale, beta, mean, var = (np.asarray(s, np.float64) for s in stats)
        s = scale / np.sqrt(var + bn.attrs.get("epsilon", 1e-5))
        new_weight = (weight.astype(np.float64) * s.reshape(-1, *([1] * (weight.ndim - 1)))).astype(weight.dtype)
        new_bias = ((bias.astype(np.float64) - mean) * s + beta).astype(weight.dtype)
        graph.parameters[conv.input[1]] = new_weight
        bias_key = bias_name or conv.output[0] + "_bias"
        graph.parameters[bias_key] = new_bias
        conv.input[2:] = [bias_key]
        conv.output[0] = bn.output[0]
        folded.append(bn)
        graph.optimizations.append(f"BatchNormalization {bn.name!r} folded into Conv {conv.name!r}")
    graph.nodes = [n for n in graph.nodes if all(n is not b for b in folded)]
    return len(folded)


def fold_constants(graph) -> int:
    kept, count = [], 0
    for node in graph.nodes:
        inputs = [n for n in node.input if n]
        if node.op_type not in NOT_ON_HOST and all(n in graph.constants for n in inputs):
            values = [graph.constants[n] if n else None for n in node.input]
            for name, value in zip(node.output, run_node(node, values, "cpu", graph.dtypes)):
                if name:
                    graph.constants[name] = np.asarray(value)
            count += 1
        else:
            kept.append(node)
    graph.nodes = kept
    if count:
        graph.optimizations.append(f"constant folding: {count} nodes evaluated at import")
    return count
