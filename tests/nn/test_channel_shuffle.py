"""F.channel_shuffle and nn.ChannelShuffle against PyTorch."""

import numpy as np
import pytest
import torch

import munet
import munet.nn.functional as F
from munet import nn
from tests.reference import assert_close, noncontiguous, randn


@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 4), 3), ((1, 4, 5), 2), ((0, 6, 2, 2), 2), ((2, 8, 2, 2, 2), 4)])
def test_matches_pytorch(shape, groups):
    x = noncontiguous(randn(*shape))
    m_x, t_x = munet.tensor(x, requires_grad=True), torch.tensor(np.ascontiguousarray(x), requires_grad=True)
    m_out, t_out = nn.ChannelShuffle(groups)(m_x), torch.nn.ChannelShuffle(groups)(t_x)
    assert_close(m_out, t_out)
    w = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    (m_out * munet.tensor(w)).sum().backward()
    (t_out * torch.tensor(w)).sum().backward()
    assert_close(m_x.grad, t_x.grad, what="grad")
    assert repr(nn.ChannelShuffle(groups)) == repr(torch.nn.ChannelShuffle(groups))


def test_errors():
    with pytest.raises(RuntimeError, match="divisible by groups"):
        F.channel_shuffle(munet.zeros(1, 5, 2, 2), 2)
    with pytest.raises(RuntimeError, match="at least 3 dimensions"):
        F.channel_shuffle(munet.zeros(4, 4), 2)
