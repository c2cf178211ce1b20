"""The few facts a CUDA launch needs from the cuda backend, in one place: whether a device and
driver exist, a device's compute capability, a tensor's device pointer, the current stream.

A cuda tensor's data is a CuPy ndarray view (``munet/backends/cuda/registry.py``), and the current
stream is the one ``munet.cuda.current_stream()`` names (a ``cupy.cuda.Stream`` underneath).
"""

from __future__ import annotations

from munet._device import DeviceError
from munet.backends.cuda import discovery


def require_device(label: str, index: int) -> None:
    """Raise DeviceError unless CUDA device ``index`` and its driver are there."""
    count = len(discovery.device_names())
    if count == 0:
        raise DeviceError(
            f"{label}: no CUDA device/driver was found, so the kernel cannot launch "
            f"({discovery.explain_unavailable(index)})"
        )
    if index >= count:
        raise DeviceError(f"{label}: no CUDA device cuda:{index}; {discovery.explain_unavailable(index)}")


def compute_capability(index: int) -> int:
    """Device ``index``'s compute capability as one number (``90`` for 9.0)."""
    return int(discovery.cupy_module().cuda.Device(index).compute_capability)


def device_pointer(data) -> int:
    """The device address of a cuda tensor's first element, from its ``_data`` (a CuPy ndarray view)."""
    return int(data.data.ptr)


def current_stream(index: int):
    """The CuPy stream launches on device ``index`` go on: MuNet's current stream of that device."""
    from munet.backends.cuda.streams import current_stream as munet_stream

    return munet_stream(index)._stream
