"""Host placement: which values of a program live on the host cpu whatever its device.

At save, ``host_values`` marks them (from the trace's devices, or inferred for a cpu trace by
``infer_host``); at load, ``place_transfers`` inserts the ``to_device`` copies between the
program's device and the host that the device the program is loaded onto needs.
"""

from __future__ import annotations

from munet import _dtype as D
from munet._device import as_device, host_device
from munet.compiler.ir import Graph, Node, Value, verify
from munet.compiler.saving.program import Program, registry_nodes
from munet.ops.convert import transfer_op


def host_values(graph: Graph, prog: Program) -> set:
    """Ids of the tensor values that live on the host cpu whatever device the program runs on.

    On a non-cpu device that is where the trace put them (Adam's step count is a cpu tensor, as
    in PyTorch, and what is computed from it). A cpu trace cannot tell, so the step counts
    (optimizer state ``*.step``), float64 state and float64 results (a GradScaler's scale and
    its update) are the host values, with what is computed from them and from nothing on the
    device; constants and other values computed from neither go to the host when
    a host node reads them. ``munet.load`` onto a device inserts the ``to_device`` copies.
    """
    values = list(graph.inputs) + [v for node in registry_nodes(graph) for v in node.outputs]
    tensors = [v for v in values if v.kind == "tensor"]
    host = host_device()
    if prog.device != host:
        others = {str(v.device) for v in tensors if as_device(v.device) not in (prog.device, host)}
        if others:
            raise RuntimeError(
                f"munet.save: the compiled program on '{prog.device}' holds values on {sorted(others)}; a saved "
                "program runs on one device plus the host cpu. Move those tensors to the program's device."
            )
        return {v.id for v in tensors if as_device(v.device) == host}
    others = {str(v.device) for v in tensors if as_device(v.device) != host}
    if others:
        raise RuntimeError(
            f"munet.save: the compiled program on 'cpu' holds values on {sorted(others)} (a .to(device) inside the "
            "step); a saved program runs on one device plus the host cpu. Compile the step on that device instead."
        )
    return infer_host(graph, prog)


def infer_host(graph: Graph, prog: Program) -> set:
    """See :func:`host_values`: the host values of a graph traced on the cpu."""
    place = {}  # Value -> "host" | "device" | None (computed from neither)
    for v, (kind, key) in zip(graph.inputs, prog.roles):
        if v.kind == "tensor":
            step = kind == "state" and prog.state_kinds.get(key) == "optimizer" and key.endswith(".step")
            wide = kind == "state" and v.dtype is D.float64  # a GradScaler's scale: no float64 on vulkan
            place[v] = "host" if step or wide else "device"
    nodes = list(registry_nodes(graph))
    for node in nodes:
        found = {place.get(a) for a in node.inputs() if a.kind == "tensor"}
        if any(v.kind == "tensor" and v.dtype is D.float64 for v in node.outputs):
            where = "host"  # float64 arithmetic (GradScaler's scale update): vulkan has no float64
        else:
            where = "device" if "device" in found else "host" if "host" in found else None
        for v in node.outputs:
            place[v] = where
    inputs = {key: v for v, (kind, key) in zip(graph.inputs, prog.roles) if kind == "state"}
    # the registry node computing each value: a fused node's outputs are several members' results
    producers = {v: node for node in nodes for v in node.outputs}
    for index, name in prog.state_outputs:  # an update is computed where its state lives
        v, state = graph.outputs[index], inputs.get(name)
        if state is not None and v in producers and place[v] != place[state]:
            for out in producers[v].outputs:
                place[out] = place[state]
    readers: dict = {}
    for node in nodes:
        for a in node.inputs():
            readers.setdefault(a, []).append(node)
    for node in reversed(nodes):  # readers come later, so they are decided already
        free = [v for v in node.outputs if place[v] is None]
        for v in free:
            host = any(place[r.outputs[0]] == "host" for r in readers.get(v, []) if r.outputs)
            place[v] = "host" if host and v not in graph.outputs else "device"
    return {v.id for v, where in place.items() if where == "host" and v.kind == "tensor"}


def place_transfers(graph: Graph) -> None:
    """Copy values between the program's device and the host where a node reads one from the other side.

    The file's ``to_device`` nodes are dropped and the copies inserted again for the device the
    program is loaded onto: none on the cpu, host-to-device ones where a device node reads a
    host value (one per value). A graph output stays where the file put it.
    """
    alias: dict = {}
    copies: dict = {}
    nodes: list = []

    def on(v: Value, device) -> Value:
        v = alias.get(v, v)
        if v.kind != "tensor" or device is None or as_device(v.device) == as_device(device):
            return v
        key = (v, as_device(device))
        if key not in copies:
            out = Value(graph._next_id, v.shape, v.dtype, as_device(device))
            graph._next_id += 1
            node = Node(transfer_op, (v,), {"source": v.device}, [out])
            out.producer = node
            nodes.append(node)
            copies[key] = out
        return copies[key]

    for node in graph.nodes:
        if node.op is transfer_op:
            alias[node.outputs[0]] = alias.get(node.args[0], node.args[0])
            continue
        device = node.outputs[0].device if node.outputs and node.outputs[0].kind == "tensor" else None
        node.replace_inputs(lambda v, device=device: on(v, device))
        nodes.append(node)
    graph.nodes = nodes
    graph.outputs = [on(v, v.device if v.kind == "tensor" else None) for v in graph.outputs]
    verify(graph)
