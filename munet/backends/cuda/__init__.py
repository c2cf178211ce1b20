"""The CUDA backend (``cuda:N`` devices through CuPy) and PyTorch's ``torch.backends.cuda`` flags.

``munet.backends.cuda.matmul.allow_tf32`` and ``is_built()`` are the flags PyTorch scripts set and
query, ``libraries`` names the vendor libraries, ``sdp`` holds the attention switches (``enable_flash_sdp``, ``math_sdp_enabled``, ...);
the rest of the package is the device runtime: ``discovery`` (which devices exist), ``memory`` (the pool and its figures), ``streams``,
``copies`` (casts, transfers, peer copies), ``backend`` (the backend contract), ``registry`` (the
eager kernel table, filled by every ``kernels_*.py``). Nothing here imports CuPy at import time.
See docs/cuda.md.
"""

from munet.backends.cuda import sdp
from munet.backends.cuda.flags import is_built, matmul
from munet.backends.cuda.libraries import preferred_blas_library, preferred_linalg_library
from munet.backends.cuda.sdp import *  # noqa: F403 - the attention switches, listed in sdp.__all__

__all__ = [*sdp.__all__, "is_built", "matmul", "preferred_blas_library", "preferred_linalg_library"]
