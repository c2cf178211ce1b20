"""Which attention backends ``scaled_dot_product_attention`` may use: PyTorch's ``SDPBackend``
values, the process-wide switches (``munet.backends.cuda.enable_flash_sdp`` and its siblings) and
the per-thread override of a ``munet.nn.attention.sdpa_kernel`` block.

MuNet has one implementation (the math composite of ``munet/ops/attention.py``, which the compiler
fuses), and it serves any selection that allows one of MATH, FLASH_ATTENTION, EFFICIENT_ATTENTION or
CUDNN_ATTENTION. A selection with none of them (everything switched off, or only OVERRIDEABLE)
makes the op raise, as PyTorch does when no kernel is allowed.
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


ALL_BACKENDS = (
    SDPBackend.MATH,
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.OVERRIDEABLE,
)
_SERVED = frozenset(ALL_BACKENDS[:4])
_selection = threading.local()
_enabled = set(ALL_BACKENDS)


def current_backends() -> tuple[SDPBackend, ...]:
    """The backends allowed now: the innermost ``sdpa_kernel`` block's, else the process-wide ones."""
    selected = getattr(_selection, "backends", None)
    return selected if selected is not None else tuple(b for b in ALL_BACKENDS if b in _enabled)


def set_backend_enabled(backend: SDPBackend, enabled: bool) -> None:
    """Allow or forbid ``backend`` process-wide (outside ``sdpa_kernel`` blocks)."""
    if not isinstance(enabled, bool):
        raise TypeError(f"expected a bool, got {type(enabled).__name__}")
    (_enabled.add if enabled else _enabled.discard)(backend)


@contextlib.contextmanager
def selected(backends: tuple[SDPBackend, ...]):
    """Within the block, in this thread, only ``backends`` are allowed."""
    previous = getattr(_selection, "backends", None)
    _selection.backends = backends
    try:
        yield
    finally:
        _selection.backends = previous


def check_backend_available(op: str) -> None:
    """Raise unless the selection allows a backend MuNet's implementation serves."""
    if _SERVED.isdisjoint(current_backends()):
        raise RuntimeError(
            f"No viable backend for {op} was found. This is likely due to turning off both the math kernel and the "
            f"fused kernels (allowed now: {[b.name for b in current_backends()]})."
        )
