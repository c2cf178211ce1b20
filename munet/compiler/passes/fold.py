"""Constant folding: evaluate, once at compile time, nodes whose inputs are all constants.

Factory nodes (``full``, ``arange``, ...; not random draws) and pure ops on constants are run
with the backend's own kernels and replaced by ``constant`` nodes.
"""

from __future__ import annotations

from munet._device import get_backend
from munet.compiler.ir import CONSTANT, Graph, ScalarOp

MAX_FOLDED_ELEMENTS = 1 << 24


def _foldable(node, constants: dict) -> bool:
    if node.op is CONSTANT or isinstance(node.op, ScalarOp) or node.effectful or node.op.view is not None:
        return False
    if any(v.kind != "tensor" or v.shape is None for v in node.outputs):
        return False
    if sum(_numel(v.shape) for v in node.outputs) > MAX_FOLDED_ELEMENTS:
        return False
    return all(v in constants for v in node.inputs())


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def fold_constants(graph: Graph) -> int:
    """Replace foldable nodes by constants; returns how many nodes were folded."""
    constants = {n.outputs[0]: n.constant for n in graph.nodes if n.op is CONSTANT}
    folded = 0
    new_nodes = []
    for node in graph.nodes:
        if not _foldable(node, constants):
            new_nodes.append(node)
            continue
        backend = get_backend(node.outputs[0].device)
        kernel = backend.kernels.get(node.op.name)
        if kernel is None:
            new_nodes.append(node)
            continue
        args = [_resolve(a, constants) for a in node.args]
        attrs = {k: _resolve(v, constants) for k, v in node.attrs.items()}
        raw = kernel(*args, **attrs)
        raws = raw if len(node.outputs) > 1 else (raw,)
        for v, r in zip(node.outputs, raws):
            array = backend.wrap(r, v.dtype.np)[2]
            if hasattr(array, "flags"):  # a NumPy array (a vulkan constant is a VkView on the device)
                array.flags.writeable = False  # shared by every call: no kernel may write it
            const = CONSTANT
            from munet.compiler.ir import Node

            cnode = Node(const, (), {}, [v], constant=array)
            v.producer = cnode
            constants[v] = array
            new_nodes.append(cnode)
        folded += 1
    graph.nodes = new_nodes
    return folded


def _resolve(a, constants):
    from munet.compiler.ir import map_values

    return map_values(a, lambda v: constants[v])
