"""``munet.backends.cudnn``: PyTorch's cuDNN flags, settable as in PyTorch scripts.

MuNet does not call cuDNN: convolutions on cuda run MuNet's own kernels. So ``is_available()`` is
False and ``version()`` None (what PyTorch answers where cuDNN is missing), and the flags
(``enabled``, ``benchmark``, ``benchmark_limit``, ``deterministic``, ``allow_tf32``) are kept with
PyTorch's defaults so that scripts setting them run unchanged; they change no MuNet kernel.

>>> munet.backends.cudnn.benchmark = True
>>> with munet.backends.cudnn.flags(enabled=False):
...     pass
"""

from __future__ import annotations

import contextlib

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version() -> int | None:
    return None


def is_acceptable(tensor) -> bool:
    """Whether cuDNN would take ``tensor``: never, since MuNet does not call cuDNN."""
    return False


@contextlib.contextmanager
def flags(
    enabled: bool = False,
    benchmark: bool = False,
    benchmark_limit: int | None = 10,
    deterministic: bool = False,
    allow_tf32: bool = True,
):
    """Set the flags for a block and restore them after it (PyTorch's defaults of ``flags``)."""
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    module = globals()
    saved = {name: module[name] for name in names}
    module.update(
        enabled=enabled,
        benchmark=benchmark,
        benchmark_limit=benchmark_limit,
        deterministic=deterministic,
        allow_tf32=allow_tf32,
    )
    try:
        yield
    finally:
        module.update(saved)
