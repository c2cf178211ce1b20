"""Connectionist temporal classification loss (``F.ctc_loss``), written in public ops.

The loss is the negative log of the total probability of every alignment of the target to the
input, computed by the forward (alpha) recursion over time in log space on the extended target
``blank, l1, blank, l2, ..., blank``. Each time step is a few batched tensor ops over
``(batch, 2 * max_target_length + 1)``; autograd differentiates the recursion, so the gradient is
the exact gradient of the loss with respect to ``log_probs``. PyTorch's kernel instead returns
the gradient with respect to the logits behind a ``log_softmax`` (it adds ``exp(log_probs)``); the
two agree once they flow back through ``log_softmax``, which is how ``ctc_loss`` is meant to be
fed (see docs/decisions.md).
"""

from __future__ import annotations

import munet
from munet import _dtype as D
from munet._tensor import Tensor

__all__ = ["ctc_loss"]

_NEG_INF = float("-inf")


def _logsumexp_last(x: Tensor) -> Tensor:
    """``logsumexp`` over the last dim that is ``-inf`` (with a zero, not NaN, gradient) where every
    entry is ``-inf``: impossible alignments must not poison the gradient of possible ones."""
    shift = x.detach().amax(dim=-1, keepdim=True)
    shift = munet.where(shift == _NEG_INF, 0.0, shift)
    total = (x - shift).exp().sum(dim=-1)
    reachable = total > 0
    return munet.where(reachable, munet.where(reachable, total, 1.0).log() + shift.squeeze(-1), _NEG_INF)


def _lengths(lengths, batch: int, what: str) -> Tensor:
    if not isinstance(lengths, Tensor):
        lengths = munet.tensor(list(lengths) if not isinstance(lengths, int) else [lengths], dtype=D.int64)
    lengths = lengths.reshape(-1).to(D.int64)
    if lengths.numel() != batch:
        raise RuntimeError(f"ctc_loss: expected {what} to have {batch} entries (the batch size), got {lengths.numel()}")
    return lengths


def _padded_targets(targets: Tensor, target_lengths: Tensor, batch: int) -> Tensor:
    """Targets as ``(N, S)``: 2-D targets as given, concatenated 1-D targets split by their lengths."""
    if targets.ndim == 2:
        if targets.size(0) != batch:
            raise RuntimeError(f"ctc_loss: expected targets of batch size {batch}, got shape {tuple(targets.shape)}")
        return targets.to(D.int64)
    lengths = target_lengths.tolist()
    if sum(lengths) != targets.numel():
        raise RuntimeError(
            f"ctc_loss: 1-D targets hold {targets.numel()} labels but target_lengths sum to {sum(lengths)}"
        )
    longest = max(lengths, default=0)
    rows, start = [], 0
    for n in lengths:
        row = targets[start : start + n].to(D.int64)
        rows.append(munet.cat([row, munet.zeros(longest - n, dtype=D.int64, device=targets.device)]))
        start += n
    return munet.stack(rows) if rows else targets.reshape(0, 0).to(D.int64)


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths,
    target_lengths,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """PyTorch's ``F.ctc_loss``: ``log_probs`` is ``(T, N, C)`` (or ``(T, C)`` unbatched), the
    output of ``log_softmax``; ``targets`` is ``(N, S)`` padded or 1-D concatenated; lengths are
    tensors or sequences of ints. ``reduction="mean"`` divides each loss by its target length, then
    averages over the batch; ``zero_infinity`` turns impossible alignments' infinite losses (and
    their gradients) into zeros."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(
            f"ctc_loss: expected log_probs of rank 3 (T, N, C) or 2 (T, C), got shape {tuple(log_probs.shape)}"
        )
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs, targets = log_probs.unsqueeze(1), targets.reshape(1, -1)
    steps, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise RuntimeError(f"ctc_loss: blank must be in label range [0, {classes}), got {blank}")
    input_lengths = _lengths(input_lengths, batch, "input_lengths")
    target_lengths = _lengths(target_lengths, batch, "target_lengths")
    if batch and int(input_lengths.max()) > steps:
        raise RuntimeError(f"ctc_loss: an input length ({int(input_lengths.max())}) exceeds the {steps} time steps")
    labels = _padded_targets(targets, target_lengths, batch).to(log_probs.device)
    # the extended target: blank between and around the labels; a label may be reached from two
    # positions back unless it repeats the label there (or is blank)
    width = 2 * labels.size(1) + 1
    extended = munet.full((batch, width), blank, dtype=D.int64, device=log_probs.device)
    extended[:, 1::2] = labels
    positions = munet.arange(width, device=log_probs.device)
    blanks = munet.full((batch, 2), blank, dtype=D.int64, device=log_probs.device)
    previous_label = munet.cat([blanks, extended], 1)[:, :width]  # the label two positions back
    can_skip = (positions >= 2) & (extended != blank) & (extended != previous_label)
    emissions = log_probs.gather(2, extended.unsqueeze(0).expand(steps, batch, width))  # (T, N, 2S+1)
    impossible = munet.full((batch, width), _NEG_INF, dtype=log_probs.dtype, device=log_probs.device)
    alpha = munet.where(positions < 2, emissions[0], impossible) if steps else impossible
    lengths_on_device = input_lengths.to(log_probs.device)
    pad = munet.full((batch, 2), _NEG_INF, dtype=log_probs.dtype, device=log_probs.device)
    for t in range(1, steps):
        stay = alpha
        shifted = munet.cat([pad, alpha], 1)  # shifted[:, s + 2] is alpha[:, s]
        advance = shifted[:, 1 : width + 1]
        skip = munet.where(can_skip, shifted[:, :width], _NEG_INF)
        stepped = _logsumexp_last(munet.stack([stay, advance, skip], -1)) + emissions[t]
        alpha = munet.where((lengths_on_device > t).unsqueeze(1), stepped, alpha)  # a finished input keeps its alpha
    last = (2 * target_lengths).to(log_probs.device).unsqueeze(1)
    ends = munet.cat(
        [alpha.gather(1, last), munet.where(last > 0, alpha.gather(1, (last - 1).clamp(min=0)), _NEG_INF)], 1
    )
    loss = -_logsumexp_last(ends)
    loss = munet.where(
        lengths_on_device > 0, loss, munet.where(target_lengths.to(log_probs.device) > 0, float("inf"), 0.0)
    )
    if zero_infinity:
        loss = munet.where(loss == float("inf"), 0.0, loss)
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return (loss / target_lengths.to(log_probs.device).clamp(min=1).to(loss.dtype)).mean()
    return loss.squeeze(0) if unbatched else loss
