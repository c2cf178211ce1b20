"""``WGSLModule``: WGSL compute shaders dispatched on vulkan tensors through the vulkan runtime.

The binding rule (group 0): binding 0 holds the scalar arguments, packed in signature order as
32-bit words (``float`` as ``f32``, ``int``/``int32_t`` as ``i32``, ``bool`` as a ``u32`` 0 or 1),
read-only storage; declare it as a struct of those fields or as ``array<u32>`` (a kernel without
scalars may leave it undeclared). Tensor arguments are bindings 1, 2, ... in signature order:
``var<storage, read>`` for a ``const`` tensor, ``var<storage, read_write>`` for any other. A
tensor binding is its whole buffer from element 0 (so a tensor must start its storage), and the
buffer may be longer than the tensor (the allocator rounds sizes up): pass the element count as a
scalar rather than using ``arrayLength``. Element types: ``float`` tensors are ``array<f32>``,
``int``/``int32_t``/``int64_t`` (held as int32 on vulkan) ``array<i32>``, ``bool`` ``array<u32>``,
``__half`` ``array<f16>`` (with the adapter's ``shader-f16``; MuNet adds ``enable f16;``).

The pipeline is compiled at the first launch on each device (the vulkan runtime caches it); a
compile error raises then with the driver's message. The dispatch is recorded into the runtime's
pending command buffer, ordered with every other op on the device.
"""

from __future__ import annotations

import re

from munet import _dtype as D
from munet._device import DeviceError, as_device, get_backend
from munet.backends.vulkan.copies import clone
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.wgsl import scalar_word
from munet.rtc.launch import MODULE_KINDS, Kernel, kernel_from_spec, outputs_of
from munet.rtc.signature import check_devices

TENSOR_DTYPES = (D.float32, D.float16, D.int32, D.int64, D.bool_)
SCALAR_WORDS = {"float": "f32", "int": "i32", "int32_t": "i32", "bool": "u32"}


class WGSLModule:
    """WGSL source; ``get_kernel(entry_point, signature)`` gives a :class:`WGSLKernel`."""

    kind = "wgsl"

    def __init__(self, source: str):
        if not isinstance(source, str):
            raise TypeError(f"WGSLModule: source must be a string of WGSL code, got {type(source).__name__}")
        self.source = source

    @classmethod
    def from_spec(cls, source: str, options: tuple, exports: tuple) -> WGSLModule:
        return cls(source)

    def spec(self) -> dict:
        return {"source": self.source, "options": (), "exports": ()}

    def get_kernel(self, entry_point: str, signature: str) -> WGSLKernel:
        return WGSLKernel(self, entry_point, signature)


class WGSLKernel(Kernel):
    """A ``@compute`` entry point of a :class:`WGSLModule`; ``launch(args, device, workgroups)``."""

    kind = "wgsl"

    def __init__(self, module: WGSLModule, entry_point: str, signature: str):
        super().__init__(module, entry_point, signature)
        if not re.search(rf"@compute[^;{{}}]*?\bfn\s+{re.escape(entry_point)}\s*\(", module.source):
            raise ValueError(f"{self.label}: the module has no '@compute' entry point 'fn {entry_point}(...)'")
        for i, p in enumerate(self.params):
            if p.pointer and p.dtype not in TENSOR_DTYPES:
                raise TypeError(
                    f"{self.label}: argument {i} ('{p.name}') is '{p.type} *'; vulkan tensors hold "
                    f"{', '.join(d.name for d in TENSOR_DTYPES)}"
                )
            if not p.pointer and p.type not in SCALAR_WORDS:
                raise TypeError(
                    f"{self.label}: argument {i} ('{p.name}') is the scalar '{p.type}'; WGSL scalars are 32-bit: "
                    f"use one of {', '.join(SCALAR_WORDS)}"
                )

    def launch(self, args, device, workgroups) -> None:
        """Dispatch ``workgroups`` (an int or up to 3 ints) workgroups on ``device`` (a vulkan device)."""
        args = self.check(args)
        dev = as_device(device)
        if dev.type not in ("vulkan", "webgpu"):
            raise DeviceError(f"{self.label}: expected a vulkan device, got {dev}")
        check_devices(self.label, self.params, args, dev)
        for i, (p, a) in enumerate(zip(self.params, args)):
            if p.pointer and a._offset != 0:
                raise ValueError(
                    f"{self.label}: argument {i} ('{p.name}') starts at element {a._offset} of its storage; "
                    "WGSL binds whole buffers, so pass a tensor that starts its storage (.clone() one)"
                )
        groups = workgroup_grid(self.label, workgroups)
        runtime = get_backend(dev).runtime
        if any(g > runtime.max_groups for g in groups):
            raise ValueError(
                f"{self.label}: workgroups {groups} exceed the device's limit of {runtime.max_groups} per dimension"
            )
        self._launch(
            args,
            groups,
            lambda: self.dispatch(runtime, [a._data if p.pointer else a for p, a in zip(self.params, args)], groups),
        )

    def dispatch(self, runtime, raws, groups) -> None:
        """Record the dispatch on VkViews (offset 0) and numbers."""
        tensors = [r for p, r in zip(self.params, raws) if p.pointer]
        words = [scalar_word(SCALAR_WORDS[p.type], r) for p, r in zip(self.params, raws) if not p.pointer]
        writable = [p.written for p in self.params if p.pointer]
        runtime.dispatch(
            self.module.source,
            [t.buffer for t in tensors],
            writable,
            words,
            groups,
            entry_point=self.name,
            origin=f"munet.rtc.{self.label}",
        )


def workgroup_grid(label: str, workgroups) -> tuple[int, int, int]:
    """``workgroups`` (an int or a sequence of up to 3 ints) as 3 counts."""
    dims = (workgroups,) if isinstance(workgroups, int) else tuple(workgroups)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 0 for d in dims):
        raise ValueError(f"{label}: workgroups must be an int or up to 3 non-negative ints, got {workgroups!r}")
    return (*dims, *(1,) * (3 - len(dims)))


MODULE_KINDS["wgsl"] = WGSLModule


@kernel("rtc_launch")
def _rtc_launch_vulkan(rt, args, *, kind, source, options, exports, name, signature, config):
    if kind != "wgsl":
        raise RuntimeError(f"rtc_launch({name}): a {kind} kernel cannot run on vulkan tensors")
    k = kernel_from_spec(kind, source, tuple(options), tuple(exports), name, signature)
    # written arguments are copied (the node's outputs are new values); read ones that are not a
    # whole buffer from element 0 too (the binding rule)
    raws = [
        clone(rt, a) if p.pointer and (p.written or a.offset or not a.is_contiguous()) else a
        for p, a in zip(k.params, args)
    ]
    k.dispatch(rt, raws, tuple(config))
    return outputs_of(k.params, raws)
