"""``munet.nn.attention``: PyTorch's attention-backend selection (``SDPBackend``, ``sdpa_kernel``)."""

from munet.nn.attention.backends import SDPBackend, sdpa_kernel

__all__ = ["SDPBackend", "sdpa_kernel"]
