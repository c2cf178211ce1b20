"""Constant folding: evaluate, once at compile time, nodes whose inputs are all constants.

Factory nodes (``full``, ``arange``, ...; not random draws) and pure ops on constants are run
with the backend's own kernels and replaced by ``constant`` nodes.
"""

from __future__ import annotations

from munet._device import get_backend
from munet.compiler.ir import CONSTANT, Graph, Node, ScalarOp, map_values

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
        arrays = evaluate(node, node.args, node.attrs, constants)
        if arrays is None:
            new_nodes.append(node)
            continue
        for v, array in zip(node.outputs, arrays):
            cnode = Node(CONSTANT, (), {}, [v], constant=array, folded_from=node)
            v.producer = cnode
            constants[v] = array
            new_nodes.append(cnode)
        folded += 1
    graph.nodes = new_nodes
    return folded


def evaluate(node, args, attrs: dict, constants: dict):
    """The arrays of ``node``'s outputs computed by its backend kernel from ``args`` and ``attrs``
    (``node``'s own, or copies at other sizes: ``compiler/resize.py``), whose values ``constants``
    maps to arrays; None when the backend has no kernel for the op."""
    backend = get_backend(node.outputs[0].device)
    kernel = backend.kernels.get(node.op.name)
    if kernel is None:
        return None
    raw = kernel(*[_resolve(a, constants) for a in args], **{k: _resolve(v, constants) for k, v in attrs.items()})
    arrays = []
    for v, r in zip(node.outputs, raw if len(node.outputs) > 1 else (raw,)):
        array = backend.wrap(r, v.dtype.np)[2]
        if hasattr(array, "flags"):  # a NumPy array (a vulkan constant is a VkView on the device)
            array.flags.writeable = False  # shared by every call: no kernel may write it
        arrays.append(array)
    return arrays


def _resolve(a, constants):
    return map_values(a, lambda v: constants[v])
