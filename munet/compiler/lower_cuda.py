"""Lowering for cuda devices, rendering side: what a plan's nodes become as CUDA work.

:class:`CudaRendering` holds the cuda target's decisions that need no GPU, so a plan can be
rendered (and its kernels compiled by NVRTC) on any machine:

- ``fast_composites`` is empty and ``generates`` is False: every composite decomposes and fuses
  (softmax, layer norm, cross-entropy become fused reduction kernels), as the fused CUDA kernels
  replace the fast eager ones;
- :meth:`render_fused` turns a ``fused`` node into its kernel IR and that into CUDA C
  (``codegen/cuda.py``), cached per node; a group the renderer cannot express gives the reason
  instead, and runs its members with the eager kernels;
- :func:`plan_steps` lists a whole graph as :class:`PlannedStep` s: ``kernel`` (a rendered fused
  kernel), ``cublas`` (matmul and batched matmul, as the backend's cuBLAS kernel runs them), ``eager``
  (a primitive run by the backend's eager kernel), ``view`` (new geometry, no work), ``host``
  (scalar arithmetic).

The device side's ``CudaTarget`` (``munet/backends/cuda/``) subclasses this with values, launch
and CUDA graph capture; tests render plans of whole training steps with a cpu stand-in device
(``tests/backends/test_cuda_plans.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    fast_composites = frozenset()

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
        body = rendered[0].source.split("// ", 1)[-1]
        return ["  // " + line if k == 0 else "  " + line for k, line in enumerate(body.rstrip("\n").split("\n"))]


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
