"""The CUDA backend (``cuda:N`` devices through CuPy) and PyTorch's ``torch.backends.cuda`` flags.

``munet.backends.cuda.matmul.allow_tf32`` and ``is_built()`` are the flags PyTorch scripts set and
query; the rest of the package is the device runtime: ``discovery`` (which devices exist),
``memory`` (the pool and its figures), ``streams``, ``copies`` (casts, transfers, peer copies),
``backend`` (the backend contract), ``registry`` (the eager kernel table, filled by every
``kernels_*.py``). Nothing here imports CuPy at import time. See docs/cuda.md.
"""

from munet.backends.cuda.flags import is_built, matmul

__all__ = ["is_built", "matmul"]
