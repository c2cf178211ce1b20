"""Replay of an optimized graph: a flat list of prepared kernel calls, on any backend.

``Executable(graph, device)`` assigns every value a slot in one environment list and turns each
node into a closure that reads its argument slots, calls the backend kernel (the same function
eager ``apply`` calls, without autograd or dispatch) and stores its outputs. View nodes
recompute their geometry with the op's own view rule; scalar nodes do host arithmetic;
constants are filled in once. ``run(inputs)`` returns the environment values of
``graph.outputs``.

Each node runs on the backend of the device its outputs live on: a vulkan graph may hold a few
cpu nodes (Adam's step count is a cpu tensor, as in PyTorch), and ``to_device`` nodes copy
between the two. What differs per device type is a *target*: :class:`CpuTarget` (NumPy
arrays, the memory arena, fused groups as generated C through ``lower_cpu``) and
``lower_vulkan.VulkanTarget`` (VkViews that stay on the device, fused groups as generated
WGSL, a whole call recorded into one command buffer). Callers run a call inside
``executable.scope()`` and move results with the target's ``clone``/``copy_into``.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import numpy as np

from munet._device import DeviceError, as_device, get_backend
from munet._tensor import Tensor
from munet.compiler.arena import Arena
from munet.compiler.ir import CONSTANT, Graph, ScalarOp, Value, format_node
from munet.compiler.lower_cpu import new_counters, prepare_fused, prepare_generated
from munet.compiler.passes.fuse import FUSED
from munet.compiler.trace import format_location

TRANSFER = "to_device"


class CpuTarget:
    """The cpu side of a plan: contiguous NumPy results, the arena, generated C for fused groups."""

    def __init__(self, backend):
        self.backend = backend
        self.counters = new_counters()  # fused groups: generated kernels, NumPy fallbacks, cache hits

    def result(self, raw, np_dtype):
        data = self.backend.wrap(raw, np_dtype)[2]
        return data if data.flags.c_contiguous else np.ascontiguousarray(data)

    def view_step(self, op, attrs, source, out, value):
        view_rule, backend = op.view, self.backend
        geometry: dict = {}  # (shape, dtype) of a C-contiguous source -> the view's geometry

        def view_step(env):
            src = source(env)
            if src.flags.c_contiguous:  # the usual case: the geometry is computed once
                key = (src.shape, src.dtype)
                g = geometry.get(key)
                if g is None:
                    g = geometry[key] = view_rule(Tensor._from_numpy(src), **attrs)
                env[out] = backend.view(src.reshape(-1), *g)
                return
            t = Tensor._from_numpy(src)
            shape, stride, offset = view_rule(t, **attrs)
            env[out] = backend.view(t._storage.data, shape, stride, offset)

        return view_step

    def fused_step(self, node, executable):
        # lower_cpu reads codegen/slot/arena/backend; a cpu node of a vulkan plan has no arena
        arena = executable.arena if executable.target is self else None
        context = SimpleNamespace(
            codegen=self.counters, slot=executable.slot, arena=arena, backend=self.backend, dynamic=executable.dynamic
        )
        return prepare_fused(node, context)

    def generated_step(self, node, executable):
        """A generated kernel for a primitive node (``lower_cpu.prepare_generated``), or None."""
        if executable.target is not self:
            return None
        context = SimpleNamespace(
            codegen=self.counters, slot=executable.slot, arena=executable.arena, backend=self.backend
        )
        return prepare_generated(node, context)

    def constant(self, value):
        return value

    def argument(self, t: Tensor):
        return np.ascontiguousarray(t._data)

    def upload(self, host: np.ndarray):
        return host

    def download(self, data) -> np.ndarray:
        return np.ascontiguousarray(data)

    def scope(self):
        return contextlib.nullcontext()

    def clone(self, data):
        return np.array(data, copy=True)

    def copy_into(self, dst, src) -> None:
        np.copyto(dst, src, casting="unsafe")

    @staticmethod
    def same_memory(a, b) -> bool:
        return a.shape == b.shape and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]

    def describe_fused(self, node) -> list[str]:
        return []

    def stats(self) -> dict:
        return {}


def target_for(backend):
    """The target of ``backend``'s device type (cpu or vulkan)."""
    kind = backend.device.type
    if kind == "cpu":
        return CpuTarget(backend)
    if kind in ("vulkan", "webgpu"):
        from munet.compiler.lower_vulkan import VulkanTarget

        return VulkanTarget(backend)
    raise NotImplementedError(
        f"munet.compile: replay is implemented on 'cpu' and 'vulkan', got device '{backend.device}'"
    )


class Executable:
    """The lowered plan of one graph on one device (plus the cpu nodes it holds)."""

    def __init__(
        self, graph: Graph, device, *, plan_memory: bool = True, donors: dict | None = None, dynamic: bool = False
    ):
        self.graph = graph
        self.dynamic = dynamic  # cpu: generated kernels take their leading size at run time (codegen/c_slabs.py)
        self.backend = get_backend(as_device(device))
        self.target = target_for(self.backend)
        self._targets = {self.backend.device: self.target}
        self.slot: dict[Value, int] = {}
        for v in graph.inputs:
            self._assign(v)
        # memory planning (passes/memory.py) writes planned outputs into one NumPy arena per
        # dtype; on vulkan results come from the backend's caching allocator instead
        on_cpu = self.backend.device.type == "cpu"
        self.arena = Arena(graph, donors, self.slot) if plan_memory and on_cpu else None
        # state output -> state input that a fused kernel updates in place (vulkan; cpu: the arena)
        self.inplace = self.target.plan_inplace(graph, donors or {}) if plan_memory and not on_cpu else {}
        self.codegen = self.target.counters
        self.steps: list = []
        self.step_nodes: list = []  # the node of each step
        self.plan: list[str] = []
        constants = {}
        for node in graph.nodes:
            for v in node.outputs:
                self._assign(v)
            if node.op is CONSTANT:
                constants[self.slot[node.outputs[0]]] = self._target_of(node).constant(node.constant)
                continue
            self.steps.append(self._prepare(node))
            self.step_nodes.append(node)
            self.plan.append(format_node(node))
            if node.op is FUSED:
                self.plan.extend(self._target_of(node).describe_fused(node))
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

    def _target_of(self, node):
        """The target of the device ``node``'s outputs live on (the plan's own by default)."""
        return self.target_on(node.outputs[0].device if node.outputs else None)

    def target_on(self, device):
        """The target of ``device`` (a plan may hold values of a second device, see the docstring)."""
        if device is None:
            return self.target
        device = as_device(device)
        target = self._targets.get(device)
        if target is None:
            target = self._targets[device] = target_for(get_backend(device))
        return target

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
        target = self._target_of(node)
        if node.op is FUSED:
            return target.fused_step(node, self)
        if node.name == TRANSFER:
            return self._transfer_step(node, arg_fns[0], outs[0])
        if node.op.view is not None:
            return target.view_step(node.op, static, arg_fns[0], outs[0], node.outputs[0])
        generated = target.generated_step(node, self)
        if generated is not None:
            return generated
        if self.arena is not None and target is self.target:
            planned = self.arena.prepare(node, arg_fns, static, dynamic, outs)
            if planned is not None:
                return planned
        kernel = target.backend.kernels.get(node.op.name)
        if kernel is None:
            raise DeviceError(f"{node.op.name}: no kernel for device '{target.backend.device}'")
        finish = target.result
        np_dtypes = [v.dtype.np for v in node.outputs]

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

    def _transfer_step(self, node, source, out):
        """A ``to_device`` node: through host memory, as eager ``Tensor.to(device)`` does."""
        src = self.target_on(node.args[0].device)
        dst = self._target_of(node)
        shape = tuple(node.outputs[0].shape)

        def transfer_step(env):
            env[out] = dst.upload(src.download(source(env)).reshape(shape))

        return transfer_step

    def scope(self):
        """The context one call runs in (on vulkan: one command buffer, submitted at its end)."""
        return self.target.scope()

    def run(self, inputs: list) -> list:
        env = list(self.env_template)
        for i, x in zip(self.input_slots, inputs):
            env[i] = x
        k = 0
        try:
            for k, step in enumerate(self.steps):  # noqa: B007 (k names the failed step below)
                step(env)
        except Exception as error:  # a kernel's error (an index out of range): say which user line traced it
            _note_origin(error, self.step_nodes[k])
            raise
        return [env[i] for i in self.output_slots]

    def describe(self) -> str:
        lines = [f"plan on {self.backend.device}: {len(self.steps)} steps ({self.kernels} kernels)"]
        step = 0
        for text in self.plan:
            if text.startswith(" "):  # a fused kernel's source under its node
                lines.append(f"        {text}")
                continue
            lines.append(f"  [{step:3d}] {text}")
            step += 1
        return "\n".join(lines)


def _note_origin(error: Exception, node) -> None:
    if not node.origin:
        return
    error.add_note(
        f"munet.compile: raised by the compiled call's '{node.name}' node, traced at {format_location(node.origin)}"
    )


def _has_value(v) -> bool:
    if isinstance(v, Value):
        return True
    return isinstance(v, (list, tuple)) and any(_has_value(x) for x in v)


def _is_kernel(node) -> bool:
    return node.op is not CONSTANT and not isinstance(node.op, ScalarOp) and node.op.view is None
