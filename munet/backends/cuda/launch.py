"""Launch a rendered :class:`~munet.backends.cuda.source.CudaSource` on a cuda device.

``launch(rt, src, n, arguments)`` compiles ``src`` with NVRTC for the device's architecture
(``nvrtc.arch_for`` of its compute capability; cubins are cached on disk by ``nvrtc.compile_source``),
loads the cubin into a CuPy module (``cupy.cuda.function.Module().load(cubin)``, then
``get_function(name)``: one module per kernel and device, kept in memory for the process) and
launches ``src.grid(n)`` blocks of ``src.block`` threads on ``rt.stream``. ``arguments`` are
``[(C type, value), ...]`` in parameter order, as the renderers' ``arguments(...)`` give them; each
value is passed as a NumPy scalar of its C type's width (a pointer as ``uint64``).

Call it inside ``rt.scope()`` (bound kernels run there), so the module loads on ``rt``'s device.
"""

from __future__ import annotations

import threading

import numpy as np

from munet.backends.cuda import nvrtc

_SCALARS = {
    "long long": np.int64,
    "unsigned long long": np.uint64,
    "unsigned": np.uint32,
    "int": np.int32,
    "short": np.int16,
    "signed char": np.int8,
    "unsigned char": np.uint8,
    "bool": np.bool_,
    "float": np.float32,
    "double": np.float64,
}

_functions: dict = {}  # (device index, kernel name) -> (module, function)
_archs: dict = {}  # device index -> "sm_XY"
_lock = threading.Lock()


def arch_of(rt) -> str:
    """NVRTC's ``sm_XY`` for ``rt``'s device (from its compute capability)."""
    arch = _archs.get(rt.index)
    if arch is None:
        props = rt.cupy.cuda.runtime.getDeviceProperties(rt.index)
        arch = _archs[rt.index] = nvrtc.arch_for((props["major"], props["minor"]))
    return arch


def function(rt, src):
    """The loaded CuPy function of ``src`` on ``rt``'s device (compiled and loaded once)."""
    key = (rt.index, src.name)
    loaded = _functions.get(key)
    if loaded is None:
        with _lock:
            loaded = _functions.get(key)
            if loaded is None:
                cubin = nvrtc.compile_source(src.source, arch_of(rt), name=f"{src.name}.cu")
                module = rt.cupy.cuda.function.Module()
                module.load(cubin.data)
                loaded = _functions[key] = (module, module.get_function(src.name))
    return loaded[1]


def is_loaded(rt, src) -> bool:
    """Whether ``src`` is already loaded on ``rt``'s device (a later launch compiles nothing)."""
    return (rt.index, src.name) in _functions


def pack(arguments) -> tuple:
    """Each ``(C type, value)`` as the NumPy scalar CuPy passes by value (pointers as ``uint64``)."""
    packed = []
    for ctype, value in arguments:
        if ctype.endswith("*"):
            packed.append(np.uint64(int(value)))
        elif ctype in _SCALARS:
            packed.append(_SCALARS[ctype](value))
        else:
            raise TypeError(f"cuda launch: no by-value packing for parameter type '{ctype}'")
    return tuple(packed)


def launch(rt, src, n: int, arguments) -> None:
    """Run ``src`` for ``n`` work items (its grid rule) with ``arguments`` on ``rt.stream``."""
    if len(arguments) != len(src.params):
        raise ValueError(f"{src.name}: expected {len(src.params)} arguments, got {len(arguments)}")
    fn = function(rt, src)
    fn((src.grid(n), 1, 1), (src.block, 1, 1), pack(arguments), stream=rt.stream)


def clear() -> None:
    """Forget the loaded modules (a device reset; the disk cache stays)."""
    with _lock:
        _functions.clear()
        _archs.clear()
