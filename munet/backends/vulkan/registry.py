"""The vulkan kernel table: ``KERNELS[op_name] = fn(runtime, *data, **attrs)``.

Each backend instance binds the table to its runtime. Importing this module fills the table
(the kernel modules build WGSL source only; nothing touches wgpu until a kernel runs), so
``munet._coverage`` can read it on a machine without wgpu.
"""

from __future__ import annotations

KERNELS: dict[str, object] = {}


def kernel(*names: str):
    """Register the decorated function as the vulkan kernel of each op in ``names``."""

    def register(fn):
        for name in names:
            if name in KERNELS:
                raise RuntimeError(f"vulkan kernel for '{name}' registered twice")
            KERNELS[name] = fn
        return fn

    return register


from munet.backends.vulkan import (  # noqa: E402,F401
    kernels_checks,
    kernels_conv,
    kernels_core,
    kernels_formula,
    kernels_indexing,
    kernels_linalg,
    kernels_movement,
    kernels_random,
    kernels_reduce,
    kernels_rows,
    kernels_scan,
    kernels_sort,
)
