"""The CUDA backend (``cuda:N`` devices through CuPy) and PyTorch's ``torch.backends.cuda`` flags.

``munet.backends.cuda.matmul.allow_tf32`` and ``is_built()`` are the flags PyTorch scripts set and
query, ``libraries`` names the vendor libraries, ``sdp`` holds the attention switches (``enable_flash_sdp``, ``math_sdp_enabled``, ...);
the rest of the package is the device runtime: ``discovery`` (which devices exist), ``memory`` (the pool and its figures), ``streams``,
``copies`` (casts, transfers, peer copies), ``backend`` (the backend contract), ``registry`` (the
eager kernel table, filled by every ``kernels_*.py``). Nothing here imports CuPy at import time.
See docs/cuda.md.
"""

from munet.backends.cuda.flags import is_built, matmul
from munet.backends.cuda.libraries import preferred_blas_library, preferred_linalg_library
from munet.backends.cuda.sdp import (
    SDPAParams,
    SDPBackend,
    can_use_cudnn_attention,
    can_use_efficient_attention,
    can_use_flash_attention,
    cudnn_sdp_enabled,
    enable_cudnn_sdp,
    enable_flash_sdp,
    enable_math_sdp,
    enable_mem_efficient_sdp,
    flash_sdp_enabled,
    is_ck_sdpa_available,
    is_flash_attention_available,
    math_sdp_enabled,
    mem_efficient_sdp_enabled,
    sdp_kernel,
)

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
    "is_built",
    "is_ck_sdpa_available",
    "is_flash_attention_available",
    "math_sdp_enabled",
    "matmul",
    "mem_efficient_sdp_enabled",
    "preferred_blas_library",
    "preferred_linalg_library",
    "sdp_kernel",
]
