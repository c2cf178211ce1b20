"""Activation layers of munet.nn against torch.nn: output, input (and PReLU weight) gradients,
state_dict keys, repr, in-place variants, RReLU's train/eval behaviour."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close, randn, to_torch

# (layer name, constructor kwargs, input shape); every layer runs on these in float32 and float64.
CASES = [
    ("ReLU", {}, (3, 4)),
    ("ReLU6", {}, (3, 4)),
    ("GELU", {}, (3, 4)),
    ("GELU", {"approximate": "tanh"}, (3, 4)),
    ("SiLU", {}, (3, 4)),
    ("Mish", {}, (3, 4)),
    ("Sigmoid", {}, (3, 4)),
    ("Tanh", {}, (3, 4)),
    ("Softplus", {}, (3, 4)),
    ("Softplus", {"beta": 2.0, "threshold": 1.5}, (3, 4)),
    ("Softsign", {}, (3, 4)),
    ("LeakyReLU", {}, (3, 4)),
    ("LeakyReLU", {"negative_slope": 0.2}, (3, 4)),
    ("ELU", {}, (3, 4)),
    ("ELU", {"alpha": 0.5}, (3, 4)),
    ("SELU", {}, (3, 4)),
    ("CELU", {}, (3, 4)),
    ("CELU", {"alpha": 2.0}, (3, 4)),
    ("Hardtanh", {}, (3, 4)),
    ("Hardtanh", {"min_val": -0.5, "max_val": 2.0}, (3, 4)),
    ("Hardsigmoid", {}, (3, 4)),
    ("Hardswish", {}, (3, 4)),
    ("PReLU", {}, (2, 3, 4)),
    ("PReLU", {"num_parameters": 3, "init": 0.1}, (2, 3, 4)),
    ("RReLU", {}, (3, 4)),
    ("RReLU", {"lower": 0.2, "upper": 0.4}, (3, 4)),
    ("GLU", {}, (3, 4)),
    ("GLU", {"dim": 0}, (4, 3)),
    ("Softmax", {"dim": 1}, (3, 4)),
    ("Softmax", {"dim": 0}, (3, 4)),
    ("LogSoftmax", {"dim": -1}, (3, 4)),
    ("Softmin", {"dim": 1}, (3, 4)),
    ("Softmax2d", {}, (2, 3, 4, 5)),
    ("Softmax2d", {}, (3, 4, 5)),
    ("LogSigmoid", {}, (3, 4)),
    ("Threshold", {"threshold": 0.1, "value": -2.0}, (3, 4)),
    ("Tanhshrink", {}, (3, 4)),
    ("Softshrink", {}, (3, 4)),
    ("Softshrink", {"lambd": 1.0}, (3, 4)),
    ("Hardshrink", {}, (3, 4)),
    ("Hardshrink", {"lambd": 1.0}, (3, 4)),
]

INPLACE = [
    ("ReLU", {}),
    ("ReLU6", {}),
    ("SiLU", {}),
    ("Mish", {}),
    ("Hardsigmoid", {}),
    ("Hardswish", {}),
    ("LeakyReLU", {"negative_slope": 0.3}),
    ("ELU", {"alpha": 0.7}),
    ("SELU", {}),
    ("CELU", {"alpha": 1.5}),
    ("Hardtanh", {"min_val": -0.5, "max_val": 0.5}),
    ("Threshold", {"threshold": 0.1, "value": -2.0}),
    ("RReLU", {}),  # eval mode: deterministic
]


def _case_id(case) -> str:
    name, kwargs = case[0], case[1]
    return name + "".join(f"-{k}={v}" for k, v in kwargs.items())


def _pair(name: str, kwargs: dict):
    """The torch layer and the munet layer built with the same arguments and the same state."""
    t_layer = getattr(torch.nn, name)(**kwargs)
    m_layer = getattr(munet.nn, name)(**kwargs)
    m_layer.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in t_layer.state_dict().items()})
    return t_layer, m_layer


def _input(shape, dtype: str, seed: int = 0) -> np.ndarray:
    # Scaled so values land on both sides of every kink (shrink lambdas, hardtanh bounds, ...).
    return (2.0 * randn(*shape, dtype="float64", seed=seed)).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_forward_and_gradients_match_torch(case, dtype):
    name, kwargs, shape = case
    t_layer, m_layer = _pair(name, kwargs)
    if name == "RReLU":  # eval mode is deterministic; training mode is tested below
        t_layer.eval()
        m_layer.eval()
    t_layer.to(getattr(torch, dtype))
    m_layer.to(getattr(munet, dtype))
    x = _input(shape, dtype)
    t_x = to_torch(x).requires_grad_(True)
    m_x = munet.tensor(x, requires_grad=True)
    t_out = t_layer(t_x)
    m_out = m_layer(m_x)
    assert_close(m_out, t_out)
    upstream = randn(*t_out.shape, dtype=dtype, seed=1)
    t_out.backward(to_torch(upstream))
    m_out.backward(munet.tensor(upstream))
    assert_close(m_x.grad, t_x.grad, what="input grad")
    for (t_name, t_param), (m_name, m_param) in zip(t_layer.named_parameters(), m_layer.named_parameters()):
        assert t_name == m_name
        assert_close(m_param.grad, t_param.grad, what=f"{name}.{t_name} grad")


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_state_dict_and_repr_match_torch(case):
    name, kwargs, _ = case
    t_layer = getattr(torch.nn, name)(**kwargs)
    m_layer = getattr(munet.nn, name)(**kwargs)
    t_state, m_state = t_layer.state_dict(), m_layer.state_dict()
    assert list(m_state) == list(t_state)
    for key in t_state:
        assert tuple(m_state[key].shape) == tuple(t_state[key].shape), key
        np.testing.assert_array_equal(m_state[key].numpy(), t_state[key].numpy())  # PReLU init value
    assert repr(m_layer) == repr(t_layer)
    assert m_layer.extra_repr() == t_layer.extra_repr()


@pytest.mark.parametrize("case", INPLACE, ids=_case_id)
def test_inplace_modifies_input_and_matches_torch(case):
    name, kwargs = case
    t_layer, m_layer = _pair(name, {**kwargs, "inplace": True})
    t_layer.eval()
    m_layer.eval()
    assert repr(m_layer) == repr(t_layer)
    x = _input((3, 5), "float32", seed=2)
    t_x = to_torch(x).requires_grad_(True)
    m_x = munet.tensor(x, requires_grad=True)
    t_h, m_h = t_x * 1, m_x * 1  # in-place on a leaf that requires grad is an error in both
    t_out, m_out = t_layer(t_h), m_layer(m_h)
    assert m_out is m_h
    assert_close(m_h, t_h, what="input modified in place")
    upstream = randn(3, 5, seed=3)
    t_out.backward(to_torch(upstream))
    m_out.backward(munet.tensor(upstream))
    assert_close(m_x.grad, t_x.grad, what="input grad")
    # Without autograd the layer writes straight into the given tensor too.
    plain = munet.tensor(x)
    m_layer(plain)
    assert_close(plain, t_out.detach(), what="in-place without autograd")


@pytest.mark.parametrize("lower, upper", [(1.0 / 8, 1.0 / 3), (0.2, 0.4)])
def test_rrelu_training_draws_slopes_in_range(lower, upper):
    layer = munet.nn.RReLU(lower, upper)
    assert layer.training
    x = munet.tensor(_input((50, 40), "float32", seed=4), requires_grad=True)
    out = layer(x)
    out.sum().backward()
    xn, on, gn = x.detach().numpy(), out.detach().numpy(), x.grad.numpy()
    pos = xn > 0
    np.testing.assert_array_equal(on[pos], xn[pos])
    np.testing.assert_array_equal(gn[pos], 1.0)
    slopes = on[~pos] / xn[~pos]
    assert np.all((slopes >= lower - 1e-6) & (slopes <= upper + 1e-6))
    assert slopes.std() > 0.01, "training mode should draw a random slope per element"
    np.testing.assert_allclose(gn[~pos], slopes, rtol=1e-5)
    layer.eval()
    eval_out = layer(x).detach().numpy()
    np.testing.assert_allclose(eval_out[~pos], xn[~pos] * (lower + upper) / 2, rtol=1e-6)


def test_prelu_default_init_and_parameters():
    layer = munet.nn.PReLU(4, init=0.3, dtype=munet.float64)
    assert [name for name, _ in layer.named_parameters()] == ["weight"]
    assert isinstance(layer.weight, munet.nn.Parameter)
    assert layer.weight.dtype == munet.float64 and tuple(layer.weight.shape) == (4,)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), np.full(4, 0.3))
    with munet.no_grad():
        layer.weight.fill_(0.0)
    layer.reset_parameters()
    np.testing.assert_array_equal(layer.weight.detach().numpy(), np.full(4, 0.3))


def test_softmax_without_dim_warns_like_torch():
    with pytest.warns(UserWarning, match="dim"):
        out = munet.nn.Softmax()(munet.tensor(randn(2, 3)))
    with pytest.warns(UserWarning):
        expected = torch.nn.Softmax()(to_torch(randn(2, 3)))
    assert_close(out, expected)


def test_errors_name_the_layer():
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D"):
        munet.nn.Softmax2d()(munet.tensor(randn(2, 3)))
    with pytest.raises(AssertionError, match=r"max_val \(-1.0\) must be greater than min_val \(1.0\)"):
        munet.nn.Hardtanh(1.0, -1.0)
    with pytest.warns(FutureWarning, match="min_value"):
        layer = munet.nn.Hardtanh(min_value=-2.0)
    assert layer.min_val == -2.0


def test_every_layer_is_exported_and_tested():
    from munet.nn.modules import activation

    tested = {case[0] for case in CASES}
    assert set(activation.__all__) == tested
    for name in activation.__all__:
        assert getattr(munet.nn, name) is getattr(activation, name)
