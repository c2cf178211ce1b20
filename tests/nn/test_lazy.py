"""Lazy layers infer their input size on the first call and then are the ordinary layers."""

import numpy as np
import pytest
import torch

import munet
from munet import nn
from tests.reference import assert_close, randn

CASES = [
    ("LazyLinear", (4,), {}, (3, 5)),
    ("LazyLinear", (4,), {"bias": False}, (2, 3, 7)),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 9)),
    ("LazyConv2d", (4, 3), {"stride": 2, "groups": 2}, (2, 6, 8, 8)),
    ("LazyConv2d", (4, 3), {}, (6, 8, 8)),  # unbatched: channels first
    ("LazyConv3d", (2, 2), {}, (1, 3, 4, 4, 4)),
    ("LazyConvTranspose2d", (4, 3), {}, (2, 3, 5, 5)),
    ("LazyBatchNorm1d", (), {}, (4, 3)),
    ("LazyBatchNorm1d", (), {"momentum": 0.3}, (4, 3, 5)),
    ("LazyBatchNorm2d", (), {"affine": False}, (4, 3, 2, 2)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", CASES, ids=str)
def test_materializes_like_pytorch(name, args, kwargs, shape):
    m_layer, t_layer = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert m_layer.has_uninitialized_params() and not list(m_layer.parameters())
    x = randn(*shape)
    t_out = t_layer(torch.tensor(x))
    calls = []
    m_layer.register_forward_hook(lambda mod, inp, out: calls.append(type(mod).__name__))
    m_layer.train()
    m_layer(munet.tensor(x))  # materializes
    assert type(m_layer).__name__ == type(t_layer).__name__ and calls == [type(t_layer).__name__]
    assert repr(m_layer) == repr(t_layer)
    assert list(m_layer.state_dict()) == list(t_layer.state_dict())
    for key, value in m_layer.state_dict().items():
        assert tuple(value.shape) == tuple(t_layer.state_dict()[key].shape), key
    # with PyTorch's initial values loaded, the next call and its gradients agree
    m_layer.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in t_layer.state_dict().items()})
    m_x, t_x = munet.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    m_out, t_out = m_layer(m_x), t_layer(t_x)
    assert_close(m_out, t_out, rtol=1e-5, atol=1e-5)
    w = np.random.default_rng(0).standard_normal(tuple(t_out.shape)).astype(np.float32)
    (m_out * munet.tensor(w)).sum().backward()
    (t_out * torch.tensor(w)).sum().backward()
    assert_close(m_x.grad, t_x.grad, rtol=1e-5, atol=1e-5, what="grad")


def test_optimizer_after_a_dry_run_and_sequential():
    model = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(2))
    model(munet.randn(3, 5))
    assert [tuple(p.shape) for p in model.parameters()] == [(8, 5), (8,), (2, 8), (2,)]
    opt = munet.optim.SGD(model.parameters(), lr=0.1)
    before = model[0].weight.detach().clone()
    model(munet.randn(3, 5)).sum().backward()
    opt.step()
    assert not np.allclose(before.numpy(), model[0].weight.detach().numpy())
