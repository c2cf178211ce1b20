"""Backends: each registers a device type with ``munet._device.register_backend``."""

from munet._device import register_backend
from munet.backends.cpu.backend import CpuBackend, _list_devices
from munet.backends.vulkan import adapters as _vulkan_adapters

register_backend("cpu", _list_devices, CpuBackend, compile_target="munet.compiler.lower_cpu:CpuTarget")
_vulkan_adapters.register()

from munet.backends import mps  # noqa: E402,F401 - PyTorch's flag namespace
