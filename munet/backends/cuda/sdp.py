"""``munet.backends.cuda``'s attention switches: ``enable_flash_sdp``/``flash_sdp_enabled`` and the
math, mem-efficient and cuDNN siblings, the deprecated ``sdp_kernel``, ``SDPAParams`` and the
``can_use_*`` checks.

They are one state with ``munet.nn.attention.sdpa_kernel`` (``munet/_sdp_selection.py``): the
``enable_*`` calls set the process-wide selection, a ``sdpa_kernel`` block overrides it in its
thread, ``*_enabled()`` reads what applies now, and ``scaled_dot_product_attention`` raises when
nothing it can serve is allowed. MuNet has one implementation of ``scaled_dot_product_attention`` (the
math composite, fused by the compiler) and no flash, memory-efficient or cuDNN kernel, so
``can_use_*`` and ``is_flash_attention_available`` answer False, as PyTorch does where those
kernels cannot run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings

from munet._sdp_selection import SDPBackend, current_backends, selected, set_backend_enabled

__all__ = [
    "SDPAParams",
    "SDPBackend",
    "can_use_cudnn_attention",
    "can_use_efficient_attention",
    "can_use_flash_attention",
    "cudnn_sdp_enabled",
    "enable_cudnn_sdp",
    "enable_flash_sdp",
    "enable_math_sdp",
    "enable_mem_efficient_sdp",
    "flash_sdp_enabled",
    "is_ck_sdpa_available",
    "is_flash_attention_available",
    "math_sdp_enabled",
    "mem_efficient_sdp_enabled",
    "sdp_kernel",
]


def flash_sdp_enabled() -> bool:
    return SDPBackend.FLASH_ATTENTION in current_backends()


def mem_efficient_sdp_enabled() -> bool:
    return SDPBackend.EFFICIENT_ATTENTION in current_backends()


def math_sdp_enabled() -> bool:
    return SDPBackend.MATH in current_backends()


def cudnn_sdp_enabled() -> bool:
    return SDPBackend.CUDNN_ATTENTION in current_backends()


def enable_flash_sdp(enabled: bool) -> None:
    set_backend_enabled(SDPBackend.FLASH_ATTENTION, enabled)


def enable_mem_efficient_sdp(enabled: bool) -> None:
    set_backend_enabled(SDPBackend.EFFICIENT_ATTENTION, enabled)


def enable_math_sdp(enabled: bool) -> None:
    set_backend_enabled(SDPBackend.MATH, enabled)


def enable_cudnn_sdp(enabled: bool) -> None:
    set_backend_enabled(SDPBackend.CUDNN_ATTENTION, enabled)


def is_flash_attention_available() -> bool:
    """False: MuNet has no flash-attention kernel."""
    return False


def is_ck_sdpa_available() -> bool:
    """False: the composable-kernel attention is a ROCm library MuNet does not use."""
    return False


@dataclasses.dataclass
class SDPAParams:
    """The arguments of one ``scaled_dot_product_attention`` call, for the ``can_use_*`` checks."""

    query: object
    key: object
    value: object
    attn_mask: object = None
    dropout: float = 0.0
    is_causal: bool = False
    enable_gqa: bool = False


def _no_fused_kernel(params: SDPAParams, debug: bool, name: str) -> bool:
    if not isinstance(params, SDPAParams):
        raise TypeError(f"can_use_{name}: expected SDPAParams, got {type(params).__name__}")
    if debug:
        warnings.warn(f"MuNet has no {name} kernel: scaled_dot_product_attention runs its math composite", stacklevel=3)
    return False


def can_use_flash_attention(params: SDPAParams, debug: bool = False) -> bool:
    return _no_fused_kernel(params, debug, "flash_attention")


def can_use_efficient_attention(params: SDPAParams, debug: bool = False) -> bool:
    return _no_fused_kernel(params, debug, "efficient_attention")


def can_use_cudnn_attention(params: SDPAParams, debug: bool = False) -> bool:
    return _no_fused_kernel(params, debug, "cudnn_attention")


@contextlib.contextmanager
def sdp_kernel(
    enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True, enable_cudnn: bool = True
):
    """Deprecated in PyTorch for ``munet.nn.attention.sdpa_kernel``: the same selection by flags."""
    warnings.warn(
        "`munet.backends.cuda.sdp_kernel()` is deprecated; use `munet.nn.attention.sdpa_kernel()`",
        FutureWarning,
        stacklevel=3,
    )
    chosen = [
        backend
        for backend, on in (
            (SDPBackend.FLASH_ATTENTION, enable_flash),
            (SDPBackend.EFFICIENT_ATTENTION, enable_mem_efficient),
            (SDPBackend.MATH, enable_math),
            (SDPBackend.CUDNN_ATTENTION, enable_cudnn),
        )
        if on
    ]
    with selected(tuple(chosen)):
        yield
