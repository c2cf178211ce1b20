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
and launch: fused kernels go through ``munet.backends.cuda.launch``, matmuls and other primitives
through the backend's eager kernels (cuBLAS for matmul). It uses no arena, writes no state in
place and captures no CUDA graph yet. Tests render plans of whole training steps with a cpu
stand-in device (``tests/backends/test_cuda_plans.py``) and run compiled steps on the fake
devices (``tests/backends/test_cuda_compiled_emulated.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from munet.compiler.codegen.cuda import UnsupportedKernelError, render_cuda
from munet.compiler.codegen.kernel import kernel_from_group
from munet.compiler.ir import CONSTANT, ScalarOp
from munet.compiler.passes.fuse import FUSED

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
    ``munet.backends.cuda.launch`` on contiguous inputs into fresh outputs from the device's pool,
    the run-time scalars in a small float64 device array ``p``; a group the renderer cannot express
    runs its members unfused. State updates are copied back after the call (``copy_into``): no
    fused kernel writes over its input yet, no arena (the pool hands the same blocks back at every
    call), and no CUDA graph capture: each call launches its kernels one by one.
    """

    def __init__(self, backend):
        super().__init__(backend)
        self.runtime = backend.runtime
        self.counters = {"generated": 0, "fallback": 0, "loaded": 0, "fallback_reasons": []}

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

    def plan_inplace(self, graph, donors: dict) -> dict:
        """``{}``: no fused kernel writes over its state input yet (updates are copied back)."""
        return {}

    def generated_step(self, node, executable):
        return None

    # fused groups ---------------------------------------------------------------------------------
    def fused_step(self, node, executable):
        rendered = self.render_fused(node)
        if isinstance(rendered, str):
            self.counters["fallback"] += 1
            self.counters["fallback_reasons"].append(rendered)
            return executable.members_step(node, self.backend.device)
        from munet.backends.cuda import copies, launch

        src, kernel, tensors, scalars = rendered
        node.attrs["group"].kernel = kernel
        self.counters["generated"] += 1
        self.counters["loaded"] += int(launch.is_loaded(self.runtime, src))
        slot = executable.slot
        in_slots = [slot[v] for v in tensors]
        param_slots = [slot[v] for v in scalars]
        outs = [(slot[v], tuple(v.shape), v.dtype) for v in node.outputs]
        rt, numel = self.runtime, kernel.numel

        def fused_step(env):
            with rt.scope():
                cp = rt.cupy
                inputs = [cp.ascontiguousarray(env[i]) for i in in_slots]
                results = [rt.empty(shape, dtype) for _, shape, dtype in outs]
                params = copies.from_host(cp, np.array([float(env[i]) for i in param_slots] or [0.0], np.float64))
                pointers = [a.data.ptr for a in (*inputs, *results, params)]
                if numel:
                    launch.launch(rt, src, numel, [(t, p) for (t, _), p in zip(src.params, pointers, strict=True)])
            for (i, _, _), r in zip(outs, results):
                env[i] = r

        return fused_step

    def stats(self) -> dict:
        generated, unfused = self.counters["generated"], self.counters["fallback"]
        reasons = "; ".join(sorted(set(self.counters["fallback_reasons"])))
        return {
            "generated_code": generated > 0,
            "elementwise_kernels": "generated CUDA C" if generated else None,
            "fallback": f"unfused cuda kernels for {unfused} fused groups: {reasons}" if unfused else None,
            "c_compiler": None,
            "fused_groups": generated + unfused,
            "generated_kernels": generated,
            "kernel_cache_hits": self.counters["loaded"],  # fused kernels already loaded at plan time
            "shader_language": "cuda",
            "memory_plan": "CuPy memory pool (no arena on cuda)",
            "cuda_graphs": False,
        }
