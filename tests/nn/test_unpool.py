"""F.max_unpool1d/2d/3d and nn.MaxUnpool* against PyTorch, forward and gradient."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet
import munet.nn.functional as F
from munet import nn
from tests.reference import assert_close, noncontiguous, randn

CASES = [
    (1, (2, 3, 9), dict(kernel_size=3, stride=2, padding=1)),
    (2, (2, 3, 7, 6), dict(kernel_size=2)),
    (2, (1, 2, 9, 9), dict(kernel_size=3, stride=2, padding=1)),  # overlapping windows
    (2, (3, 7, 6), dict(kernel_size=(2, 3), stride=(2, 1))),  # unbatched
    (3, (1, 2, 4, 4, 6), dict(kernel_size=2)),
]


@pytest.mark.parametrize("n,shape,kwargs", CASES, ids=str)
@pytest.mark.parametrize("contiguous", [True, False])
def test_matches_pytorch(n, shape, kwargs, contiguous):
    x = randn(*shape, seed=n)
    t_pooled, t_idx = getattr(torch.nn.functional, f"max_pool{n}d")(torch.tensor(x), return_indices=True, **kwargs)
    pooled = t_pooled.numpy()
    if not contiguous:
        pooled = noncontiguous(pooled)
    m_in, t_in = (
        munet.tensor(pooled, requires_grad=True),
        torch.tensor(np.ascontiguousarray(pooled), requires_grad=True),
    )
    m_idx = munet.tensor(t_idx.numpy())
    m_out = getattr(F, f"max_unpool{n}d")(m_in, m_idx, **kwargs)
    t_out = getattr(torch.nn.functional, f"max_unpool{n}d")(t_in, t_idx, **kwargs)
    assert_close(m_out, t_out)
    w = np.random.default_rng(1).standard_normal(tuple(t_out.shape)).astype(np.float32)
    (m_out * munet.tensor(w)).sum().backward()
    (t_out * torch.tensor(w)).sum().backward()
    assert_close(m_in.grad, t_in.grad, what="grad")


def test_module_with_output_size():
    x = randn(1, 2, 9, 9, seed=3)
    t_pool = torch.nn.MaxPool2d(2, return_indices=True)
    t_pooled, t_idx = t_pool(torch.tensor(x))
    m_unpool, t_unpool = nn.MaxUnpool2d(2), torch.nn.MaxUnpool2d(2)
    assert repr(m_unpool) == repr(t_unpool)
    m_out = m_unpool(munet.tensor(t_pooled.numpy()), munet.tensor(t_idx.numpy()), output_size=(1, 2, 9, 9))
    assert_close(m_out, t_unpool(t_pooled, t_idx, output_size=(1, 2, 9, 9)))
    with pytest.raises(ValueError, match="invalid output_size"):
        m_unpool(munet.tensor(t_pooled.numpy()), munet.tensor(t_idx.numpy()), output_size=(12, 12))
