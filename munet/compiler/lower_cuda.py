"""Lowering for cuda devices, rendering side: what a plan's nodes become as CUDA work.

:class:`CudaRendering` holds the cuda target's decisions that need no GPU, so a plan can be
rendered (and its kernels compiled by NVRTC) on any machine:

- ``generates`` is False: in a fusing plan every composite decomposes and fuses (softmax, layer
  norm, cross-entropy become fused reduction kernels), as on every device;
- :meth:`render_fused` turns a ``fused`` node into its kernel IR and that into CUDA C
  (``codegen/cuda.py``), cached per node; a group the renderer cannot express gives the reason
  instead, and runs its members with the eager kernels;
- :func:`plan_steps` lists a whole graph as :class:`PlannedStep` s: ``kernel`` (a rendered fused
  kernel), ``cublas`` (matmul and batched matmul, as the backend's cuBLAS kernel runs them), ``eager``
  (a primitive run by the backend's eager kernel), ``view`` (new geometry, no work), ``host``
  (scalar arithmetic).

:class:`CudaTarget` (the ``compile_target`` the cuda backend registers) subclasses it with values
and launch: fused kernels go through ``munet.backends.cuda.launch`` into one device arena laid out by
``passes/memory.py`` (state updates written over their state input where the plan allows it),
matmuls and other primitives through the backend's eager kernels (cuBLAS for matmul), and after a
warm-up call the whole plan is captured as one CUDA graph and replayed (``lower_cuda_graphs.py``).
Tests render plans of whole training steps with a cpu stand-in device
(``tests/backends/test_cuda_plans.py``) and run compiled steps on the fake devices
(``tests/backends/test_cuda_compiled_emulated.py``, ``test_cuda_compiled_graphs.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from munet._device import as_device
from munet.compiler.codegen.cuda import UnsupportedKernelError, render_cuda, takes_fault_record
from munet.compiler.codegen.kernel import kernel_from_group, loads_only_at_write_index
from munet.compiler.ir import CONSTANT, ScalarOp
from munet.compiler.passes.fuse import FUSED
from munet.compiler.passes.memory import MemoryPlan, nbytes, plan_memory

BLAS_OPS = frozenset({"matmul", "bmm", "mm", "addmm", "baddbmm"})


@dataclass(frozen=True)
class PlannedStep:
    kind: str  # "kernel", "cublas", "eager", "view" or "host"
    name: str  # the node's op name (a fused kernel: its kernel's name)
    source: object = None  # a CudaSource for "kernel"
    reason: str = ""  # why a fused group runs unfused


class CudaRendering:
    """The cuda target's GPU-free half (see the module docstring)."""

    uses_arena = False
    fused_dtypes = ("bool", "i64")
    fuses_integer_division = True  # a zero divisor goes to the device's fault record
    reuses_programs = False  # plans (and their CUDA graphs) are rebuilt per shape

    def __init__(self, backend=None):
        self.backend = backend
        self._rendered: dict = {}

    @staticmethod
    def generates(node) -> bool:
        return False

    def render_fused(self, node):
        """``(CudaSource, kernel, tensor inputs, scalar inputs)`` of a fused node, or why it has none."""
        cached = self._rendered.get(node)
        if cached is not None:
            return cached
        try:
            kernel, tensors, scalars = kernel_from_group(node.attrs["group"])
            result = (render_cuda(kernel), kernel, tensors, scalars)
        except (UnsupportedKernelError, KeyError) as exc:
            result = f"no kernel IR rule for {exc}" if isinstance(exc, KeyError) else str(exc)
        self._rendered[node] = result
        return result

    def describe_fused(self, node) -> list[str]:
        rendered = self.render_fused(node)
        if isinstance(rendered, str):
            return [f"  (unfused: {rendered})"]
        src = rendered[0]
        header = f"// {src.name}:"  # the kernel's own text starts here, after the shared prelude
        body = src.source[src.source.index(header) :] if header in src.source else src.source
        return ["  " + line for line in body.rstrip("\n").split("\n")]


def plan_steps(graph, rendering: CudaRendering | None = None) -> list[PlannedStep]:
    """The steps ``graph`` runs as on a cuda device (see the module docstring)."""
    rendering = rendering or CudaRendering()
    steps = []
    for node in graph.nodes:
        if node.op is CONSTANT:
            continue
        if isinstance(node.op, ScalarOp):
            steps.append(PlannedStep("host", node.name))
        elif node.op is FUSED:
            rendered = rendering.render_fused(node)
            if isinstance(rendered, str):
                steps.append(PlannedStep("eager", node.name, reason=rendered))
            else:
                steps.append(PlannedStep("kernel", rendered[0].name, rendered[0]))
        elif node.op.view is not None:
            steps.append(PlannedStep("view", node.name))
        elif node.op.name in BLAS_OPS:
            steps.append(PlannedStep("cublas", node.op.name))
        else:
            steps.append(PlannedStep("eager", node.op.name))
    return steps


class CudaTarget(CudaRendering):
    """The compile target of ``cuda:N`` devices: values are CuPy arrays on the device.

    Unfused nodes call the backend's eager kernels (the functions eager runs); views are new CuPy
    views, no device work; a ``fused`` node launches its rendered CUDA C (``render_fused``) through
    ``munet.backends.cuda.launch`` on contiguous inputs; a group the renderer cannot express runs its
    members unfused.

    Memory: the fused kernels' and matmuls' outputs are planned by ``passes/memory.py`` into one
    device allocation (the *arena*: one block per dtype at fixed offsets, reused after each value's
    last reader; cuBLAS writes a planned matmul's output there), and a state update (a parameter,
    an optimizer moment) is written over its state input when the plan allows it (nothing reads the
    input afterwards and the kernel reads it only at the index it writes), so no copy-back follows. Other results come from the device's pool. The
    run-time scalars of every fused kernel (learning rates...) live in one float64 device block,
    each kernel reading its slice through ``p``: uploaded slice by slice before each launch, or all
    at once before a graph replay. :meth:`step_runner` gives the plan its CUDA graph replay
    (``lower_cuda_graphs.GraphReplay``) when the compile asked for it.
    """

    def __init__(self, backend):
        super().__init__(backend)
        self.runtime = backend.runtime
        self.counters = {"generated": 0, "fallback": 0, "loaded": 0, "fallback_reasons": [], "inplace_updates": 0}
        self.memory_plan: MemoryPlan | None = None
        self.arena = None  # the one device allocation of the planned values
        self.arena_views: dict = {}  # planned value -> its view of the arena
        self.params_host = np.zeros(0, np.float64)  # the fused kernels' run-time scalars
        self.params_device = None
        self.param_steps: list = []  # (offset, the env slots of the scalars) per fused kernel
        self.graph_replay = None
        self.upload_params_per_kernel = True  # False while a graph owns the upload (lower_cuda_graphs.py)

    # values -------------------------------------------------------------------------------------
    def result(self, raw, np_dtype):
        return self.backend.wrap(raw, np_dtype)[2]

    def view_step(self, op, attrs, source, out, value):
        from munet._tensor import Storage, Tensor
        from munet.backends.cuda import copies

        view_rule, backend = op.view, self.backend

        def view_step(env):
            x = source(env)
            strides = tuple(s // x.itemsize for s in x.strides)
            t = Tensor._make(Storage(x, backend), x.shape, strides, 0, copies.dtype_of(x), x)
            env[out] = backend.view(x, *view_rule(t, **attrs))

        return view_step

    def constant(self, value):
        return value if isinstance(value, self.runtime.cupy.ndarray) else self.upload(value)

    def argument(self, tensor):
        return tensor._data

    def upload(self, host):
        host = np.ascontiguousarray(host)
        return self.backend.from_numpy(host).reshape(host.shape)

    def download(self, data):
        return self.backend.to_numpy(data)

    def upload_into(self, dst, host) -> None:
        """Write the host array ``host`` into the device array ``dst`` (same shape and dtype)."""
        from munet.backends.cuda import copies

        flat = np.ascontiguousarray(host).reshape(-1).view(copies.host_dtype(host.dtype))
        with self.runtime.scope():
            dst.reshape(-1).set(flat)

    def clone(self, data):
        with self.runtime.scope():
            return self.runtime.cupy.array(data, copy=True, order="C")

    def copy_into(self, dst, src) -> None:
        self.backend.copy_(dst, src)

    @staticmethod
    def same_memory(a, b) -> bool:
        return a.data.ptr == b.data.ptr and a.shape == b.shape and a.strides == b.strides

    def scope(self):
        return self.runtime.scope()

    # memory ---------------------------------------------------------------------------------------
    def plan_inplace(self, graph, donors: dict) -> dict:
        """Plan the fused kernels' outputs into the arena (allocated now) and return the state
        updates written over their state input (see the class docstring)."""

        def writes_planned(node) -> bool:
            if not node.outputs or as_device(node.outputs[0].device) != self.backend.device:
                return False
            if node.op is FUSED:
                return not isinstance(self.render_fused(node), str)
            return node.op is not CONSTANT and getattr(node.op, "name", None) == "matmul" and _blas_output(node)

        def overwrites(node, source) -> bool:
            if node.op is not FUSED:
                return False  # cuBLAS cannot write over its operand
            _, kernel, tensors, _ = self.render_fused(node)
            return source in tensors and loads_only_at_write_index(kernel, tensors.index(source))

        plan = self.memory_plan = plan_memory(graph, writes_planned, donors, overwrites)
        bases, total = {}, 0
        for key, size in plan.arena_bytes.items():  # the dtypes' blocks, one after the other
            bases[key], total = total, total + size
        if total:
            from munet._tensor import contiguous_strides

            with self.runtime.scope():
                self.arena = self.runtime.cupy.empty(total, np.uint8)
            for v, (key, offset) in plan.offsets.items():
                flat = self.backend.view(self.arena, (nbytes(v),), (1,), bases[key] + offset)
                shape = tuple(v.shape)
                self.arena_views[v] = self.backend.view(
                    flat.view(_storage_dtype(v.dtype)), shape, contiguous_strides(shape), 0
                )
        return plan.inplace

    @property
    def planned_values(self):
        """Values whose memory the plan reuses at every call (the executable does not hand them out)."""
        replay = self.graph_replay
        return set(self.arena_views) | (replay.static_values if replay is not None else set())

    def generated_step(self, node, executable):
        """A matmul whose output is planned: cuBLAS writes into its arena view (else None: the
        backend's kernels run it)."""
        view = self.arena_views.get(node.outputs[0]) if node.outputs else None
        if view is None or node.op is FUSED:
            return None
        from munet.backends.cuda.kernels_blas import matmul_into

        a, b = (executable.slot[v] for v in node.args[:2])
        out, rt = executable.slot[node.outputs[0]], self.runtime

        def matmul_step(env):
            with rt.scope():
                env[out] = matmul_into(rt, env[a], env[b], view)

        return matmul_step

    def step_runner(self, executable):
        """The plan's CUDA graph replay, or None (capture not asked for, or a sub-plan)."""
        if not executable.capture_graphs:
            return None
        from munet.compiler.lower_cuda_graphs import GraphReplay

        self.graph_replay = GraphReplay(executable, self)
        return self.graph_replay.run

    # fused groups ---------------------------------------------------------------------------------
    def fused_step(self, node, executable):
        rendered = self.render_fused(node)
        if isinstance(rendered, str):
            self.counters["fallback"] += 1
            self.counters["fallback_reasons"].append(rendered)
            return executable.members_step(node, self.backend.device)
        from munet.backends.cuda import launch

        src, kernel, tensors, scalars = rendered
        node.attrs["group"].kernel = kernel
        self.counters["generated"] += 1
        self.counters["loaded"] += int(launch.is_loaded(self.runtime, src))
        slot = executable.slot
        in_slots = [slot[v] for v in tensors]
        param_slot = self._reserve_params([slot[v] for v in scalars])
        outs = [(slot[v], tuple(v.shape), v.dtype) for v in node.outputs]
        planned = [self.arena_views.get(v) for v in node.outputs]
        # an output written over its state input: (output position, input position)
        inplace = [
            (k, tensors.index(executable.inplace[v])) for k, v in enumerate(node.outputs) if v in executable.inplace
        ]
        self.counters["inplace_updates"] += len(inplace)
        rt, numel, target = self.runtime, kernel.numel, self
        faults = takes_fault_record(src)  # an integer division: a zero divisor raises at the next sync

        def fused_step(env):
            with rt.scope():
                cp = rt.cupy
                inputs = [cp.ascontiguousarray(env[i]) for i in in_slots]
                results = list(planned)
                for k, i in inplace:
                    if inputs[i] is env[in_slots[i]]:  # the state's own contiguous memory: write it there
                        results[k] = inputs[i]
                for k, (_, shape, dtype) in enumerate(outs):
                    if results[k] is None:
                        results[k] = rt.empty(shape, dtype)
                if target.upload_params_per_kernel:
                    target.upload_params(env, param_slot)
                params = target.params_pointer(param_slot)
                pointers = [a.data.ptr for a in (*inputs, *results)] + [params]
                if faults:
                    pointers.append(rt.asserts.record())
                if numel:
                    launch.launch(rt, src, numel, [(t, p) for (t, _), p in zip(src.params, pointers, strict=True)])
                    if faults:
                        rt.asserts.launched()
            for (i, _, _), r in zip(outs, results):
                env[i] = r

        return fused_step

    def _reserve_params(self, slots: list) -> int:
        """A slice of the parameter block for one fused kernel's scalars; its index in ``param_steps``."""
        offset = len(self.params_host)
        self.params_host = np.zeros(offset + max(1, len(slots)), np.float64)
        self.param_steps.append((offset, slots))
        self.params_device = None  # allocated at the first upload, at the block's final size
        return len(self.param_steps) - 1

    def _params_block(self):
        if self.params_device is None:
            with self.runtime.scope():
                self.params_device = self.runtime.cupy.empty(len(self.params_host), np.float64)
        return self.params_device

    def params_pointer(self, step: int) -> int:
        return self._params_block().data.ptr + 8 * self.param_steps[step][0]

    def upload_params(self, env, step: int | None = None) -> None:
        """Copy the run-time scalars of one fused kernel (``step``) or of all into the device block."""
        block = self._params_block()
        steps = range(len(self.param_steps)) if step is None else (step,)
        for k in steps:
            offset, slots = self.param_steps[k]
            for j, i in enumerate(slots):
                self.params_host[offset + j] = float(env[i])
        if step is None:
            lo, hi = 0, len(self.params_host)
        else:
            offset, slots = self.param_steps[step]
            if not slots:
                return
            lo, hi = offset, offset + len(slots)
        with self.runtime.scope():
            block[lo:hi].set(self.params_host[lo:hi])

    def stats(self) -> dict:
        generated, unfused = self.counters["generated"], self.counters["fallback"]
        reasons = "; ".join(sorted(set(self.counters["fallback_reasons"])))
        replay = self.graph_replay
        return {
            "generated_code": generated > 0,
            "elementwise_kernels": "generated CUDA C" if generated else None,
            "fallback": f"unfused cuda kernels for {unfused} fused groups: {reasons}" if unfused else None,
            "c_compiler": None,
            "fused_groups": generated + unfused,
            "generated_kernels": generated,
            "kernel_cache_hits": self.counters["loaded"],  # fused kernels already loaded at plan time
            "shader_language": "cuda",
            "memory_plan": "one device arena for the fused kernels' and matmuls' outputs; other results from the pool",
            "inplace_updates": self.counters["inplace_updates"],
            **(replay.stats() if replay is not None else {"cuda_graphs": False, "cuda_graph": "not requested"}),
        }


def _blas_output(node) -> bool:
    """Whether a matmul node is one cuBLAS computes into a given buffer: two tensor operands of
    one floating dtype, one output."""
    from munet.compiler.ir import Value

    args = node.args[:2]
    if len(node.outputs) != 1 or len(node.args) != 2 or not all(isinstance(v, Value) for v in args):
        return False
    dtype = node.outputs[0].dtype
    return (
        dtype is not None
        and dtype.name in ("float32", "float64", "float16", "bfloat16")
        and all(v.dtype is dtype for v in args)
    )


def _storage_dtype(dtype):
    from munet.backends.cuda import copies

    return copies.storage_dtype(dtype)
