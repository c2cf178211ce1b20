"""``CModule``: C source compiled with the system compiler, its functions launched on cpu tensors.

The source is built like the compiler's own kernels (``compiler/codegen/build.py``: ``$CC`` or
cc/gcc/clang, the same base flags, the same on-disk cache keyed by source, compiler and flags)
with the module's ``options`` appended. A kernel is a plain C function; each tensor argument is a
pointer to its first element, each scalar is passed as its declared C type (``__half`` and
``__nv_bfloat16`` scalars as their 16 bits, a ``uint16_t``).

    mod = munet.rtc.CModule('''
        void axpy(const float *x, float *y, float a, int n) {
            for (int i = 0; i < n; ++i) y[i] += a * x[i];
        }''')
    axpy = mod.get_kernel("axpy", "const float *x, float *y, float a, int n")
    axpy.launch([x, y, 2.0, x.numel()])
"""

from __future__ import annotations

import ctypes

import numpy as np

from munet.backends.cpu.registry import kernel
from munet.compiler.codegen import build
from munet.rtc.launch import MODULE_KINDS, Kernel, kernel_from_spec, outputs_of
from munet.rtc.options import as_strings
from munet.rtc.signature import check_devices

_CTYPES = {
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "__half": ctypes.c_uint16,
    "__nv_bfloat16": ctypes.c_uint16,
    "int8_t": ctypes.c_int8,
    "char": ctypes.c_int8,
    "uint8_t": ctypes.c_uint8,
    "int": ctypes.c_int,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "bool": ctypes.c_bool,
}


def scalar_bits(param, value):
    """A scalar argument as the C ABI takes it: 16-bit floats as their bits, others as numbers."""
    if param.type in ("__half", "__nv_bfloat16"):
        return int(np.array(value, dtype=param.dtype.np).view(np.uint16))
    return value


class CModule:
    """C source compiled at construction; ``get_kernel(name, signature)`` gives a :class:`CKernel`."""

    kind = "c"

    def __init__(self, source: str, options=()):
        if not isinstance(source, str):
            raise TypeError(f"CModule: source must be a string of C code, got {type(source).__name__}")
        self.source = source
        self.options = as_strings(options, "CModule", "options")
        try:
            self._lib, _ = build.load_library(source, None, self.options, what="munet.rtc.CModule source")
        except build.CompilerUnavailableError as exc:
            raise RuntimeError(f"CModule: cannot compile the source: {exc}") from exc

    @classmethod
    def from_spec(cls, source: str, options: tuple, exports: tuple) -> CModule:
        return cls(source, options)

    def spec(self) -> dict:
        return {"source": self.source, "options": self.options, "exports": ()}

    def get_kernel(self, name: str, signature: str) -> CKernel:
        return CKernel(self, name, signature)


class CKernel(Kernel):
    """A function of a :class:`CModule`; ``launch(args)`` calls it on cpu tensors."""

    kind = "c"

    def __init__(self, module: CModule, name: str, signature: str):
        super().__init__(module, name, signature)
        try:
            fn = module._lib[name]  # a fresh function object: argtypes are this kernel's own
        except AttributeError:
            raise ValueError(
                f"{self.label}: the module defines no function '{name}' (it must have external linkage, not static)"
            ) from None
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p if p.pointer else _CTYPES[p.type] for p in self.params]
        self._fn = fn

    def launch(self, args) -> None:
        """Call the function on ``args`` (cpu tensors and numbers, in signature order); returns when done."""
        args = self.check(args)
        check_devices(self.label, self.params, args, "cpu")
        self._launch(args, (), lambda: self.call([a._data if p.pointer else a for p, a in zip(self.params, args)]))

    def call(self, raws) -> None:
        """Call on NumPy arrays (contiguous) and numbers."""
        self._fn(*[r.ctypes.data if p.pointer else scalar_bits(p, r) for p, r in zip(self.params, raws)])


MODULE_KINDS["c"] = CModule


@kernel("rtc_launch")
def _rtc_launch_cpu(args, *, kind, source, options, exports, name, signature, config):
    if kind != "c":
        raise RuntimeError(f"rtc_launch({name}): a {kind} kernel cannot run on cpu tensors")
    k = kernel_from_spec(kind, source, tuple(options), tuple(exports), name, signature)
    # written arrays are copied (the node's outputs are new values), read ones made contiguous
    raws = [
        np.array(a, order="C", copy=True) if p.written else np.ascontiguousarray(a) if p.pointer else a
        for p, a in zip(k.params, args)
    ]
    k.call(raws)
    return outputs_of(k.params, raws)
