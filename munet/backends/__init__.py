"""Backends: each registers a device type with ``munet._device.register_backend``.

The package is also PyTorch's ``torch.backends`` flag namespace: ``munet.backends.cuda.matmul``,
``munet.backends.cudnn`` and ``munet.backends.mps`` (see docs/decisions.md, 2026-12-02).
"""

from munet._device import register_backend
from munet.backends.cpu.backend import CpuBackend, _list_devices
from munet.backends.cuda import discovery as _cuda_discovery
from munet.backends.vulkan import adapters as _vulkan_adapters

register_backend("cpu", _list_devices, CpuBackend, compile_target="munet.compiler.lower_cpu:CpuTarget")
_vulkan_adapters.register()
_cuda_discovery.register()

from munet.backends import cudnn, mkl, mps, openmp  # noqa: E402,F401 - PyTorch's flag namespaces
