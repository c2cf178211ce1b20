"""Import-time rewrites of an :class:`~munet.onnx.load.ImportedGraph`, exact up to float32 rounding.

``fold_batch_norm``: a BatchNormalization that alone reads a Conv's output, with constant
statistics, becomes new Conv weights and bias (``w * s``, ``(b - mean) * s + beta`` with
``s = scale / sqrt(var + eps)``). ``merge_siblings``: MatMul, Gemm or Conv nodes that read the same
input with weights of their own (a q/k/v projection) become one node with the weights concatenated
along the output axis, followed by a Split; each output element is the same dot product as before
(only the matrix kernel's blocking may differ). The merged weight is one Parameter named after the
siblings' weights joined by ``+``. ``fold_constants``: a node whose inputs are all constants
(Constant nodes, integer initializers, results of other folded nodes) is evaluated once, at
import, an If with a constant condition becomes the branch it selects, and a Loop with a constant
trip count whose condition stays true is unrolled (``unroll_loop``). Each records a line in
``graph.optimizations``.
"""

from __future__ import annotations

import collections

import numpy as np

from munet.onnx.program import NOT_ON_HOST, ImportedNode, Subgraph, run_node


def optimize_graph(graph) -> None:
    fold_batch_norm(graph)
    merge_siblings(graph)
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
    uses = _use_counts(graph)
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


def _use_counts(graph) -> dict:
    """name -> how many times nodes and graph outputs read it (a subgraph's read counts as two)."""
    uses = {}
    for node in graph.nodes:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    for name in graph.outputs:
        uses[name] = uses.get(name, 0) + 1
    for node in graph.nodes:
        for value in node.attrs.values():
            if isinstance(value, Subgraph):
                for name in _names_read(value.nodes) | set(value.outputs):
                    uses[name] = uses.get(name, 0) + 2
    return uses


def _merge_key(node, graph, uses):
    """What siblings must share to merge (None when ``node`` cannot): operator, attributes, weight
    shape apart from the output axis, and whether there is a bias."""
    if node.op_type not in ("MatMul", "Gemm", "Conv") or len(node.output) != 1 or len(node.input) < 2:
        return None
    weight = graph.parameters.get(node.input[1])
    if weight is None or uses.get(node.input[1]) != 1:  # read by this node only
        return None
    bias_name = node.input[2] if len(node.input) > 2 and node.input[2] else None
    if bias_name and (graph.parameters.get(bias_name) is None or uses.get(bias_name) != 1):
        return None
    if bias_name and graph.parameters[bias_name].ndim != 1:
        return None
    if node.op_type == "MatMul" and weight.ndim != 2:
        return None
    if node.op_type == "Conv" and node.attrs.get("group", 1) != 1:
        return None
    axis = _weight_axis(node)
    rest = tuple(d for i, d in enumerate(weight.shape) if i != axis)
    attrs = tuple(sorted((k, repr(v)) for k, v in node.attrs.items()))
    return (node.op_type, node.input[0], attrs, rest, weight.dtype.str, bias_name is not None)


def _weight_axis(node) -> int:
    """The axis of the weight that indexes output features."""
    if node.op_type == "Conv":
        return 0
    return 0 if node.op_type == "Gemm" and node.attrs.get("transB", 0) else 1


def merge_siblings(graph) -> int:
    """Merge MatMul/Gemm/Conv nodes that read the same input into one wider node and a Split."""
    uses = _use_counts(graph)
    groups = {}
    for node in graph.nodes:
        key = _merge_key(node, graph, uses)
        if key is not None:
            groups.setdefault(key, []).append(node)
    replaced = {}  # id(first sibling) -> [merged node, split node]; other siblings -> []
    for siblings in groups.values():
        if len(siblings) < 2:
            continue
        first = siblings[0]
        axis = _weight_axis(first)
        weight_names = [n.input[1] for n in siblings]
        weights = [graph.parameters.pop(name) for name in weight_names]
        sizes = [w.shape[axis] for w in weights]
        merged_weight = "+".join(weight_names)
        graph.parameters[merged_weight] = np.concatenate(weights, axis=axis)
        inputs = [first.input[0], merged_weight]
        if len(first.input) > 2 and first.input[2]:
            bias_names = [n.input[2] for n in siblings]
            inputs.append("+".join(bias_names))
            graph.parameters[inputs[2]] = np.concatenate([graph.parameters.pop(b) for b in bias_names])
        wide = "+".join(n.output[0] for n in siblings)
        merged = ImportedNode(first.op_type, first.domain, first.name, inputs, [wide], first.attrs, first.opset)
        split = _split_node(first, wide, [n.output[0] for n in siblings], sizes, graph)
        if first.output[0] in graph.dtypes:
            graph.dtypes[wide] = graph.dtypes[first.output[0]]
        replaced[id(first)] = [merged, split]
        replaced.update({id(n): [] for n in siblings[1:]})
        graph.optimizations.append(
            f"{first.op_type} nodes {[n.name for n in siblings]} reading {first.input[0]!r} merged into one "
            f"(output features {sizes})"
        )
    graph.nodes = [new for node in graph.nodes for new in replaced.get(id(node), [node])]
    return sum(1 for v in replaced.values() if v)


def _split_node(first, wide: str, outputs: list, sizes: list, graph) -> ImportedNode:
    """A Split of ``wide`` into ``outputs`` along the feature axis (last for MatMul/Gemm, 1 for Conv)."""
    axis = 1 if first.op_type == "Conv" else -1
    opset = max(first.opset, 13)  # Split takes its sizes as an input from opset 13
    sizes_name = wide + "_split_sizes"
    graph.constants[sizes_name] = np.asarray(sizes, np.int64)
    return ImportedNode("Split", "", first.name + "_split", [wide, sizes_name], outputs, {"axis": axis}, opset)


def fold_constants(graph) -> int:
    """Evaluate nodes whose inputs are all constants; an ``If`` whose condition is constant is replaced
    by the branch it selects (its nodes join the graph, then Identity nodes give its outputs the If's
    names), so a constant condition resolves at import."""
    kept, count = [], 0
    pending = collections.deque(graph.nodes)
    while pending:
        node = pending.popleft()
        if node.op_type == "If" and node.input[0] in graph.constants:
            condition = bool(np.asarray(graph.constants[node.input[0]]).reshape(-1)[0])
            branch = node.attrs["then_branch" if condition else "else_branch"]
            graph.constants.update(branch.constants)
            renames = [
                ImportedNode("Identity", "", f"{node.name}_out{i}", [inner], [outer], {}, node.opset)
                for i, (inner, outer) in enumerate(zip(branch.outputs, node.output))
            ]
            pending.extendleft(reversed([*branch.nodes, *renames]))
            graph.optimizations.append(f"If {node.name!r} resolved at import: its condition is constant ({condition})")
            continue
        unrolled = unroll_loop(node, graph) if node.op_type == "Loop" else None
        if unrolled is not None:
            pending.extendleft(reversed(unrolled))
            continue
        inputs = [n for n in node.input if n]
        if node.op_type not in NOT_ON_HOST and all(n in graph.constants for n in inputs):
            values = [graph.constants[n] if n else None for n in node.input]
            for name, value in zip(node.output, run_node(node, values, "cpu", graph.dtypes)):
                if name:
                    graph.constants[name] = value if value is None or isinstance(value, list) else np.asarray(value)
            count += 1
        else:
            kept.append(node)
    graph.nodes = kept
    if count:
        graph.optimizations.append(f"constant folding: {count} nodes evaluated at import")
    return count


# a Loop is unrolled only while the copies stay small: iterations, and nodes in all the copies
_MAX_UNROLLED_ITERATIONS, _MAX_UNROLLED_NODES = 256, 4096


def unroll_loop(node, graph) -> list | None:
    """The nodes replacing ``node``, a Loop whose trip count is a constant and whose condition stays
    true (absent or constant true on entry, and the body passes its condition input through), or
    None when it must run as a host loop.

    Iteration ``k`` is a copy of the body with its own value names (``"<loop>/<k>/<name>"``), its
    iteration number and condition as constants and its carried inputs bound to the previous
    copy's carried outputs; Identity nodes give the last carried values the Loop's output names,
    and each scan output is its per-iteration values unsqueezed and concatenated on a new axis 0.
    A body holding graphs of its own (a nested If or Loop) is left as a host loop."""
    trip_name = node.input[0] if node.input else ""
    cond_name = node.input[1] if len(node.input) > 1 else ""
    if not trip_name or trip_name not in graph.constants:
        return None
    if cond_name and (cond_name not in graph.constants or not _is_true(graph.constants[cond_name])):
        return None
    body = node.attrs["body"]
    trip = int(np.asarray(graph.constants[trip_name]).reshape(-1)[0])
    carried_count = len(node.input) - 2
    scan_count = len(body.outputs) - 1 - carried_count
    if (
        not 0 <= trip <= _MAX_UNROLLED_ITERATIONS
        or trip * len(body.nodes) > _MAX_UNROLLED_NODES
        or (trip == 0 and scan_count)
        or not _condition_stays_true(body)
        or any(isinstance(v, Subgraph) for n in body.nodes for v in n.attrs.values())
    ):
        return None
    local = {out for n in body.nodes for out in n.output if out} | set(body.inputs)
    shared = {name: f"{node.name}/{name}" for name in body.constants}  # the body's own initializers, once
    for name, value in body.constants.items():
        graph.constants[shared[name]] = value
    iteration_name, condition_name, *carried_names = body.inputs
    carried = list(node.input[2:])
    scans: list = [[] for _ in range(scan_count)]
    nodes = []
    for k in range(trip):
        names = {**shared, condition_name: f"{node.name}/{k}/cond", iteration_name: f"{node.name}/{k}/iter"}
        graph.constants[names[condition_name]] = np.array(True)
        graph.constants[names[iteration_name]] = np.array(k, np.int64)
        names.update(zip(carried_names, carried))
        for name in local - names.keys():
            names[name] = f"{node.name}/{k}/{name}"
            if name in graph.dtypes:
                graph.dtypes[names[name]] = graph.dtypes[name]

        def rename(name, names=names):
            return names.get(name, name) if name else name

        for n in body.nodes:
            nodes.append(
                ImportedNode(
                    n.op_type,
                    n.domain,
                    f"{node.name}/{k}/{n.name}",
                    map(rename, n.input),
                    map(rename, n.output),
                    n.attrs,
                    n.opset,
                )  # fmt: skip
            )
        carried = [rename(o) for o in body.outputs[1 : 1 + carried_count]]
        for parts, name in zip(scans, body.outputs[1 + carried_count :]):
            parts.append(rename(name))
    nodes += [
        ImportedNode("Identity", "", f"{node.name}/out{i}", [inner], [outer], {}, node.opset)
        for i, (inner, outer) in enumerate(zip(carried, node.output))
    ]
    nodes += _stack_scan_outputs(node, scans, graph)
    graph.optimizations.append(f"Loop {node.name!r} unrolled at import: {trip} iterations (a constant trip count)")
    return nodes


def _is_true(value) -> bool:
    return bool(np.asarray(value).reshape(-1)[0])


def _condition_stays_true(body) -> bool:
    """Whether ``body``'s condition output is its condition input (directly or through Identity)
    or a constant true."""
    out = body.outputs[0]
    producer = {o: n for n in body.nodes for o in n.output}
    while out in producer and producer[out].op_type == "Identity":
        out = producer[out].input[0]
    if out == body.inputs[1]:
        return True
    return out in body.constants and _is_true(body.constants[out])


def _stack_scan_outputs(node, scans, graph) -> list:
    """Nodes joining each scan output's per-iteration values on a new axis 0 (Unsqueeze, Concat)."""
    opset = max(node.opset, 13)  # Unsqueeze takes its axes as an input from opset 13
    axes = f"{node.name}/scan_axes"
    graph.constants[axes] = np.array([0], np.int64)
    nodes = []
    for j, (parts, outer) in enumerate(zip(scans, node.output[len(node.input) - 2 :])):
        rows = [f"{node.name}/scan{j}/{k}" for k in range(len(parts))]
        nodes += [
            ImportedNode("Unsqueeze", "", f"{node.name}/scan{j}/{k}", [part, axes], [row], {}, opset)
            for k, (part, row) in enumerate(zip(parts, rows))
        ]
        nodes.append(ImportedNode("Concat", "", f"{node.name}/scan{j}", rows, [outer], {"axis": 0}, opset))
    return nodes
