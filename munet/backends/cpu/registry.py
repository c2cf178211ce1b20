"""The CPU kernel table: ``KERNELS[op_name] = fn`` and the decorator that fills it."""

from __future__ import annotations

import importlib
import pkgutil
import threading

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
_load_lock = threading.RLock()


def load_kernel_modules() -> None:
    """Import every ``kernels_*`` module of this package once, so each registers its kernels.

    Returns only when the table is complete, also in a thread that arrives while another loads it.
    """
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if _loaded:
            return
        import munet.backends.cpu as pkg

        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("kernels_"):
                importlib.import_module(f"munet.backends.cpu.{info.name}")
        _loaded = True
