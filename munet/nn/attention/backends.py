"""``SDPBackend`` and ``sdpa_kernel``, for PyTorch scripts that choose an attention kernel.

MuNet has one implementation of ``F.scaled_dot_product_attention`` (the composite in
``munet/ops/attention.py``, which the compiler fuses), so every selection that allows a kernel runs
it: the context manager checks its argument as PyTorch does, records the selection for its thread
(readable with :func:`current_backends`) and restores the previous one on exit. A selection that
allows no kernel makes the op raise (``munet/_sdp_selection.py``).
"""

from __future__ import annotations

import contextlib

from munet._sdp_selection import SDPBackend, current_backends, selected

__all__ = ["SDPBackend", "current_backends", "sdpa_kernel"]


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Within the block, ``scaled_dot_product_attention`` may use only ``backends`` (one
    ``SDPBackend`` or a list). MuNet's single implementation serves every selection that has one of
    MATH, FLASH_ATTENTION, EFFICIENT_ATTENTION or CUDNN_ATTENTION."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(backends)
    wrong = [b for b in backends if not isinstance(b, SDPBackend)]
    if wrong:
        raise TypeError(f"sdpa_kernel: expected SDPBackend values, got {wrong[0]!r}")
    if not isinstance(set_priority, bool):
        raise TypeError(f"sdpa_kernel: set_priority must be a bool, got {type(set_priority).__name__}")
    with selected(tuple(dict.fromkeys(backends))):
        yield
