"""Extraction: a ``CompiledFunction``'s last specialization and current state as a ``Program``."""

from __future__ import annotations

import numpy as np

from munet._tensor import Tensor
from munet.compiler.saving.host import host_values
from munet.compiler.saving.program import Program, registry_nodes, result_structure
from munet.compiler.saving.state_names import StateNames
from munet.ops.random import Generator


def extract(compiled) -> Program:
    """The most recently used specialization of a ``CompiledFunction`` with its current state."""
    from munet.compiler.compiled import _hyper_fetcher

    spec = compiled._last
    if spec is None:
        raise RuntimeError("munet.save: the compiled function has not been called yet; nothing is traced to save")
    record = compiled._last_call
    if record is not None:
        where = "; ".join(str(b) for b in record.breaks)
        raise RuntimeError(
            f"munet.save: the last compiled call ran as {len(record.ops_per_graph)} graphs with Python between "
            f"them (graph breaks: {where}); a saved program is one graph. Move the host reads out of the "
            "function (munet.compile(fullgraph=True) names each) and save again"
        )
    if spec.joint is not None:
        raise RuntimeError(
            "munet.save: the last compiled call was a forward whose outputs autograd differentiates (it has a "
            "compiled backward, which a saved program does not carry); call it under munet.no_grad() before "
            "saving for inference, or save a compiled training step"
        )
    if any(target[0] == "item" for target, _ in spec.bindings):
        raise RuntimeError(
            "munet.save: the last compiled call created optimizer state (the first optimizer step), so its graph "
            "is not the steady training step; call the compiled step once more before saving"
        )
    written = sorted(
        {target[1] for target, _ in spec.bindings if target[0] == "arg_grad"}
        | {v.source[1] for v in spec.graph.inputs if isinstance(v.source, tuple) and v.source[0] == "arg_grad"}
    )
    if written:
        raise RuntimeError(
            f"munet.save: the compiled step writes the .grad of tensor argument(s) {written} (leaves that require "
            "grad); a saved program takes plain arguments: pass them detached, or return the gradients instead"
        )
    if spec.arg_writes:
        raise RuntimeError(
            f"munet.save: the compiled step writes in place into tensor argument(s) {[k for k, _ in spec.arg_writes]}; "
            "a saved program takes plain arguments: return the new values instead"
        )
    names = StateNames(compiled)
    prog = Program()
    graph = spec.graph
    prog.graph = graph
    prog.device = spec.backend.device
    for v in graph.inputs:
        src = v.source
        if isinstance(src, Tensor):
            name = names.of_storage(src)
            prog.roles.append(("state", name))
            prog.state[name] = _host_array(src)
            prog.state_dtypes[name] = v.dtype
        elif isinstance(src, tuple) and src[0] == "arg":
            prog.roles.append(("arg", src[1]))
        else:
            name = names.of_hyper(*src)
            prog.roles.append(("hyper", name))
            prog.hyper[name] = _hyper_fetcher(*src)(None)
    n = spec.n_results
    for j, t in enumerate(spec.state_writes):
        prog.state_outputs.append((n + j, names.of_storage(t)))
    for target, index in spec.bindings:
        leaf = target[1]
        name = names.of_grad(leaf)
        if index is None:
            prog.cleared.append(name)
            continue
        prog.state_outputs.append((index, name))
        if leaf.grad is not None and name not in prog.state:
            prog.state[name] = _host_array(leaf.grad)
        prog.state_dtypes[name] = graph.outputs[index].dtype
    prog.state_kinds = {name: names.kinds.get(name, "tensor") for name in prog.state_dtypes}
    for name in prog.cleared:
        prog.state_kinds.setdefault(name, "grad")
    prog.results = list(spec.out_template)
    prog.tree = result_structure(spec.out_rebuild, len(spec.out_template))
    prog.guards = list(spec.guards)
    prog.fuse = bool(getattr(spec, "fuse", False)) and compiled.optimize
    generators = []
    for node in registry_nodes(graph):
        for v in node.attrs.values():
            if isinstance(v, Generator) and all(g is not v for g in generators):
                generators.append(v)
    prog.generators = [(f"rng.{i}", g) for i, g in enumerate(generators)]
    prog.host = host_values(graph, prog)
    return prog


def _host_array(t: Tensor) -> np.ndarray:
    """A tensor's data in host memory (read back from the device once, at save time)."""
    return t.numpy(force=True)
