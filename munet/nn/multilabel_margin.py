"""``F.multilabel_margin_loss``: the multi-label hinge loss, written in public ops."""

from __future__ import annotations

import munet
from munet import _dtype as D
from munet._tensor import Tensor

__all__ = ["multilabel_margin_loss"]


def multilabel_margin_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """PyTorch's ``F.multilabel_margin_loss``: ``target`` holds class indices, ended by the first
    ``-1``; each sample's loss is ``sum over its targets j and non-target classes i of
    max(0, 1 - (x[j] - x[i])) / C``."""
    from munet.ops.loss import _legacy_reduction

    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if input.ndim not in (0, 1, 2) or tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(
            "multilabel_margin_loss: expected input (C,) or (N, C) and a target of the same shape, got input "
            f"{list(input.shape)} and target {list(target.shape)}"
        )
    if target.dtype.is_floating_point:
        raise RuntimeError(f"multilabel_margin_loss: expected an integer target, got {target.dtype.name}")
    x = input.reshape(-1, input.shape[-1] if input.ndim else 1)
    t = target.reshape(x.shape).to(D.int64)
    classes = x.size(1)
    listed = (t >= 0).to(D.int64).cumprod(1).to(D.bool_)  # the targets before the first -1
    safe = munet.where(listed, t, 0)
    is_target = ((safe.unsqueeze(2) == munet.arange(classes, device=x.device)) & listed.unsqueeze(2)).any(1)
    picked = x.gather(1, safe)  # (N, S)
    margins = (1 - picked.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)  # (N, S, C): target j against class i
    counted = listed.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = munet.where(counted, margins, 0.0).sum((1, 2)) / classes
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss.reshape(input.shape[:1] if input.ndim == 2 else ())
