"""The CPU backend: flat NumPy buffers, strided NumPy views, NumPy kernels by op name; and PyTorch's
``torch.backends.cpu.get_cpu_capability``."""

from munet.backends.cpu.backend import CpuBackend
from munet.backends.cpu.capability import get_cpu_capability

__all__ = ["CpuBackend", "get_cpu_capability"]
