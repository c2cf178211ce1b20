"""The few facts a CUDA launch needs from the cuda device, in one place: whether a device and
driver exist, a device's compute capability, a tensor's device pointer, the current stream.

They are written against CuPy, which holds a cuda tensor's memory (its storage data is a CuPy
ndarray, its ``_data`` the view) and MuNet's streams (``munet.cuda.current_stream()`` wraps a
``cupy.cuda.Stream``); the cuda backend may route them through its own contract.
"""

from __future__ import annotations

from munet._device import DeviceError


def require_device(label: str, index: int) -> None:
    """Raise DeviceError unless CUDA device ``index`` and its driver are there."""
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - no CuPy, no driver, no device: all mean "cannot launch"
        raise DeviceError(f"{label}: no CUDA device/driver was found, so the kernel cannot launch ({exc})") from exc
    if index >= count:
        raise DeviceError(f"{label}: no CUDA device cuda:{index}; this machine has {count}")


def compute_capability(index: int) -> int:
    """Device ``index``'s compute capability as one number (``90`` for 9.0)."""
    import cupy

    return int(cupy.cuda.Device(index).compute_capability)


def device_pointer(data) -> int:
    """The device address of a cuda tensor's first element, from its ``_data`` (a CuPy ndarray view)."""
    return int(data.data.ptr)


def current_stream():
    """The stream launches go on: the current CuPy stream of the current device."""
    import cupy

    return cupy.cuda.get_current_stream()
