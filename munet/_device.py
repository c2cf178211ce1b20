"""Devices and the registry of backends that provide them.

A backend registers a device type (``cpu``, later ``vulkan``, ``cuda``) with a function that
lists its available indices and a factory for the per-device backend object. Asking for a
device that no backend provides raises :class:`DeviceError` naming it and listing what exists.

It also holds the default device of factory functions (``set_default_device``, and
``with munet.device("vulkan"):``), per thread as in PyTorch.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable


class DeviceError(RuntimeError):
    """A device is unknown or unavailable, or an op cannot run on the device it was given."""


class OutOfMemoryError(RuntimeError):
    """A device allocation failed; the message gives the size asked for and what is in use."""


class DeviceLostError(RuntimeError):
    """The device was lost (driver reset, GPU removed), or a tensor made before its device was
    reset was used; its tensors are gone (``munet.vulkan.reset()`` opens a fresh device)."""


class device:  # noqa: N801 - PyTorch's name
    """A device such as ``munet.device("cpu")`` or ``munet.device("vulkan", 0)``."""

    __slots__ = ("type", "index")

    def __init__(self, type_or_str, index: int | None = None):
        if isinstance(type_or_str, device):
            self.type, self.index = type_or_str.type, type_or_str.index
            return
        if not isinstance(type_or_str, str):
            raise TypeError(f"munet.device: expected a string or device, got {type(type_or_str).__name__}")
        text = type_or_str.strip()
        if ":" in text:
            if index is not None:
                raise ValueError(f"munet.device: index given twice in {type_or_str!r}")
            text, _, idx = text.partition(":")
            if not idx.isdigit():
                raise DeviceError(f"munet.device: invalid device string {type_or_str!r}; expected 'type' or 'type:N'")
            index = int(idx)
        self.type = text
        self.index = index if text != "cpu" else None

    def __repr__(self) -> str:
        return (
            f"device(type='{self.type}')" if self.index is None else f"device(type='{self.type}', index={self.index})"
        )

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and (self.index or 0) == (other.index or 0)

    def __hash__(self) -> int:
        return hash((self.type, self.index or 0))

    def __enter__(self) -> device:
        """``with munet.device("vulkan"):`` makes factories without ``device=`` create tensors there."""
        _state.stack.append(_state.default)
        _state.default = _resolve_default(self)
        return self

    def __exit__(self, *exc) -> None:
        _state.default = _state.stack.pop()


class _BackendEntry:
    def __init__(
        self,
        list_devices: Callable[[], list[tuple[int, str, str]]],
        factory: Callable[[int], object],
        explain_unavailable: Callable[[int], str] | None = None,
        package: str | None = None,
        compile_target: str | None = None,
        current_index: Callable[[], int] | None = None,
    ):
        self.list_devices = list_devices
        self.current_index = current_index
        self.factory = factory
        self.explain_unavailable = explain_unavailable
        self.package = package
        self.compile_target = compile_target
        self.target_class: type | None = None  # compile_target, imported on first use
        self.instances: dict[int, object] = {}


_BACKENDS: dict[str, _BackendEntry] = {}
_REGISTRY_LOCK = threading.RLock()  # two threads asking for a new device must get one backend


def register_backend(
    device_type: str,
    list_devices,
    factory,
    explain_unavailable=None,
    package=None,
    compile_target=None,
    current_index=None,
) -> None:
    """Register a device type.

    ``list_devices()`` returns ``[(index, name, kind), ...]`` for the devices available now;
    ``factory(index)`` builds the backend object for one device. ``explain_unavailable(index)``,
    if given, says why a missing device is missing and how to get it (for the DeviceError).
    ``package`` names the ``munet.backends`` package holding the kernel table (default: the
    device type), so two device types can share one backend. ``compile_target`` names the class
    that lowers ``munet.compile`` plans on this device as ``"module:Class"`` (imported at the first
    compile, so registering a backend imports no compiler code); it follows
    ``munet.compiler.target.CompileTarget``. Without one, ``munet.compile`` refuses the device.
    ``current_index()``, if given, is the index a device named without one (``"cuda"``) means in the
    calling thread (``munet.cuda.set_device``), as in PyTorch; without it such a name means index 0.
    """
    _BACKENDS[device_type] = _BackendEntry(
        list_devices, factory, explain_unavailable, package or device_type, compile_target, current_index
    )


def devices() -> list[str]:
    """Every available device as ``'cpu'``, ``'vulkan:0  llvmpipe  CPU'``, ..."""
    out = []
    for dtype_name, entry in _BACKENDS.items():
        for index, name, kind in entry.list_devices():
            label = dtype_name if dtype_name == "cpu" else f"{dtype_name}:{index}"
            out.append(f"{label}  {name}  {kind}".rstrip())
    return out


def device_type_available(device_type: str) -> bool | None:
    """Whether ``device_type`` has at least one device here; None when no backend registers the type."""
    entry = _BACKENDS.get(device_type)
    if entry is None:
        return None
    return bool(entry.list_devices())


def backend_status() -> list[tuple[str, list[str], str]]:
    """For each registered device type: ``(type, [device lines], why none is available)``."""
    status = []
    for type_name, entry in _BACKENDS.items():
        lines = [line for line in devices() if line.split("  ")[0].split(":")[0] == type_name]
        reason = ""
        if not lines and entry.explain_unavailable is not None:
            reason = entry.explain_unavailable(0)
        status.append((type_name, lines, reason))
    return status


def _available_labels() -> str:
    return ", ".join(d.split("  ")[0] for d in devices()) or "none"


def get_backend(dev: device):
    """The backend object for ``dev``; raises DeviceError if no backend provides it."""
    entry = _BACKENDS.get(dev.type)
    if entry is None:
        raise DeviceError(f"unknown device '{dev}'; available devices: {_available_labels()}")
    index = dev.index if dev.index is not None else entry.current_index() if entry.current_index else 0
    backend = entry.instances.get(index)
    if backend is not None:
        return backend
    with _REGISTRY_LOCK:
        backend = entry.instances.get(index)
        if backend is None:
            if index not in {i for i, _, _ in entry.list_devices()}:
                reason = entry.explain_unavailable(index) if entry.explain_unavailable is not None else ""
                raise DeviceError(
                    f"device '{dev.type}:{index}' is not available; {reason + '; ' if reason else ''}"
                    f"available devices: {_available_labels()}"
                )
            backend = entry.factory(index)
            entry.instances[index] = backend
    return backend


def opened_backend(dev):
    """The backend object of ``dev`` when it was opened already in this process, else None (opens
    nothing: ``munet.cuda.memory_allocated()`` is 0 for a device never used, as in PyTorch)."""
    entry = _BACKENDS.get(dev.type)
    if entry is None:
        return None
    index = dev.index if dev.index is not None else entry.current_index() if entry.current_index else 0
    return entry.instances.get(index)


def compile_target(dev) -> type:
    """The compile target class the backend of ``dev`` registered (see ``register_backend``).

    Raises DeviceError for an unknown device type or one whose backend declared no target.
    """
    dev = as_device(dev)
    entry = _BACKENDS.get(dev.type)
    if entry is None:
        raise DeviceError(f"unknown device '{dev}'; available devices: {_available_labels()}")
    if entry.target_class is None:
        if entry.compile_target is None:
            raise DeviceError(
                f"munet.compile: the '{dev.type}' backend registered no compile target "
                "(register_backend(..., compile_target='module:Class'))"
            )
        module, _, name = entry.compile_target.partition(":")
        entry.target_class = getattr(importlib.import_module(module), name)
    return entry.target_class


def reset_backend(dev: device):
    """Drop ``dev``'s runtime, lost or not, and open a fresh one; returns the backend.

    The backend object (so the device identity of tensors) stays; its ``generation`` goes up, and
    tensors made before raise :class:`DeviceLostError` when used. A device never opened is just
    opened. Backends implement ``reset()`` and ``generation`` to support this.
    """
    entry = _BACKENDS.get(dev.type)
    opened = entry is not None and (dev.index or 0) in entry.instances
    backend = get_backend(dev)
    if not hasattr(backend, "reset"):
        raise DeviceError(f"device '{dev}' cannot be reset (its backend has no reset())")
    if opened:
        backend.reset()
    return backend


_CPU = device("cpu")


def host_device() -> device:
    """The device whose memory is the host's (``cpu``).

    Code that asks where a value lives compares devices with this one, never names: a compiled
    program keeps its host values (Adam's step count, as in PyTorch) on it whatever its device.
    """
    return _CPU


class _DefaultDevice(threading.local):
    """Each thread starts with none set (cpu); ``stack`` holds what enclosing ``with`` blocks restore."""

    def __init__(self):
        self.default: device | None = None
        self.stack: list[device | None] = []


_state = _DefaultDevice()


def _resolve_default(d) -> device:
    """``d`` as a device, checked to exist now (so a typo fails here, not at the first factory call)."""
    return get_backend(as_device(d)).device


def set_default_device(device) -> None:
    """Create tensors on ``device`` when a factory (``zeros``, ``tensor``, ``randn``, ...) gets no ``device=``.

    ``None`` restores cpu. ``from_numpy``, ``from_dlpack`` and the ``*_like`` factories are not
    affected (they keep their input's device). To change it for a block only, write
    ``with munet.device("vulkan"):``; a block restores the default it found when it ends.

    >>> munet.set_default_device("vulkan")
    >>> munet.zeros(3).device
    device(type='vulkan', index=0)
    """
    _state.default = None if device is None else _resolve_default(device)


def get_default_device() -> device:
    """The device factories use when given no ``device=`` (cpu unless set); with its index."""
    return _state.default or _CPU


def default_device_if_set() -> device | None:
    """The default device when one is set (``as_tensor(tensor)`` moves its input only then)."""
    return _state.default


def factory_device(d) -> device:
    """The device a factory called with ``device=d`` creates its tensor on."""
    if d is None:
        return _state.default or _CPU
    return as_device(d)


def as_device(d) -> device:
    if d is None:
        return _CPU
    if isinstance(d, device):
        return d
    if isinstance(d, int):
        raise DeviceError(f"device index {d} given without a type; write e.g. 'vulkan:{d}'")
    return device(d)
