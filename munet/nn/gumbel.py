"""``F.gumbel_softmax``: a differentiable sample from a categorical distribution."""

from __future__ import annotations

import munet
from munet._tensor import Tensor

__all__ = ["gumbel_softmax"]


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """``softmax((logits + g) / tau)`` with Gumbel noise ``g = -log(Exponential(1))``. With
    ``hard=True`` the result is the one-hot of its argmax, with the soft sample's gradient
    (straight-through). ``eps`` is unused, as in PyTorch."""
    gumbels = -munet.empty_like(logits).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = munet.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft
