"""``CudaModule``: CUDA C compiled by NVRTC at construction, kernels launched on cuda tensors.

Construction compiles the source to PTX (for the architecture an explicit
``--gpu-architecture``/``-arch`` option names, else the newest NVRTC supports), so syntax errors,
missing headers and bad name expressions raise there, with NVRTC's log, on any machine. The image
a device runs is made at its first launch and cached per compute capability: the user's options
as given when they name an architecture (``sm_XX`` gives a cubin, ``compute_XX`` PTX), otherwise
``compile_options(device)`` added to them, which chooses as MXNet's ``get_rtc_compile_opts``.

Kernel names: an ``extern "C" __global__`` function is found by its name; any other (a template
instance, a C++ function) must be a name expression in ``exports`` (``"axpy<float>"``), registered
with ``nvrtcAddNameExpression`` and looked up through ``nvrtcGetLoweredName``.

    mod = munet.rtc.CudaModule('''
        extern "C" __global__ void axpy(const float *x, float *y, float a) {
            int i = threadIdx.x + blockIdx.x * blockDim.x;
            y[i] += a * x[i];
        }''')
    axpy = mod.get_kernel("axpy", "const float *x, float *y, float a")
    axpy.launch([x, y, 3.0], "cuda:0", grid=(1, 1, 1), block=(10, 1, 1))
"""

from __future__ import annotations

import re
import threading

import numpy as np

from munet._device import DeviceError, as_device
from munet.backends.cuda import discovery, nvrtc
from munet.backends.cuda.registry import kernel
from munet.rtc import cuda_device
from munet.rtc.launch import MODULE_KINDS, Kernel
from munet.rtc.options import as_strings
from munet.rtc.signature import check_devices

_ARCH = re.compile(r"^(?:--gpu-architecture|-arch)=(sm|compute)_(\d+)[a-z]?$")
_DEFAULT_SHARED = 48 * 1024  # dynamic shared memory above this needs the function's attribute raised


def _capability(device) -> int:
    """A compute capability (``80``, ``(8, 0)``, ``"8.0"``) or a cuda device's, as one number."""
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if isinstance(device, tuple) and len(device) == 2:
        return device[0] * 10 + device[1]
    if isinstance(device, str) and re.fullmatch(r"\d+\.\d", device):
        major, minor = device.split(".")
        return int(major) * 10 + int(minor)
    dev = as_device(device)
    if dev.type != "cuda":
        raise DeviceError(f"compile_options: expected a cuda device or a compute capability, got {device!r}")
    cuda_device.require_device("compile_options", dev.index or 0)
    return cuda_device.compute_capability(dev.index or 0)


def compile_options(device) -> tuple[str, ...]:
    """NVRTC's architecture option for ``device`` (a cuda device, or a compute capability such as
    ``(8, 0)`` or ``80``): ``--gpu-architecture=sm_XX`` (a cubin) when NVRTC supports the capability,
    else ``compute_YY`` (PTX the driver compiles) for the newest supported ``YY`` below it."""
    arch = _capability(device)
    supported = nvrtc.supported_archs()
    if arch in supported:
        return (f"--gpu-architecture=sm_{arch}",)
    older = [a for a in supported if a < arch]
    if not older:
        raise DeviceError(
            f"compile_options: compute capability {arch // 10}.{arch % 10} is older than any this NVRTC "
            f"supports ({', '.join(str(a) for a in supported)})"
        )
    return (f"--gpu-architecture=compute_{max(older)}",)


def _split_arch(options: tuple) -> tuple[tuple, tuple | None]:
    """(options without the architecture, (kind, number) of an explicit one or None); the
    architecture may be one option (``-arch=sm_80``) or two (``"-arch", "sm_80"``), as NVRTC takes it."""
    rest, arch = [], None
    i = 0
    while i < len(options):
        option = options[i].strip()
        if option in ("-arch", "--gpu-architecture") and i + 1 < len(options):
            option = f"{option}={options[i + 1].strip()}"
            i += 1
        m = _ARCH.match(option)
        if m:
            arch = (m.group(1), int(m.group(2)))
        else:
            rest.append(options[i])
        i += 1
    return tuple(rest), arch


class CudaModule:
    """CUDA C source compiled at construction; ``get_kernel(name, signature)`` gives a :class:`CudaKernel`."""

    kind = "cuda"

    def __init__(self, source: str, options=(), exports=()):
        if not isinstance(source, str):
            raise TypeError(f"CudaModule: source must be a string of CUDA C code, got {type(source).__name__}")
        self.source = source
        self.options = as_strings(options, "CudaModule", "options")
        self.exports = as_strings(exports, "CudaModule", "exports")
        self._base_options, self._arch = _split_arch(self.options)
        check_arch = self._arch[1] if self._arch else max(nvrtc.supported_archs())
        program = self._compile((*self._base_options, f"--gpu-architecture=compute_{check_arch}"))
        self.ptx = program.image.rstrip(b"\0").decode()
        self.log = program.log
        self.lowered = program.lowered
        self._binaries: dict[int, nvrtc.Program] = {}
        self._functions: dict[int, object] = {}  # device index -> (CuPy module, {lowered name: function})
        self._lock = threading.RLock()  # threads launching at once compile and load once

    @classmethod
    def from_spec(cls, source: str, options: tuple, exports: tuple) -> CudaModule:
        return cls(source, options, exports)

    def spec(self) -> dict:
        return {"source": self.source, "options": self.options, "exports": self.exports}

    def binary(self, device) -> tuple[str, bytes]:
        """``("cubin" | "ptx", image)`` that ``device`` (a cuda device or a compute capability) runs;
        compiled once per capability."""
        arch = _capability(device)
        with self._lock:
            program = self._binaries.get(arch)
            if program is None:
                options = self.options if self._arch else (*self.options, *compile_options(arch))
                program = self._binaries[arch] = self._compile(options)
        return ("cubin" if program.cubin else "ptx"), program.image

    def _compile(self, options: tuple) -> nvrtc.Program:
        return nvrtc.compile_program(self.source, options, self.exports, name="rtc.cu", label="CudaModule")

    def get_kernel(self, name: str, signature: str) -> CudaKernel:
        return CudaKernel(self, name, signature)

    def _symbol(self, name: str, label: str) -> str:
        if name in self.lowered:
            return self.lowered[name]
        if re.search(rf"\.entry\s+{re.escape(name)}\s*\(", self.ptx):
            return name
        raise ValueError(
            f"{label}: the module has no kernel named '{name}'; declare it extern \"C\" __global__, "
            f"or add its name expression (e.g. 'axpy<float>') to exports (exports: {list(self.exports)})"
        )

    def function(self, index: int, symbol: str):
        """The CuPy function of ``symbol`` on device ``index`` (the module is loaded once per device)."""
        with self._lock:
            loaded = self._functions.get(index)
            if loaded is None:
                import cupy

                with cupy.cuda.Device(index):
                    module = cupy.cuda.function.Module()
                    module.load(self.binary(as_device(f"cuda:{index}"))[1])
                loaded = self._functions[index] = (module, {})
            module, functions = loaded
            if symbol not in functions:
                functions[symbol] = module.get_function(symbol)
            return functions[symbol]


def _dims(label: str, what: str, value) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise ValueError(f"{label}: {what} must be an int or up to 3 positive ints, got {value!r}")
    return (*dims, *(1,) * (3 - len(dims)))


class CudaKernel(Kernel):
    """A kernel of a :class:`CudaModule`; ``launch(args, device, grid, block, shared_mem=0, sync=False)``."""

    kind = "cuda"

    def __init__(self, module: CudaModule, name: str, signature: str):
        super().__init__(module, name, signature)
        self.symbol = module._symbol(name, self.label)

    def launch(self, args, device, grid, block, shared_mem: int = 0, sync: bool = False) -> None:
        """Launch on the current stream of ``device`` (``"cuda:0"``, or an index), asynchronous unless
        ``sync``. ``grid`` and ``block`` are up to 3 ints (an int is ``(n, 1, 1)``); ``shared_mem`` is
        the dynamic shared memory in bytes (``extern __shared__``)."""
        args = self.check(args)
        config = (_dims(self.label, "grid", grid), _dims(self.label, "block", block), int(shared_mem))
        if config[2] < 0:
            raise ValueError(f"{self.label}: shared_mem must be a non-negative number of bytes, got {shared_mem}")
        dev = as_device(f"cuda:{device}" if isinstance(device, int) else device)
        if dev.type != "cuda":
            raise DeviceError(f"{self.label}: expected a cuda device, got {dev}")
        index = dev.index or 0
        cuda_device.require_device(self.label, index)
        check_devices(self.label, self.params, args, dev)
        raws = [a._data if p.pointer else a for p, a in zip(self.params, args)]
        self._launch(args, config, lambda: self.call(index, raws, config, sync))

    def call(self, index: int, raws, config, sync: bool = False) -> None:
        """Launch on CuPy arrays (contiguous) and numbers on device ``index``'s current stream."""
        cupy = discovery.cupy_module()
        grid, block, shared_mem = config
        with cupy.cuda.Device(index):
            fn = self.module.function(index, self.symbol)
            if shared_mem > _DEFAULT_SHARED:
                from cupy_backends.cuda.api import driver

                driver.funcSetAttribute(fn.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_mem)
            stream = cuda_device.current_stream(index)
            fn(grid, block, tuple(self._pack(raws)), shared_mem=shared_mem, stream=stream)
            if sync:
                stream.synchronize()

    def _pack(self, raws):
        """Each argument as a NumPy scalar of its parameter's size: pointers as uint64, 16-bit
        floats as their bits (the C ABI passes both as plain values of that width)."""
        for p, r in zip(self.params, raws):
            if p.pointer:
                yield np.uint64(cuda_device.device_pointer(r))
            elif p.type in ("__half", "__nv_bfloat16"):
                yield np.array(r, dtype=p.dtype.np).view(np.uint16)[()]
            else:
                yield p.dtype.np.type(r)


MODULE_KINDS["cuda"] = CudaModule


@kernel("rtc_launch")
def compiled_launch(rt, args, *, kind, source, options, exports, name, signature, config):
    """The cuda backend's ``rtc_launch`` kernel (a compiled program's launch; see launch.py): the
    written arguments are copied, the kernel runs on the copies, which are the node's outputs."""
    from munet.rtc.launch import kernel_from_spec, outputs_of

    if kind != "cuda":
        raise RuntimeError(f"rtc_launch({name}): a {kind} kernel cannot run on cuda tensors")

    k = kernel_from_spec(kind, source, tuple(options), tuple(exports), name, signature)
    raws = [a.copy() if p.pointer and (p.written or not a.flags.c_contiguous) else a for p, a in zip(k.params, args)]
    index = rt.index
    grid, block, shared_mem = config
    k.call(index, raws, (tuple(grid), tuple(block), shared_mem))
    return outputs_of(k.params, raws)
