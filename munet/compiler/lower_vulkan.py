"""Lowering on the vulkan backend: the plan's values are VkViews that stay on the device.

:class:`VulkanTarget` is the executable's target for ``vulkan``/``webgpu`` devices:

- unfused nodes call the backend's kernels (``backend.kernels[name]``, the functions eager
  runs), which take and return VkView descriptors; views are new descriptors, no device work;
- a ``fused`` node is its group's kernel IR rendered as WGSL (``codegen/wgsl.py``), compiled
  into a pipeline once when the plan is built, and dispatched through ``Runtime.dispatch`` into
  fresh buffers from the caching allocator (no arena: the allocator hands the same blocks back
  at every call, see docs/decisions.md). A group the renderer cannot express runs its member
  nodes with the unfused kernels; ``stats()`` counts and names those fallbacks;
- ``scope()`` records the whole call (and the write-back of state that follows it) inside
  ``Runtime.batch()`` and submits it at its end: one command buffer per call, unless the call
  reads a value on the host in the middle (a ``to_device`` node to the cpu) or fills the
  parameter arena;
- state (parameters, optimizer moments, running stats) stays in the tensors' own buffers: a
  fused kernel writes an update over its state input when ``passes/memory.py`` allows it
  (``plan_inplace``; the kernel then reads that input through its output binding), other
  updates are copied in on the device after the call (``copy_into``); nothing goes through
  host memory.
"""

from __future__ import annotations

import contextlib

import numpy as np

from munet._device import as_device
from munet._tensor import Storage, Tensor, contiguous_strides
from munet.backends.vulkan.copies import clone, contiguous, copy_into, new_view
from munet.backends.vulkan.views import VkView
from munet.backends.vulkan.wgsl import scalar_word
from munet.compiler.codegen.kernel import kernel_from_group, loads_only_at_write_index
from munet.compiler.codegen.wgsl import UnsupportedKernelError, render_wgsl, strip_prelude, workgroups
from munet.compiler.passes.fuse import FUSED
from munet.compiler.passes.memory import plan_memory


def new_counters() -> dict:
    return {"generated": 0, "fallback": 0, "pipeline_cache_hits": 0, "inplace_updates": 0, "fallback_reasons": []}


class VulkanTarget:
    """The vulkan side of a plan (see the module docstring)."""

    uses_arena = False  # the caching allocator hands the same blocks back at every call
    fused_dtypes = ("bool",)  # int64 is held as int32 here, which the kernel IR's i64 is not
    fuses_integer_division = False
    reuses_programs = False  # each specialization builds its own WGSL pipelines

    def __init__(self, backend):
        self.backend = backend
        self.runtime = backend.runtime
        self.counters = new_counters()
        self.sources: dict = {}  # fused node -> its WGSL source (describe)
        self._rendered: dict = {}  # fused node -> (kernel, tensors, scalars, source) or why not

    # values -------------------------------------------------------------------------------------
    def result(self, raw, np_dtype):
        return self.backend.wrap(raw, np_dtype)[2]

    def view_step(self, op, attrs, source, out, value):
        view_rule, backend, dtype = op.view, self.backend, value.dtype

        def view_step(env):
            x = source(env)
            t = Tensor._make(Storage(x.buffer, backend), x.shape, x.strides, x.offset, x.dtype, x)
            shape, stride, offset = view_rule(t, **attrs)
            env[out] = VkView(x.buffer, shape, stride, offset, dtype)

        return view_step

    def constant(self, value):
        return value if isinstance(value, VkView) else self.upload(np.asarray(value))

    def argument(self, t: Tensor):
        return t._data

    def upload(self, host: np.ndarray) -> VkView:
        host = np.ascontiguousarray(host)
        buffer = self.backend.from_numpy(host.reshape(-1))
        return VkView(buffer, host.shape, contiguous_strides(host.shape), 0, buffer.dtype)

    def download(self, data: VkView) -> np.ndarray:
        return self.backend.to_numpy(data)

    @staticmethod
    def buffer_of(value):
        """The device buffer of a folded constant (None for a host array): what recovery saves."""
        return value.buffer if isinstance(value, VkView) else None

    @contextlib.contextmanager
    def scope(self):
        with self.runtime.batch():
            yield
        self.runtime.flush()

    def clone(self, data: VkView) -> VkView:
        return clone(self.runtime, data)

    def copy_into(self, dst: VkView, src: VkView) -> None:
        copy_into(self.runtime, dst, src)

    @staticmethod
    def same_memory(a: VkView, b: VkView) -> bool:
        return a.buffer is b.buffer and a.offset == b.offset and a.shape == b.shape and a.strides == b.strides

    # fused groups ---------------------------------------------------------------------------------
    def _render(self, node):
        """``(kernel, tensor inputs, scalar inputs, source)`` of a fused node, or the reason it has none."""
        cached = self._rendered.get(node)
        if cached is not None:
            return cached
        try:
            kernel, tensors, scalars = kernel_from_group(node.attrs["group"])
            buffers = len(kernel.inputs) + len(kernel.outputs)
            limit = self.runtime.limits["max-storage-buffers-per-shader-stage"]
            if buffers > limit:
                raise UnsupportedKernelError(
                    f"a fused group of {buffers} buffers exceeds this device's {limit} storage buffers per kernel"
                )
            result = (kernel, tensors, scalars, render_wgsl(kernel))
        except (NotImplementedError, KeyError) as exc:  # UnsupportedKernelError is a NotImplementedError
            result = f"no kernel IR rule for {exc}" if isinstance(exc, KeyError) else str(exc)
        self._rendered[node] = result
        return result

    def plan_inplace(self, graph, donors: dict) -> dict:
        """State output -> the state input a fused kernel writes it over (``passes/memory.py`` decides:
        nothing reads the input afterwards, and the kernel reads it only at the index it writes)."""

        def renders(node) -> bool:
            return (
                node.op is FUSED
                and as_device(node.outputs[0].device) == self.backend.device
                and not isinstance(self._render(node), str)
            )

        def overwrites(node, source) -> bool:
            kernel, tensors, _, _ = self._render(node)
            return source in tensors and loads_only_at_write_index(kernel, tensors.index(source))

        return plan_memory(graph, renders, donors, overwrites).inplace

    @staticmethod
    def generates(node) -> bool:
        """False: no node has a generated kernel of its own on vulkan."""
        return False

    def generated_step(self, node, executable):
        """None: primitive nodes run the backend's WGSL kernels."""
        return None

    def fused_step(self, node, executable):
        rendered = self._render(node)
        if isinstance(rendered, str):
            self.counters["fallback"] += 1
            self.counters["fallback_reasons"].append(rendered)
            return executable.members_step(node, self.backend.device)
        kernel, tensors, scalars, source = rendered
        node.attrs["group"].kernel = kernel
        self.counters["generated"] += 1
        self.sources[node] = source
        # outputs that update a state in place read that input through their own binding
        aliases = {}
        for k, v in enumerate(node.outputs):
            state = executable.inplace.get(v)
            if state is not None and state in tensors:
                aliases[tensors.index(state)] = k
        variants = {False: self._pipeline(kernel, source, {})}
        if aliases:  # describe() shows the in-place variant, the one that runs unless a state moved
            self.sources[node] = render_wgsl(kernel, aliases)
            variants[True] = self._pipeline(kernel, self.sources[node], aliases)
            self.counters["inplace_updates"] += len(aliases)
        return self._dispatch_step(variants, aliases, kernel, tensors, scalars, node, executable)

    def _pipeline(self, kernel, source: str, aliases: dict) -> tuple:
        """``(source, writable)`` of a rendered kernel, its pipeline compiled now (not in the first call)."""
        writable = (True,) * len(kernel.outputs) + (False,) * (len(kernel.inputs) - len(aliases))
        compiled = self.runtime.counts["pipelines"]
        self.runtime.pipeline(source, writable)
        self.counters["pipeline_cache_hits"] += int(self.runtime.counts["pipelines"] == compiled)
        return source, writable

    def _dispatch_step(self, variants, aliases, kernel, tensors, scalars, node, executable):
        rt = self.runtime
        slot = executable.slot
        in_slots = [slot[v] for v in tensors]
        param_slots = [slot[v] for v in scalars]
        param_kinds = ["u32" if dt == "bool" else "f32" for dt in kernel.params]
        outs = [(slot[v], tuple(v.shape), v.dtype) for v in node.outputs]
        groups = rt.grid(workgroups(kernel))
        numel = kernel.numel

        def fused_step(env):
            views = [contiguous(rt, env[i]) for i in in_slots]
            words = [x.offset for x in views]
            words += [scalar_word(kind, env[i]) for kind, i in zip(param_kinds, param_slots)]
            results = [None] * len(outs)
            # a state whose view is not plain contiguous memory gets a fresh output (and the copy back)
            inplace = bool(aliases) and all(
                views[i] is env[in_slots[i]] and views[i].offset == 0 and views[i].size == numel for i in aliases
            )
            if inplace:
                for i, k in aliases.items():
                    results[k] = views[i]
            for k, (_, shape, dtype) in enumerate(outs):
                if results[k] is None:
                    results[k] = new_view(rt, shape, dtype)
            source, writable = variants[inplace]
            skip = aliases if inplace else {}
            buffers = [r.buffer for r in results] + [x.buffer for i, x in enumerate(views) if i not in skip]
            rt.dispatch(source, buffers, writable, words, groups)
            for (i, _, _), r in zip(outs, results):
                env[i] = r

        return fused_step

    # reporting -----------------------------------------------------------------------------------
    def describe_fused(self, node) -> list[str]:
        source = self.sources.get(node)
        if source is None:
            return ["  (unfused: member nodes run with the vulkan kernels)"]
        return ["  " + line for line in strip_prelude(source).rstrip("\n").split("\n")]

    def stats(self) -> dict:
        c = self.counters
        fallback = None
        if c["fallback"]:
            reasons = sorted(set(c["fallback_reasons"]))
            fallback = f"unfused vulkan kernels for {c['fallback']} fused groups: " + "; ".join(reasons)
        return {
            "generated_code": c["generated"] > 0,
            "elementwise_kernels": "generated WGSL" if c["generated"] else None,
            "fallback": fallback,
            "c_compiler": None,
            "fused_groups": c["generated"] + c["fallback"],
            "generated_kernels": c["generated"],
            "kernel_cache_hits": c["pipeline_cache_hits"],
            "shader_language": "wgsl",
            "memory_plan": "caching allocator (no arena on vulkan)",
            "inplace_updates": c["inplace_updates"],
        }
