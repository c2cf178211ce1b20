"""nn.init (formulas and distributions vs PyTorch) and nn.utils (clipping, vectors)."""

import math

import numpy as np
import pytest
import torch

import munet
import munet.nn as nn
from munet.nn import init
from tests.reference import assert_close


@pytest.mark.parametrize(
    "name,param",
    [
        ("linear", None),
        ("conv2d", None),
        ("sigmoid", None),
        ("tanh", None),
        ("relu", None),
        ("leaky_relu", None),
        ("leaky_relu", 0.2),
        ("selu", None),
    ],
)
def test_calculate_gain_matches_pytorch(name, param):
    assert init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))


def _std_and_bounds(t):
    a = t.detach().numpy().astype(np.float64)
    return a.std(), a.min(), a.max()


@pytest.mark.parametrize(
    "fn,kwargs,expected_std",
    [
        ("xavier_uniform_", {}, math.sqrt(2.0 / (64 + 32))),
        ("xavier_normal_", {"gain": 2.0}, 2.0 * math.sqrt(2.0 / (64 + 32))),
        ("kaiming_uniform_", {"a": math.sqrt(5)}, math.sqrt(2.0 / (1 + 5)) / math.sqrt((32 // 3) * 3 * 3)),
        ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}, math.sqrt(2.0) / math.sqrt(64 * 3)),
        ("normal_", {"mean": 0.0, "std": 0.02}, 0.02),
        ("uniform_", {"a": -0.5, "b": 0.5}, 1.0 / math.sqrt(12)),
    ],
)
def test_initializer_distributions(fn, kwargs, expected_std):
    shape = (64, 32, 3) if "xavier" not in fn else (64, 32)
    if fn == "kaiming_uniform_":
        shape = (64, 32 // 3, 3, 3)
    t = munet.empty(*shape)
    getattr(init, fn)(t, **kwargs)
    std, low, high = _std_and_bounds(t)
    assert std == pytest.approx(expected_std, rel=0.06)
    if "uniform" in fn:
        bound = math.sqrt(3.0) * expected_std
        assert -bound <= low and high <= bound


def test_trunc_normal_orthogonal_eye_dirac_constant():
    t = init.trunc_normal_(munet.empty(4000), mean=0.5, std=1.0, a=0.0, b=1.0)
    assert 0.0 <= t.min().item() and t.max().item() <= 1.0
    q = init.orthogonal_(munet.empty(6, 10), gain=2.0)
    np.testing.assert_allclose(q.numpy() @ q.numpy().T, 4 * np.eye(6), atol=1e-5)
    assert init.eye_(munet.empty(3, 4)).tolist() == torch.nn.init.eye_(torch.empty(3, 4)).tolist()
    d = init.dirac_(munet.empty(4, 2, 3, 3), groups=2)
    assert_close(d, torch.nn.init.dirac_(torch.empty(4, 2, 3, 3), groups=2))
    assert init.constant_(munet.empty(2), 3.5).tolist() == [3.5, 3.5]
    assert init.zeros_(munet.ones(2)).tolist() == [0.0, 0.0] and init.ones_(munet.zeros(1)).tolist() == [1.0]
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(munet.empty(3))


def test_same_seed_same_init():
    a = init.kaiming_uniform_(munet.empty(5, 5), generator=munet.Generator().manual_seed(3))
    b = init.kaiming_uniform_(munet.empty(5, 5), generator=munet.Generator().manual_seed(3))
    assert munet.equal(a, b)


def _grads_pair():
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype(np.float32) * 3 for s in ((3, 4), (5,), (2, 2))]
    m = [munet.tensor(v, requires_grad=True) for v in values]
    t = [torch.tensor(v, requires_grad=True) for v in values]
    for mp, tp, v in zip(m, t, values):
        mp.grad = munet.tensor(v * 2)
        tp.grad = torch.tensor(v * 2)
    return m, t


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
def test_clip_grad_norm_matches_pytorch(norm_type):
    m, t = _grads_pair()
    m_norm = nn.utils.clip_grad_norm_(m, max_norm=1.5, norm_type=norm_type)
    t_norm = torch.nn.utils.clip_grad_norm_(t, max_norm=1.5, norm_type=norm_type, foreach=False)
    assert m_norm.item() == pytest.approx(t_norm.item(), rel=1e-5)
    for mp, tp in zip(m, t):
        assert_close(mp.grad, tp.grad)


def test_clip_grad_norm_nonfinite_and_value():
    m, t = _grads_pair()
    m[0].grad[0, 0] = float("inf")
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(m, 1.0, error_if_nonfinite=True)
    m, t = _grads_pair()
    nn.utils.clip_grad_value_(m, 0.5)
    torch.nn.utils.clip_grad_value_(t, 0.5)
    for mp, tp in zip(m, t):
        assert_close(mp.grad, tp.grad)


def test_parameters_to_vector_round_trip():
    layer = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(layer.parameters())
    assert vec.shape == (8,)
    nn.utils.vector_to_parameters(munet.arange(8.0), layer.parameters())
    assert layer.weight.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and layer.bias.tolist() == [6.0, 7.0]
    with pytest.raises(ValueError, match="parameters need 8"):
        nn.utils.vector_to_parameters(munet.zeros(5), layer.parameters())
