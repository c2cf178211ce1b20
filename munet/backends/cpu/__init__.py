"""The CPU backend: flat NumPy buffers, strided NumPy views, NumPy kernels by op name."""

from munet.backends.cpu.backend import CpuBackend

__all__ = ["CpuBackend"]
