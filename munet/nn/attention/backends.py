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
_enabled = set(_ALL)  # process-wide: munet.backends.cuda.enable_*_sdp


def current_backends() -> tuple[SDPBackend, ...]:
    """The backends the innermost ``sdpa_kernel`` block allows (outside any, the process-wide ones
    that ``munet.backends.cuda.enable_flash_sdp`` and its siblings set; all by default)."""
    selected = getattr(_selection, "backends", None)
    return selected if selected is not None else tuple(b for b in _ALL if b in _enabled)


def set_backend_enabled(backend: SDPBackend, enabled: bool) -> None:
    """Allow or forbid ``backend`` process-wide (outside ``sdpa_kernel`` blocks)."""
    if not isinstance(enabled, bool):
        raise TypeError(f"expected a bool, got {type(enabled).__name__}")
    (_enabled.add if enabled else _enabled.discard)(backend)


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
    previous = getattr(_selection, "backends", None)
    _selection.backends = tuple(dict.fromkeys(backends))
    try:
        yield
    finally:
        _selection.backends = previous
