"""CUDA runtime errors as ``torch.cuda`` names them (``CudaError``, ``check_error``, ``cudart``) and
the synchronisation debug mode (``set_sync_debug_mode``)."""

from __future__ import annotations

from munet.backends.cuda import discovery, sync_debug


class CudaError(RuntimeError):
    """A CUDA runtime error code with the runtime's message (``cudaGetErrorString``)."""

    def __init__(self, code: int) -> None:
        self.code = int(code)
        super().__init__(f"{_message(self.code)} ({self.code})")


def _message(code: int) -> str:
    try:
        runtime = discovery.cupy_module().cuda.runtime
        return str(runtime.CUDARuntimeError(code))
    except Exception:  # no CUDA here: the code is all there is to say
        return f"CUDA error {code}"


def check_error(res: int) -> None:
    """Raise :class:`CudaError` for a non-zero CUDA runtime status."""
    if int(res) != 0:
        raise CudaError(res)


def cudart():
    """The CUDA runtime bindings (CuPy's ``cupy.cuda.runtime``); raises without CUDA."""
    return discovery.cupy_module().cuda.runtime


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """``"default"``/0: nothing; ``"warn"``/1: warn at each operation that waits for the device on
    the host (``.item()``, ``.cpu()``, ``.numpy()``, ``.tolist()`` of a cuda tensor); ``"error"``/2:
    raise there instead."""
    discovery.cupy_module()
    sync_debug.set_mode(debug_mode)


def get_sync_debug_mode() -> int:
    discovery.cupy_module()
    return sync_debug.mode()
