"""The cuda kernel table: ``KERNELS[op_name] = fn(rt, *data, **attrs)``, the one place the cuda
backend looks up an op's eager kernel.

A kernel module is any ``kernels_*.py`` file of this package: importing this module imports each
of them once, and each registers its functions with :func:`kernel`, so adding kernels is adding a
file, not editing a dispatcher. Kernel modules build source text only at import and touch neither
CuPy nor the GPU (``munet._coverage`` reads the table on machines without CUDA).

The calling convention (``munet.backends.cuda.backend.CudaBackend`` binds it):

- ``rt`` is the device's :class:`~munet.backends.cuda.backend.CudaRuntime`: ``rt.cupy`` (the
  module), ``rt.index``, ``rt.empty(shape, dtype)`` (a fresh C-contiguous array from the device's
  pool), ``rt.stream`` (the current ``cupy.cuda.Stream`` of the device: launch on it).
- ``data`` are ``cupy.ndarray`` views (shape, byte strides, ``.data.ptr``) on ``rt``'s device; a
  bfloat16 tensor's data is its bits as ``uint16`` (``copies.storage_dtype``): MuNet has no uint16
  dtype, so a uint16 array always holds bfloat16.
- the kernel runs inside ``rt``'s device scope: CuPy's current device is ``rt.index`` and every
  allocation comes from the device's pool, whatever device the caller had current.
- it returns a new array (or a tuple of them) whose dtype is the op's declared one (``wrap`` casts
  otherwise); an in-place kernel (``name_``) writes into its first argument.

An op with no entry raises ``munet.DeviceError("<op>: no kernel for device 'cuda:N'")`` from the
dispatcher; nothing falls back to the CPU.
"""

from __future__ import annotations

import importlib
import pkgutil

KERNELS: dict[str, object] = {}


def kernel(*names: str):
    """Register the decorated function as the cuda kernel of each op in ``names``."""

    def register(fn):
        for name in names:
            if name in KERNELS:
                raise RuntimeError(f"cuda kernel for '{name}' registered twice")
            KERNELS[name] = fn
        return fn

    return register


def _load_kernel_modules() -> None:
    import munet.backends.cuda as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("kernels_"):
            importlib.import_module(f"munet.backends.cuda.{info.name}")


_load_kernel_modules()
