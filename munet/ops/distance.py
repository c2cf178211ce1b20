"""Distances and similarities: cosine_similarity, pairwise_distance, pdist, cdist.

All are composites of elementwise ops, reductions and ``norm``; they follow PyTorch's
formulas exactly (``pairwise_distance`` adds ``eps`` to the difference; ``cosine_similarity``
divides each input by its norm clamped to ``eps``, the clamp not changing the gradient).
"""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet.ops._utils import broadcast_shapes, wrap_dim

__all__ = ["cosine_similarity", "pairwise_distance", "pdist", "cdist"]
__functional__ = ["cosine_similarity", "pairwise_distance", "pdist"]
__tensor_methods__: list[str] = []


def _as_float(x):
    return x if x.dtype.is_floating_point else x.to(D.get_default_dtype())


def _promote(x1, x2):
    target = D.promote_types(x1.dtype, x2.dtype)
    if not target.is_floating_point:
        target = D.get_default_dtype()
    return x1.to(target), x2.to(target)


def _clamped_norm(x, dim: int, eps: float):
    """``max(||x||, eps)`` in value, with the gradient of the unclamped norm (as PyTorch)."""
    norm = x.norm(2, dim, keepdim=True)
    return norm + (norm.clamp_min(eps) - norm).detach()


def cosine_similarity(x1, x2, dim: int = 1, eps: float = 1e-8):
    """``<x1, x2> / (max(||x1||, eps) * max(||x2||, eps))`` along ``dim`` (inputs broadcast)."""
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape), op="cosine_similarity")
    x1, x2 = _promote(x1, x2)
    x1, x2 = x1.expand(shape), x2.expand(shape)
    d = wrap_dim(dim, len(shape), "cosine_similarity")
    return ((x1 / _clamped_norm(x1, d, eps)) * (x2 / _clamped_norm(x2, d, eps))).sum(d)


def pairwise_distance(x1, x2, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    """``||x1 - x2 + eps||_p`` over the last dim (inputs broadcast)."""
    x1, x2 = _promote(x1, x2)
    ndim = max(x1.ndim, x2.ndim)
    if ndim == 0:
        raise RuntimeError("pairwise_distance: expected inputs of rank >= 1, got two scalars")
    return (x1 - x2 + eps).norm(p, ndim - 1, keepdim=keepdim)


def pdist(input, p: float = 2.0):
    """Distances between all row pairs ``i < j`` of an (N, M) input, as a vector of N(N-1)/2."""
    import munet

    if input.ndim != 2:
        raise RuntimeError(f"pdist: expected input of rank 2 (N, M), got shape {list(input.shape)}")
    if p < 0:
        raise RuntimeError(f"pdist: only supports non-negative p values, got {p}")
    input = _as_float(input)
    rows, cols = np.triu_indices(input.shape[0], 1)
    first = munet.tensor(rows.astype(np.int64), device=input.device)
    second = munet.tensor(cols.astype(np.int64), device=input.device)
    diff = input.index_select(0, first) - input.index_select(0, second)
    return diff.norm(p, 1)


def cdist(x1, x2, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between each row of ``x1`` (B?, P, M) and of ``x2`` (B?, R, M): (B?, P, R)."""
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist: expected inputs of rank >= 2, got shapes {list(x1.shape)} and {list(x2.shape)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(
            f"cdist: X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}"
        )
    if p < 0:
        raise RuntimeError(f"cdist: only supports non-negative p values, got {p}")
    x1, x2 = _promote(x1, x2)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return diff.norm(p, -1)
