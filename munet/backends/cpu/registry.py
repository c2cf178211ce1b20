"""The CPU kernel table: ``KERNELS[op_name] = fn`` and the decorator that fills it."""

from __future__ import annotations

import importlib
import pkgutil

KERNELS: dict[str, object] = {}


def kernel(*names: str):
    """Register the decorated function as the CPU kernel of each op in ``names``."""

    def register(fn):
        for name in names:
            if name in KERNELS:
                raise RuntimeError(f"cpu kernel for '{name}' registered twice")
            KERNELS[name] = fn
        return fn

    return register


_loaded = False


def load_kernel_modules() -> None:
    """Import every ``kernels_*`` module of this package once, so each registers its kernels."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import munet.backends.cpu as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("kernels_"):
            importlib.import_module(f"munet.backends.cpu.{info.name}")
