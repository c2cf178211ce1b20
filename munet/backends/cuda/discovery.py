"""Which ``cuda:N`` devices exist, and why none do.

The first question (``munet.cuda.device_count()``, a ``cuda`` tensor, ``munet info``) asks the
NVIDIA driver (libcuda) how many devices it sees, and only if it sees one imports CuPy, which then
names them; ``import munet`` does neither, and the answer is computed once per process.
Registering the ``cuda`` device type imports neither CuPy nor a kernel.
"""

from __future__ import annotations

import ctypes
import sys
import threading

from munet._device import DeviceError

INSTALL_CUPY = (
    "install it with: pip install 'munet[cuda13]' (for a CUDA 13 driver) or pip install 'munet[cuda12]' "
    "(for a CUDA 12 driver)"
)
NO_DEVICE = "no CUDA device or driver was found"

_state: dict = {}
_lock = threading.Lock()


def _driver_device_count() -> tuple[int | None, str | None]:
    """(devices the NVIDIA driver sees, or None with why not), asked of libcuda directly: cheap, and
    it spares the import of CuPy (seconds) on the machines that have no driver at all."""
    try:
        lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    except OSError as exc:
        return None, f"the NVIDIA driver library could not be loaded ({exc}); this needs an NVIDIA GPU and its driver"
    count = ctypes.c_int(0)
    status = lib.cuInit(0)
    if status == 0:
        status = lib.cuDeviceGetCount(ctypes.byref(count))
    if status != 0:
        return None, f"the NVIDIA driver failed to initialize (CUresult {status}); is a GPU visible to this process?"
    return count.value, None


def _probe() -> None:
    """Fill ``_state``: CuPy (or None), the device names, and why there are none."""
    count, why = _driver_device_count()
    if count is None or count == 0:
        _state.update(cupy=None, names=[], error=f"{NO_DEVICE}: {why or 'the NVIDIA driver reports no device'}")
        return
    try:
        import cupy
    except Exception as exc:  # noqa: BLE001 - an ImportError, or a CUDA library CuPy could not load
        _state.update(
            cupy=None, names=[], error=f"{NO_DEVICE}: the cupy package is not available ({exc}); {INSTALL_CUPY}"
        )
        return
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        names = [_decode(cupy.cuda.runtime.getDeviceProperties(i)["name"]) for i in range(count)]
    except Exception as exc:  # noqa: BLE001 - CUDARuntimeError: a driver too old for CuPy's CUDA runtime
        _state.update(cupy=cupy, names=[], error=f"{NO_DEVICE} that CuPy can use (CuPy: {exc})")
        return
    error = f"{NO_DEVICE}: the CUDA runtime reports no device" if not names else None
    _state.update(cupy=cupy, names=names, error=error)


def _decode(name) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)


def _ensure() -> dict:
    if "names" not in _state:
        with _lock:
            if "names" not in _state:
                _probe()
    return _state


def device_names() -> list[str]:
    """The name of each visible CUDA device (``CUDA_VISIBLE_DEVICES`` applies); empty without one."""
    return list(_ensure()["names"])


def list_devices() -> list[tuple[int, str, str]]:
    return [(i, name, "GPU") for i, name in enumerate(device_names())]


def explain_unavailable(index: int) -> str:
    """Why ``cuda:index`` does not exist and what to install."""
    state = _ensure()
    if state["error"] is not None:
        return state["error"]
    n = len(state["names"])
    return f"this machine has {n} CUDA device{'s' if n != 1 else ''} (cuda:0..cuda:{n - 1})"


def cupy_module():
    """CuPy, once a CUDA device exists; raises :class:`DeviceError` saying why not otherwise."""
    state = _ensure()
    if state["error"] is not None:
        raise DeviceError(state["error"])
    return state["cupy"]


def reset() -> None:
    """Forget the cached answer (tests simulate a machine without CuPy or without a driver)."""
    with _lock:
        _state.clear()


def _factory(index: int):
    from munet.backends.cuda.backend import CudaBackend

    return CudaBackend(index)


def current_index() -> int:
    """The calling thread's current CUDA device (what ``device="cuda"`` without an index means)."""
    return cupy_module().cuda.runtime.getDevice()


def register() -> None:
    """Register ``cuda`` with the device registry (imports neither CuPy nor kernels)."""
    from munet._device import register_backend

    register_backend(
        "cuda",
        list_devices,
        _factory,
        explain_unavailable=explain_unavailable,
        compile_target="munet.compiler.lower_cuda:CudaTarget",
        current_index=lambda: current_index() if list_devices() else 0,
    )


def device_index(device=None) -> int:
    """The index of a CUDA device given as None (the current one), an int, ``"cuda:1"`` or a
    ``munet.device``; raises for another device type and, through ``cupy_module``, without CUDA."""
    from munet._device import as_device

    if device is None:
        return current_index()
    if isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        dev = as_device(device)
        if dev.type != "cuda":
            raise DeviceError(f"munet.cuda: expected a cuda device, got '{dev}'")
        index = dev.index if dev.index is not None else current_index()
    cupy_module()
    if not 0 <= index < len(device_names()):
        raise DeviceError(f"device 'cuda:{index}' is not available; {explain_unavailable(index)}")
    return index
