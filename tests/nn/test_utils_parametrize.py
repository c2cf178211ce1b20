"""nn.utils.parametrize and nn.utils.parametrizations against PyTorch: values, gradients, state dicts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.utils import parametrizations as tP
from torch.nn.utils import parametrize as tp

import munet
from munet import nn
from munet.nn.utils import parametrizations as mP
from munet.nn.utils import parametrize as mp
from tests.reference import assert_close, assert_close_with_reference, float64_copy, randn


def _pair(name, *args, **kwargs):
    torch.manual_seed(0)
    t_layer = getattr(torch.nn, name)(*args, **kwargs)
    m_layer = getattr(nn, name)(*args, **kwargs)
    m_layer.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in t_layer.state_dict().items()})
    return m_layer, t_layer


def _load_from_torch(m_layer, t_layer):
    m_layer.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in t_layer.state_dict().items()})


def _compare_forward_backward(m_layer, t_layer, x: np.ndarray, rtol=None, atol=None, r_layer=None):
    """Output, input gradient and parameter gradients of ``m_layer`` against ``t_layer``'s; with
    ``r_layer`` (``float64_copy(t_layer)``, made before this forward) float32 results are compared
    with ``assert_close_to_reference`` against its float64 run instead of ``rtol``/``atol``."""
    m_x, t_x = munet.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    m_out, t_out = m_layer(m_x), t_layer(t_x)
    w = np.random.default_rng(9).standard_normal(tuple(t_out.shape)).astype(np.float32)
    (m_out * munet.tensor(w)).sum().backward()
    (t_out * torch.tensor(w)).sum().backward()
    r_out = r_x = None
    r_grads: dict = {}
    if r_layer is not None:
        r_x = torch.tensor(x.astype(np.float64), requires_grad=True)
        r_out = r_layer(r_x)
        (r_out * torch.tensor(w.astype(np.float64))).sum().backward()
        r_out, r_x = r_out.detach().numpy(), r_x.grad.numpy()
        r_grads = {key: p.grad.numpy() for key, p in r_layer.named_parameters()}
    assert_close_with_reference(m_out, t_out, r_out, rtol, atol)
    assert_close_with_reference(m_x.grad, t_x.grad, r_x, rtol, atol, what="input grad")
    t_params = dict(t_layer.named_parameters())
    assert list(dict(m_layer.named_parameters())) == list(t_params)
    for key, p in m_layer.named_parameters():
        assert_close_with_reference(p.grad, t_params[key].grad, r_grads.get(key), rtol, atol, what=f"grad of {key}")


class _Symmetric(torch.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).mT

    def right_inverse(self, x):
        return x.triu()


class _MSymmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).mT

    def right_inverse(self, x):
        return x.triu()


class _Scale(torch.nn.Module):
    def forward(self, x):
        return 2 * x

    def right_inverse(self, x):
        return x / 2


class _MScale(nn.Module):
    def forward(self, x):
        return 2 * x

    def right_inverse(self, x):
        return x / 2


def test_register_chain_assign_and_remove():
    m_layer, t_layer = _pair("Linear", 4, 4)
    for lib, layer, sym, scale in ((mp, m_layer, _MSymmetric(), _MScale()), (tp, t_layer, _Symmetric(), _Scale())):
        lib.register_parametrization(layer, "weight", sym)
        lib.register_parametrization(layer, "weight", scale)
    assert type(m_layer).__name__ == type(t_layer).__name__ == "ParametrizedLinear"
    assert list(m_layer.state_dict()) == list(t_layer.state_dict())
    assert mp.is_parametrized(m_layer) and mp.is_parametrized(m_layer, "weight")
    assert not mp.is_parametrized(m_layer, "bias")
    assert_close(m_layer.weight, t_layer.weight)
    _compare_forward_backward(m_layer, t_layer, randn(3, 4, seed=1))
    value = randn(4, 4, seed=2)
    m_layer.weight = munet.tensor(value)  # through the right inverses
    with torch.no_grad():
        t_layer.weight = torch.tensor(value)
    assert_close(m_layer.parametrizations.weight.original, t_layer.parametrizations.weight.original)
    with mp.cached():
        assert m_layer.weight is m_layer.weight
    assert m_layer.weight is not m_layer.weight
    assert mp.type_before_parametrizations(m_layer) is nn.Linear
    mp.remove_parametrizations(m_layer, "weight")
    tp.remove_parametrizations(t_layer, "weight")
    assert type(m_layer) is nn.Linear and not mp.is_parametrized(m_layer)
    assert list(m_layer.state_dict()) == list(t_layer.state_dict()) == ["bias", "weight"]
    assert_close(m_layer.weight, t_layer.weight)
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        mp.remove_parametrizations(m_layer, "weight")


def test_shape_changing_parametrization_needs_unsafe():
    class Flat(nn.Module):
        def forward(self, x):
            return x.flatten()

    with pytest.raises(ValueError, match="may not change the shape"):
        mp.register_parametrization(nn.Linear(2, 3), "weight", Flat())
    layer = mp.register_parametrization(nn.Linear(2, 3), "weight", Flat(), unsafe=True)
    assert tuple(layer.weight.shape) == (6,)
    with pytest.raises(ValueError, match="does not have a parameter"):
        mp.register_parametrization(nn.Linear(2, 3), "nothing", Flat())


@pytest.mark.parametrize("dim", [0, 1, None])
@pytest.mark.parametrize("layer", [("Linear", (5, 4)), ("Conv2d", (3, 4, 3))], ids=str)
def test_weight_norm(dim, layer):
    name, args = layer
    m_layer, t_layer = _pair(name, *args)
    mP.weight_norm(m_layer, dim=dim)
    tP.weight_norm(t_layer, dim=dim)
    assert list(m_layer.state_dict()) == list(t_layer.state_dict())
    g = m_layer.parametrizations.weight.original0
    assert tuple(g.shape) == tuple(t_layer.parametrizations.weight.original0.shape)
    x = randn(2, 5, seed=3) if name == "Linear" else randn(2, 3, 6, 6, seed=3)
    _compare_forward_backward(m_layer, t_layer, x, rtol=1e-5, atol=1e-6)
    mP.weight_norm(mp.remove_parametrizations(m_layer, "weight"), dim=dim)  # round trip
    _load_from_torch(m_layer, t_layer)


@pytest.mark.parametrize("layer", [("Linear", (5, 4)), ("Conv2d", (3, 4, 3)), ("ConvTranspose2d", (3, 4, 3))], ids=str)
def test_spectral_norm_with_pytorch_vectors(layer):
    name, args = layer
    m_layer, t_layer = _pair(name, *args)
    mP.spectral_norm(m_layer)
    tP.spectral_norm(t_layer)
    assert list(m_layer.state_dict()) == list(t_layer.state_dict())
    _load_from_torch(m_layer, t_layer)  # the random starting vectors
    x = randn(2, 5, seed=4) if name == "Linear" else randn(2, 3, 6, 6, seed=4)
    for training in (True, False):  # training runs a power-iteration step; eval does not
        m_layer.train(training)
        t_layer.train(training)
        # the weight gradient has elements that cancel (0.089 from terms near 20), whose float32
        # rounding depends on the CPU's GEMM kernels (OpenBLAS's SkylakeX and Haswell ones differ
        # there by 2e-6): compared against a float64 run of PyTorch's layer, not a fixed rtol
        r_layer = float64_copy(t_layer)
        _compare_forward_backward(m_layer, t_layer, x, r_layer=r_layer)
        m_u, r_u = m_layer.parametrizations.weight[0]._u, r_layer.parametrizations.weight[0]._u.numpy()
        assert_close_with_reference(m_u, t_layer.parametrizations.weight[0]._u, r_u, what="_u")
        for p in (*m_layer.parameters(), *t_layer.parameters()):
            p.grad = None


def test_spectral_norm_estimates_the_largest_singular_value():
    layer = mP.spectral_norm(nn.Linear(6, 5), n_power_iterations=30)
    sigma = np.linalg.svd(layer.weight.detach().numpy(), compute_uv=False)[0]
    assert sigma == pytest.approx(1.0, rel=1e-4)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6)], ids=str)
def test_orthogonal(orthogonal_map, shape):
    m_layer, t_layer = _pair("Linear", shape[1], shape[0])
    mP.orthogonal(m_layer, orthogonal_map=orthogonal_map)
    tP.orthogonal(t_layer, orthogonal_map=orthogonal_map)
    assert list(m_layer.state_dict()) == list(t_layer.state_dict())
    _load_from_torch(m_layer, t_layer)  # a non-square base is completed with random columns
    w = m_layer.weight.detach().numpy().astype(np.float64)
    gram = w @ w.T if shape[0] < shape[1] else w.T @ w
    np.testing.assert_allclose(gram, np.eye(min(shape)), atol=1e-5)
    _compare_forward_backward(m_layer, t_layer, randn(2, shape[1], seed=5), rtol=1e-4, atol=1e-5)


def test_orthogonal_square_base_matches_without_loading():
    m_layer, t_layer = _pair("Linear", 4, 4)
    mP.orthogonal(m_layer)
    tP.orthogonal(t_layer)
    assert_close(m_layer.weight, t_layer.weight, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="use_trivialization=False"):
        mP.orthogonal(nn.Linear(3, 3), use_trivialization=False)
    with pytest.raises(ValueError, match="Expected a matrix"):
        mP.orthogonal(nn.Linear(3, 3), "bias")
