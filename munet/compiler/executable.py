"""Replay of an optimized graph: a flat list of prepared kernel calls, on any backend.

``Executable(graph, device)`` assigns every value a slot in one environment list and turns each
node into a closure that reads its argument slots, calls the backend kernel (the same function
eager ``apply`` calls, without autograd or dispatch) and stores its outputs. View nodes
recompute their geometry with the op's own view rule; scalar nodes do host arithmetic;
constants are filled in once. ``run(inputs)`` returns the environment values of
``graph.outputs``.

Each node runs on the backend of the device its outputs live on: a vulkan graph may hold a few
cpu nodes (Adam's step count is a cpu tensor, as in PyTorch), and ``to_device`` nodes copy
between the two. What differs per device type is a *target* (``compiler/target.py``), the class
the device's backend registered: ``lower_cpu.CpuTarget`` (NumPy arrays, the memory arena, fused
groups as generated C) and ``lower_vulkan.VulkanTarget`` (VkViews that stay on the device, fused
groups as generated WGSL, a whole call recorded into one command buffer). Callers run a call inside
``executable.scope()`` and move results with the target's ``clone``/``copy_into``.
"""

from __future__ import annotations

from munet._device import DeviceError, as_device, compile_target, get_backend
from munet.compiler.arena import Arena
from munet.compiler.ir import CONSTANT, Graph, ScalarOp, Value, format_node
from munet.compiler.passes.fuse import FUSED
from munet.compiler.trace import format_location

TRANSFER = "to_device"


def target_for(backend):
    """The compile target the backend of ``backend``'s device registered, built for ``backend``."""
    return compile_target(backend.device)(backend)


class Executable:
    """The lowered plan of one graph on one device (plus the cpu nodes it holds)."""

    def __init__(
        self,
        graph: Graph,
        device,
        *,
        plan_memory: bool = True,
        donors: dict | None = None,
        dynamic: bool = False,
        capture_graphs: bool = False,
        size_symbols: tuple | None = None,
    ):
        self.graph = graph
        self.dynamic = dynamic  # cpu: generated kernels take their leading size at run time (codegen/c_slabs.py)
        # cpu: (sizes, terms, bases) of resize.size_symbols: kernels holding them take them at run time (c_symbolic.py)
        self.size_symbols = size_symbols
        # a target with a step_runner (cuda: CUDA graph replay) may replay the whole plan as one graph
        self.capture_graphs = capture_graphs and plan_memory
        self.backend = get_backend(as_device(device))
        self.target = target_for(self.backend)
        self._targets = {self.backend.device: self.target}
        self.slot: dict[Value, int] = {}
        for v in graph.inputs:
            self._assign(v)
        # memory planning (passes/memory.py) writes planned outputs into one NumPy arena per
        # dtype (cpu); elsewhere results come from the backend's allocator
        uses_arena = self.target.uses_arena
        self.arena = Arena(graph, donors, self.slot) if plan_memory and uses_arena else None
        # state output -> state input that a fused kernel updates in place (without an arena)
        self.inplace = self.target.plan_inplace(graph, donors or {}) if plan_memory and not uses_arena else {}
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
        runner = getattr(self.target, "step_runner", None)
        self.run_steps = (runner and runner(self)) or self._run_steps
        # values in memory the plan reuses at every call (not handed out: callers clone them)
        planned = self.arena.plan.offsets if self.arena else getattr(self.target, "planned_values", ())
        self.arena_slots = {self.slot[v] for v in planned}

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

    def members_step(self, node, device):
        """A step running a fused group's member nodes with ``device``'s unfused kernels (a target's
        fallback for a group its renderer cannot express)."""
        group = node.attrs["group"]
        sub = Graph()
        sub.inputs = list(group.inputs)
        sub.nodes = list(group.members)
        sub.outputs = list(group.outputs)
        inner = Executable(sub, device, plan_memory=False)
        in_slots = [self.slot[v] for v in group.inputs]
        out_slots = [self.slot[v] for v in group.outputs]

        def members_step(env):
            for i, r in zip(out_slots, inner.run([env[i] for i in in_slots])):
                env[i] = r

        return members_step

    def scope(self):
        """The context one call runs in (on vulkan: one command buffer, submitted at its end)."""
        return self.target.scope()

    def run(self, inputs: list) -> list:
        env = self.new_env(inputs)
        self.run_steps(env)
        return [env[i] for i in self.output_slots]

    @property
    def memory_plan(self):
        """The plan's arena layout (``passes/memory.py``): the cpu arena's, or the target's own (cuda)."""
        return self.arena.plan if self.arena is not None else getattr(self.target, "memory_plan", None)

    def new_env(self, inputs: list) -> list:
        """The environment of one call: the constants, then ``inputs`` in their slots."""
        env = list(self.env_template)
        for i, x in zip(self.input_slots, inputs):
            env[i] = x
        return env

    def _run_steps(self, env: list, indices=None) -> None:
        """Run the steps (those at ``indices``, default all) in order on ``env``."""
        k = 0
        try:
            for k in range(len(self.steps)) if indices is None else indices:  # noqa: B007 (k names the failed step)
                self.steps[k](env)
        except Exception as error:  # a kernel's error (an index out of range): say which user line traced it
            _note_origin(error, self.step_nodes[k])
            raise

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
