"""``SDPBackend`` and ``sdpa_kernel``, accepted for PyTorch scripts that choose an attention kernel.

MuNet has one implementation of ``F.scaled_dot_product_attention`` (the composite in
``munet/ops/attention.py``, which the compiler fuses), so every backend selection runs it: the
context manager checks its argument as PyTorch does, records the selection (readable with
:func:`current_backends`) and restores the previous one on exit.
"""

from __future__ import annotations

import contextlib
import enum
import threading


class SDPBackend(enum.IntEnum):
    """PyTorch's ``torch.nn.attention.SDPBackend`` values."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_ALL = (
    SDPBackend.MATH,
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.OVERRIDEABLE,
)
_selection = threading.local()


def current_backends() -> tuple[SDPBackend, ...]:
    """The backends the innermost ``sdpa_kernel`` block allows (all of them outside any)."""
    return getattr(_selection, "backends", _ALL)


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Within the block, ``scaled_dot_product_attention`` may use only ``backends`` (one
    ``SDPBackend`` or a list). MuNet's single implementation serves every selection."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(backends)
    wrong = [b for b in backends if not isinstance(b, SDPBackend)]
    if wrong:
        raise TypeError(f"sdpa_kernel: expected SDPBackend values, got {wrong[0]!r}")
    if not isinstance(set_priority, bool):
        raise TypeError(f"sdpa_kernel: set_priority must be a bool, got {type(set_priority).__name__}")
    previous = current_backends()
    _selection.backends = tuple(dict.fromkeys(backends))
    try:
        yield
    finally:
        _selection.backends = previous
