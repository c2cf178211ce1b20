"""F.ctc_loss and nn.CTCLoss against PyTorch: losses and gradients through log_softmax."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet
import munet.nn.functional as F
from munet import nn
from tests.reference import assert_close, randn


def _case(steps, batch, classes, target_lengths, input_lengths, seed=0, repeat=False):
    rng = np.random.default_rng(seed)
    logits = randn(steps, batch, classes, seed=seed) * 2
    longest = max(target_lengths, default=0)
    targets = rng.integers(1, classes, size=(batch, longest))
    if repeat:  # repeated labels need a blank between them
        targets[:, 1::2] = targets[:, 0::2][:, : targets[:, 1::2].shape[1]]
    return logits, targets, list(input_lengths), list(target_lengths)


def _both(logits, targets, input_lengths, target_lengths, concatenated=False, **kwargs):
    outs = []
    for tensor, fn in ((munet.tensor, F.ctc_loss), (torch.tensor, torch.nn.functional.ctc_loss)):
        x = tensor(logits, requires_grad=True)
        log_probs = x.log_softmax(-1)
        if concatenated:
            t = tensor(np.concatenate([row[:n] for row, n in zip(targets, target_lengths)]).astype(np.int64))
        else:
            t = tensor(targets.astype(np.int64))
        loss = fn(log_probs, t, tensor(input_lengths), tensor(target_lengths), **kwargs)
        weights = np.random.default_rng(4).standard_normal(tuple(loss.shape)).astype(np.float32)
        (loss * tensor(weights)).sum().backward()
        outs.append((loss, x.grad))
    return outs


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("concatenated", [False, True])
@pytest.mark.parametrize("repeat", [False, True])
def test_matches_pytorch(reduction, concatenated, repeat):
    case = _case(12, 4, 6, target_lengths=[3, 5, 1, 4], input_lengths=[12, 10, 7, 12], repeat=repeat)
    (m_loss, m_grad), (t_loss, t_grad) = _both(*case, concatenated=concatenated, reduction=reduction)
    assert_close(m_loss, t_loss, rtol=1e-5, atol=1e-5)
    assert_close(m_grad, t_grad, rtol=1e-4, atol=1e-6, what="grad")


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_alignments_and_empty_targets(zero_infinity):
    # sample 0 needs 2 * 6 - 1 steps but has 4 (impossible); sample 2 has an empty target
    case = _case(8, 3, 5, target_lengths=[6, 2, 0], input_lengths=[4, 8, 5], seed=1, repeat=True)
    (m_loss, m_grad), (t_loss, t_grad) = _both(*case, reduction="none", zero_infinity=zero_infinity)
    assert_close(m_loss, t_loss, rtol=1e-5, atol=1e-5)
    if zero_infinity:
        assert not np.isnan(m_grad.numpy()).any()
        assert_close(m_grad, t_grad, rtol=1e-4, atol=1e-6, what="grad")
    else:  # the possible samples' gradients are PyTorch's and finite
        assert_close(m_grad[:, 1:], t_grad[:, 1:], rtol=1e-4, atol=1e-6, what="grad")


def test_blank_label_unbatched_and_module():
    logits, targets, _, _ = _case(9, 1, 5, target_lengths=[3], input_lengths=[9], seed=2)
    targets = targets - 1  # labels 0..3, blank is 4
    m_loss = nn.CTCLoss(blank=4, reduction="sum")(
        munet.tensor(logits[:, 0]).log_softmax(-1), munet.tensor(targets[0]), (9,), (3,)
    )
    t_loss = torch.nn.CTCLoss(blank=4, reduction="sum")(
        torch.tensor(logits[:, 0]).log_softmax(-1), torch.tensor(targets[0]), (9,), (3,)
    )
    assert_close(m_loss, t_loss, rtol=1e-5, atol=1e-5)
    assert repr(nn.CTCLoss()) == "CTCLoss()"
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(munet.zeros(3, 1, 2), munet.ones(1, 1, dtype=munet.int64), [3], [1], blank=2)


@pytest.mark.parametrize("target_lengths", [(0, 0), (2, 3)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float64_int32_targets_tuple_lengths_and_all_empty_targets(target_lengths, dtype):
    x = randn(6, 2, 4, seed=5).astype(dtype)
    targets = np.random.default_rng(6).integers(1, 4, size=(2, max(target_lengths))).astype(np.int32)
    m_x, t_x = munet.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    m = F.ctc_loss(m_x.log_softmax(-1), munet.tensor(targets), (6, 5), target_lengths)
    t = torch.nn.functional.ctc_loss(t_x.log_softmax(-1), torch.tensor(targets), (6, 5), target_lengths)
    assert_close(m, t, rtol=1e-5, atol=1e-6)
    m.backward()
    t.backward()
    assert_close(m_x.grad, t_x.grad, rtol=1e-4, atol=1e-6, what="grad")
