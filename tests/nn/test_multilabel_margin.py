"""F.multilabel_margin_loss and nn.MultiLabelMarginLoss against PyTorch."""

import numpy as np
import pytest
import torch

import munet
import munet.nn.functional as F
from munet import nn
from tests.reference import assert_close, noncontiguous, randn

TARGET = np.array([[3, 0, -1, 1, 2], [1, 4, 2, 0, 3], [-1, 2, 1, 0, 0], [2, 2, -1, 0, 0]], dtype=np.int64)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("rows", [4, 1, 0])
def test_matches_pytorch(reduction, rows):
    x = noncontiguous(randn(rows, 5))
    target = TARGET[:rows]
    if rows == 0 and reduction != "none":
        # PyTorch 2.13 returns an uninitialized value here (its kernel never writes the output);
        # MuNet gives what every other loss gives over no samples: 0 for the sum, NaN for the mean
        loss = nn.MultiLabelMarginLoss(reduction=reduction)(munet.tensor(x), munet.tensor(target))
        expected = 0.0 if reduction == "sum" else float("nan")
        np.testing.assert_equal(loss.item(), expected)
        return
    m_x, t_x = munet.tensor(x, requires_grad=True), torch.tensor(np.ascontiguousarray(x), requires_grad=True)
    m_loss = nn.MultiLabelMarginLoss(reduction=reduction)(m_x, munet.tensor(target))
    t_loss = torch.nn.MultiLabelMarginLoss(reduction=reduction)(t_x, torch.tensor(target))
    assert_close(m_loss, t_loss, rtol=1e-6, atol=1e-6)
    if rows:
        w = np.random.default_rng(0).standard_normal(tuple(t_loss.shape)).astype(np.float32)
        (m_loss * munet.tensor(w)).sum().backward()
        (t_loss * torch.tensor(w)).sum().backward()
        assert_close(m_x.grad, t_x.grad, what="grad")


def test_unbatched_and_errors():
    x = randn(5)
    m = F.multilabel_margin_loss(munet.tensor(x), munet.tensor(TARGET[0]), reduction="none")
    t = torch.nn.functional.multilabel_margin_loss(torch.tensor(x), torch.tensor(TARGET[0]), reduction="none")
    assert_close(m, t)
    with pytest.raises(RuntimeError, match="same shape"):
        F.multilabel_margin_loss(munet.zeros(2, 3), munet.zeros(2, dtype=munet.int64))
