"""Replay of an optimized graph: a flat list of prepared kernel calls.

``Executable(graph)`` assigns every value a slot in one environment list and turns each node
into a closure that reads its argument slots, calls the backend kernel (the same function
eager ``apply`` calls, without autograd or dispatch) and stores its outputs. View nodes
recompute their geometry with the op's own view rule; scalar nodes do host arithmetic;
constants are filled in once. ``run(inputs)`` returns the environment values of
``graph.outputs``. This increment lowers to the ``cpu`` backend's NumPy kernels only.
"""

from __future__ import annotations

import numpy as np

from munet._device import as_device, get_backend
from munet._tensor import Tensor
from munet.compiler.arena import Arena
from munet.compiler.ir import CONSTANT, Graph, ScalarOp, Value, format_node
from munet.compiler.lower_cpu import new_counters, prepare_fused
from munet.compiler.passes.fuse import FUSED


class Executable:
    """The lowered plan of one graph on one backend."""

    def __init__(self, graph: Graph, device, *, plan_memory: bool = True, donors: dict | None = None):
        self.graph = graph
        self.backend = get_backend(as_device(device))
        if self.backend.device.type != "cpu":
            raise NotImplementedError(
                f"munet.compile: this version replays graphs on 'cpu' only, got device '{self.backend.device}'"
            )
        self.slot: dict[Value, int] = {}
        for v in graph.inputs:
            self._assign(v)
        # memory planning (passes/memory.py): planned outputs are written into one arena per dtype
        self.arena = Arena(graph, donors, self.slot) if plan_memory else None
        self.codegen = new_counters()  # fused groups: generated kernels, NumPy fallbacks, cache hits
        self.env_template: list = [None] * 0
        self.steps: list = []
        self.plan: list[str] = []
        constants = {}
        for node in graph.nodes:
            for v in node.outputs:
                self._assign(v)
            if node.op is CONSTANT:
                constants[self.slot[node.outputs[0]]] = node.constant
                continue
            self.steps.append(self._prepare(node))
            self.plan.append(format_node(node))
        self.env_template = [None] * len(self.slot)
        for i, array in constants.items():
            self.env_template[i] = array
        self.input_slots = [self.slot[v] for v in graph.inputs]
        self.output_slots = [self.slot[v] for v in graph.outputs]
        self.constant_slots = set(constants)
        self.kernels = sum(1 for node in graph.nodes if _is_kernel(node))
        self.arena_slots = {self.slot[v] for v in self.arena.plan.offsets} if self.arena else set()

    def _assign(self, v: Value) -> None:
        self.slot[v] = len(self.slot)

    def _getter(self, a):
        if isinstance(a, Value):
            i = self.slot[a]
            return lambda env: env[i]
        if isinstance(a, (list, tuple)) and any(isinstance(x, Value) for x in a):
            subs = [self._getter(x) for x in a]
            kind = type(a)
            return lambda env: kind(f(env) for f in subs)
        return lambda env: a

    def _prepare(self, node):
        arg_fns = [self._getter(a) for a in node.args]
        static = {k: v for k, v in node.attrs.items() if not _has_value(v)}
        dynamic = [(k, self._getter(v)) for k, v in node.attrs.items() if _has_value(v)]
        outs = [self.slot[v] for v in node.outputs]
        if isinstance(node.op, ScalarOp):
            fn, out = node.op.fn, outs[0]

            def scalar_step(env):
                env[out] = fn(*[f(env) for f in arg_fns])

            return scalar_step
        if node.op is FUSED:
            return prepare_fused(node, self)
        if node.op.view is not None:
            return _view_step(node.op, static, arg_fns[0], outs[0], self.backend)
        if self.arena is not None and len(outs) == 1:
            planned = self.arena.prepare(node, arg_fns, static, dynamic, outs[0])
            if planned is not None:
                return planned
        kernel = self.backend.kernels.get(node.op.name)
        if kernel is None:
            from munet._device import DeviceError

            raise DeviceError(f"{node.op.name}: no kernel for device '{self.backend.device}'")
        wrap = self.backend.wrap
        np_dtypes = [v.dtype.np for v in node.outputs]

        def finish(raw, np_dtype):
            data = wrap(raw, np_dtype)[2]
            return data if data.flags.c_contiguous else np.ascontiguousarray(data)

        if len(outs) == 1:
            out, np_dtype = outs[0], np_dtypes[0]

            def kernel_step(env):
                attrs = static
                if dynamic:
                    attrs = dict(static)
                    for k, f in dynamic:
                        attrs[k] = f(env)
                env[out] = finish(kernel(*[f(env) for f in arg_fns], **attrs), np_dtype)

            return kernel_step

        def multi_step(env):
            attrs = dict(static)
            for k, f in dynamic:
                attrs[k] = f(env)
            raw = kernel(*[f(env) for f in arg_fns], **attrs)
            for o, r, d in zip(outs, raw, np_dtypes):
                env[o] = finish(r, d)

        return multi_step

    def run(self, inputs: list) -> list:
        env = list(self.env_template)
        for i, x in zip(self.input_slots, inputs):
            env[i] = x
        for step in self.steps:
            step(env)
        return [env[i] for i in self.output_slots]

    def describe(self) -> str:
        lines = [f"plan on {self.backend.device}: {len(self.steps)} steps ({self.kernels} kernels)"]
        for i, text in enumerate(self.plan):
            lines.append(f"  [{i:3d}] {text}")
        return "\n".join(lines)


def _has_value(v) -> bool:
    if isinstance(v, Value):
        return True
    return isinstance(v, (list, tuple)) and any(_has_value(x) for x in v)


def _is_kernel(node) -> bool:
    return node.op is not CONSTANT and not isinstance(node.op, ScalarOp) and node.op.view is None


def _view_step(op, attrs, source, out, backend):
    view_rule = op.view

    def view_step(env):
        t = Tensor._from_numpy(source(env))
        shape, stride, offset = view_rule(t, **attrs)
        env[out] = backend.view(t._storage.data, shape, stride, offset)

    return view_step
