"""Decomposition: primitives with a fused form as elementwise ops and reductions, before fusion.

``standardize`` (LayerNorm's forward: ``((x - mean) * rstd, rstd)`` over ``dims``) runs as one
NumPy kernel making five passes over its input. Written as the ops it computes (the eager
kernel's float arithmetic, in its order), fusion turns it into two reduction kernels and one
elementwise kernel whose loops stay in cache, and the last joins whatever consumes the result
(the affine scale and shift). Done when fusing only (without fusion the single kernel is
faster), and only on devices whose compile target lists ``standardize`` in its ``decomposes``
(cpu does; vulkan keeps its standardize kernel: its fused sums follow the eager kernels' order
exactly, so decomposing would change the bits there).

The fused sums accumulate in float64 (``codegen/c.py``), so the mean and variance are at least
as accurate as the eager kernel's float32 ones and differ from them in the last bits.
"""

from __future__ import annotations

import math

from munet._device import compile_target
from munet.compiler.ir import Graph, Node, Value
from munet.compiler.passes.dce import eliminate_dead_code

_FLOATS = ("float32", "float64")


def decompose_standardize(graph: Graph) -> int:
    """Replace float ``standardize`` nodes by their ops where the device's target asks for it; returns how many were replaced."""
    nodes, mapping = [], {}
    for node in graph.nodes:
        if _decomposable(node):
            result, rstd = _standardize_ops(graph, node, nodes)
            mapping[node.outputs[0]], mapping[node.outputs[1]] = result, rstd
        else:
            nodes.append(node)
    if not mapping:
        return 0
    graph.nodes = nodes
    graph.replace_uses(mapping)
    eliminate_dead_code(graph)
    return len(mapping) // 2


def _standardize_ops(graph: Graph, node: Node, nodes: list) -> tuple:
    """Append the ops of ``standardize`` ``node`` to ``nodes``; ``(result, rstd)`` values."""
    from munet.ops._registry import OPS

    x = node.args[0]
    dims, eps, center = tuple(node.attrs["dims"]), float(node.attrs["eps"]), bool(node.attrs["center"])
    kept = tuple(1 if d in dims else n for d, n in enumerate(x.shape))
    count = float(math.prod(x.shape[d] for d in dims))

    def emit(name, args, shape, attrs=None):
        out = graph.new_value(shape, x.dtype, x.device)
        op_node = Node(OPS[name], tuple(args), dict(attrs or {}), [out])
        out.producer = op_node
        nodes.append(op_node)
        return out

    def mean(v):
        return emit("div", (emit("sum", (v,), kept, {"dims": dims, "keepdim": True}), count), kept)

    centered = emit("sub", (x, mean(x)), x.shape) if center else x
    variance = mean(emit("mul", (centered, centered), x.shape))
    rstd = emit("div", (1.0, emit("sqrt", (emit("add", (variance, eps), kept),), kept)), kept)
    return emit("mul", (centered, rstd), x.shape), rstd


def _decomposable(node: Node) -> bool:
    if node.name != "standardize" or len(node.args) != 1 or len(node.outputs) != 2:
        return False
    x = node.args[0]
    if not isinstance(x, Value) or x.shape is None or x.dtype is None or x.device is None:
        return False
    dims = tuple(node.attrs.get("dims", ()))
    return (
        "standardize" in compile_target(x.device).decomposes
        and x.dtype.np.name in _FLOATS
        and bool(dims)
        and all(x.shape[d] > 0 for d in dims)
        and 0 not in x.shape
    )
