"""Writing: a ``Program`` as the manifest and tensors of a program file (``save_program``)."""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet._device import as_device
from munet.compiler.ir import CONSTANT, Graph, ScalarOp, Value
from munet.compiler.saving.encoding import COMPARISON_NAMES, encode
from munet.compiler.saving.extraction import extract
from munet.compiler.saving.program import PROGRAM_VERSION, GuardScalar, Program, registry_nodes
from munet.compiler.saving.runtime import LoadedProgram
from munet.ops.convert import transfer_op
from munet.serialization import PROGRAM_FORMAT, write_file


def save_program(obj, f, *, metadata: dict | None = None) -> None:
    """Write a compiled step (its last specialization) or a loaded program to ``f``; see the module doc."""
    prog = obj._host_program() if isinstance(obj, LoadedProgram) else extract(obj)
    manifest, entries = encode_program(prog)
    write_file(f, entries, manifest, metadata)


def encode_program(prog: Program) -> tuple[dict, list]:
    from munet.serialization import FORMAT_VERSION

    graph = prog.graph
    generator_ids = {id(g): i for i, (_, g) in enumerate(prog.generators)}

    def generator_index(g):
        return generator_ids[id(g)]

    entries = []
    values = []
    nodes = []
    seen = set()

    def add_value(v: Value):
        if v.id in seen:
            return
        seen.add(v.id)
        shape = None if v.shape is None else [int(s) for s in v.shape]
        entry = {"id": v.id, "kind": v.kind, "shape": shape, "dtype": None if v.dtype is None else v.dtype.name}
        if v.id in prog.host:
            entry["host"] = True
        values.append(entry)

    for v in graph.inputs:
        add_value(v)
    for node in registry_nodes(graph):
        for v in node.outputs:
            add_value(v)
        transfer = node.op is transfer_op  # its source device is its argument's: no attributes
        # a device attribute of a node on the program's device follows the program; on the host it stays cpu
        device = None if node.outputs and node.outputs[0].id in prog.host else prog.device
        record = {
            "op": _op_name(node.op),
            "args": [encode(a, generator_index, device) for a in node.args],
            "attrs": {} if transfer else {k: encode(v, generator_index, device) for k, v in node.attrs.items()},
            "outputs": [v.id for v in node.outputs],
        }
        if node.op is CONSTANT:
            name = f"constant.{node.outputs[0].id}"
            record["constant"] = name
            value = node.outputs[0]
            array = _constant_array(node.constant, value)
            entries.append((name, value.dtype, value.shape, _bytes(array)))
        nodes.append(record)
    for name, array in prog.state.items():
        entries.append((f"state.{name}", prog.state_dtypes[name], tuple(array.shape), _bytes(array)))
    for name, number in prog.hyper.items():
        entries.append((f"hyper.{name}", D.float64, (), np.float64(number).tobytes()))
    for name, g in prog.generators:
        state = g.get_state().numpy()
        entries.append((name, D.uint8, tuple(state.shape), _bytes(state)))
    manifest = {
        "format": PROGRAM_FORMAT,
        "version": FORMAT_VERSION,
        "program_version": PROGRAM_VERSION,
        "device": str(prog.device),  # where it was saved from (information only: it loads on any device)
        "fuse": prog.fuse,
        "graph": {
            "values": values,
            "inputs": [v.id for v in graph.inputs],
            "nodes": nodes,
            "outputs": [v.id for v in graph.outputs],
        },
        "roles": [list(r) for r in prog.roles],
        "state": [
            {"name": name, "kind": prog.state_kinds.get(name, "tensor"), "dtype": prog.state_dtypes[name].name}
            for name in prog.state_dtypes
        ],
        "state_outputs": [[index, name] for index, name in prog.state_outputs],
        "cleared": list(prog.cleared),
        "generators": [{"name": name} for name, _ in prog.generators],
        "results": [r if isinstance(r, int) else {"const": encode(r[1], None)} for r in prog.results],
        "tree": prog.tree,
        "guards": [
            {
                "scalar": _scalar_expression(value, graph),
                "compare": COMPARISON_NAMES[fn],
                "other": encode(other, None),
                "outcome": bool(outcome),
            }
            for value, fn, other, outcome in prog.guards
        ],
    }
    return manifest, entries


def _op_name(op) -> str:
    if op is CONSTANT:
        return "constant"
    if isinstance(op, ScalarOp):
        return "scalar." + op.name
    return op.name


def _constant_array(constant, value: Value) -> np.ndarray:
    """A folded constant in host memory with its value's dtype (a device graph may hold it on the device)."""
    from munet._device import get_backend

    if not isinstance(constant, np.ndarray) and hasattr(constant, "buffer"):  # a VkView
        constant = get_backend(as_device(value.device)).to_numpy(constant)
    return np.asarray(constant, dtype=value.dtype.np).reshape(value.shape)


def _bytes(array) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def _scalar_expression(value: Value, graph: Graph):
    """A guard's scalar as an expression tree over hyperparameter inputs (its nodes may be gone from the graph)."""
    if isinstance(value, GuardScalar):
        return value.expression
    if not isinstance(value, Value):
        return encode(value, None)
    if value.producer is None:
        if value not in graph.inputs:
            raise RuntimeError(f"munet.save: guard on {value}, which is not a graph input")
        return {"input": value.id}
    node = value.producer
    return {"op": node.op.name, "args": [_scalar_expression(a, graph) for a in node.args]}
