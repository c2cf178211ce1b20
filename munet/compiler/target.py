"""The compile target: what a backend gives ``munet.compile`` to lower and replay a plan on its device.

A backend names its target class when it registers its device type
(``register_backend(..., compile_target="package.module:Class")``); the compiler asks
``munet._device.compile_target(device)`` for it and never looks at a device's name. Adding a
device is registering a backend with a target: no compiler file changes. The cpu target is
``lower_cpu.CpuTarget`` (NumPy arrays, the memory arena, fused groups as generated C), the
vulkan/webgpu one ``lower_vulkan.VulkanTarget`` (device views, fused groups as WGSL, one command
buffer per call). A target class is built as ``Target(backend)`` once per plan and device.
"""

from __future__ import annotations

from typing import Protocol


class CompileTarget(Protocol):
    """The methods and capabilities ``Executable`` and ``Compiled`` use (see the module docstring)."""

    # capabilities ---------------------------------------------------------------------------------
    uses_arena: bool
    """True: planned outputs live in one host arena per dtype (``compiler/arena.py``, NumPy data);
    False: results come from the backend's allocator and ``plan_inplace`` says which state updates
    a fused kernel writes over their input."""

    fused_dtypes: tuple
    """The kernel-IR dtypes besides the floats (``'bool'``, ``'i64'``) this target's fused kernels
    hold: ``passes/fuse.py`` groups nodes of those dtypes (comparisons, masks, index arithmetic)
    only for a target whose renderer computes them exactly as eager does."""

    fuses_integer_division: bool
    """Whether a fused kernel may divide integers (``floor_divide``, ``fmod``): its renderer reports
    a zero divisor as eager's ``ZeroDivisionError``."""

    reuses_programs: bool
    """Whether a dynamic compile may take an earlier optimized program of the same structure for a
    new size (``compiler/resize.py``): the target's fused kernels take their element counts at run
    time. False: each specialization is optimized and lowered on its own."""

    backend: object
    counters: dict  # how fused groups ran (``stats`` reports them)

    def __init__(self, backend) -> None: ...

    # lowering: each returns a step ``step(env)`` of the plan -----------------------------------------
    def fused_step(self, node, executable):
        """A ``fused`` node: its kernel IR rendered, built, loaded and launched (or its members run)."""

    @staticmethod
    def generates(node) -> bool:
        """Whether ``node`` runs as a generated kernel of its own on this target (``generated_step``);
        a composite node that does is kept by ``passes/decompose.py``."""

    def generated_step(self, node, executable):
        """A primitive node as a generated kernel, or None to run the backend's kernel."""

    def view_step(self, op, attrs, source, out, value):
        """A view node: new geometry over the same data."""

    def plan_inplace(self, graph, donors: dict) -> dict:
        """State output -> the state input a fused kernel overwrites (``{}`` when ``uses_arena``)."""

    # values ---------------------------------------------------------------------------------------
    def result(self, raw, np_dtype):
        """A backend kernel's result as the plan's value of dtype ``np_dtype``."""

    def constant(self, value):
        """A folded constant as the plan's value."""

    def argument(self, tensor):
        """A call's tensor argument as the plan's value."""

    def upload(self, host):
        """A host array as the plan's value (a ``to_device`` node's destination)."""

    def download(self, data):
        """A plan's value as a host array (a ``to_device`` node's source)."""

    def clone(self, data):
        """A copy of a plan's value that no one else holds."""

    def copy_into(self, dst, src) -> None:
        """Write ``src`` over ``dst`` (state written back after a call)."""

    def same_memory(self, a, b) -> bool:
        """Whether two values are the same memory (so no write-back is needed)."""

    def scope(self):
        """The context manager one call runs in (vulkan: one command buffer)."""

    # reporting ------------------------------------------------------------------------------------
    def describe_fused(self, node) -> list[str]:
        """Lines under a fused node in ``describe()`` (its generated source)."""

    def stats(self) -> dict:
        """``generated_code``, ``fallback``, ``fused_groups``, ``generated_kernels``,
        ``kernel_cache_hits``, ``c_compiler`` and any target-specific entries."""
