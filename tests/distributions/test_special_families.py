"""Distributions the shared case table cannot cover: GeneralizedPareto (torch's float64 log_prob
needs float64 as the default dtype), VonMises and LKJCholesky sampling, the straight-through
estimator, and ExponentialFamily's generic entropy.

Sample statistics are checked within 5 standard errors of their exact values (fixed seed).
"""

import math

import numpy as np
import pytest
import torch
import torch.distributions as TD

import munet
import munet.distributions as D
from munet.distributions.exp_family import ExponentialFamily

N = 20000


@pytest.fixture
def torch_float64_default():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.mark.parametrize("concentration", [-0.3, 0.0, 0.25])
def test_generalized_pareto_matches_torch(concentration, torch_float64_default):
    rng = np.random.default_rng(0)
    loc, scale = rng.normal(size=(2, 3)), rng.uniform(0.5, 2.0, size=(2, 3))
    conc = np.full((2, 3), concentration)
    leaves_t = [torch.tensor(v, requires_grad=True) for v in (loc, scale, conc)]
    leaves_m = [munet.tensor(v, requires_grad=True) for v in (loc, scale, conc)]
    t, m = TD.GeneralizedPareto(*leaves_t), D.GeneralizedPareto(*leaves_m)
    torch.manual_seed(0)
    value = t.sample((4,))
    vm = munet.tensor(value.numpy())
    for attr in ("mean", "variance", "mode"):
        np.testing.assert_allclose(getattr(m, attr).detach().numpy(), getattr(t, attr).detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(m.cdf(vm).detach().numpy(), t.cdf(value).detach().numpy(), rtol=1e-9, atol=1e-12)
    q = torch.rand(4, 2, 3)
    np.testing.assert_allclose(
        m.icdf(munet.tensor(q.numpy())).detach().numpy(), t.icdf(q).detach().numpy(), rtol=1e-9, atol=1e-12
    )
    loss_t = t.log_prob(value).sum() + t.entropy().sum()
    loss_m = m.log_prob(vm).sum() + m.entropy().sum()
    np.testing.assert_allclose(loss_m.item(), loss_t.item(), rtol=1e-10)
    for gm, gt in zip(munet.autograd.grad(loss_m, leaves_m[:2]), torch.autograd.grad(loss_t, leaves_t[:2])):
        np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-8, atol=1e-10)


def test_generalized_pareto_sample_moments():
    munet.manual_seed(0)
    d = D.GeneralizedPareto(munet.tensor([0.0, 1.0]), munet.tensor([1.0, 2.0]), munet.tensor([0.1, -0.2]))
    draws = d.sample((N,)).numpy().astype(np.float64)
    mean, var = d.mean.numpy(), d.variance.numpy()
    assert np.all(np.abs(draws.mean(0) - mean) <= 5 * np.sqrt(var / N))
    assert np.all(draws[:, 1] <= 1.0 + 2.0 / 0.2 + 1e-5)  # the support's upper bound for negative concentration


def _bessel_ratio(kappa):
    return torch.special.i1(torch.tensor(kappa)).numpy() / torch.special.i0(torch.tensor(kappa)).numpy()


def test_von_mises_sample_circular_moments():
    munet.manual_seed(0)
    loc, kappa = np.array([0.5, -2.0, 3.0]), np.array([0.3, 2.0, 8.0])
    d = D.VonMises(munet.tensor(loc), munet.tensor(kappa))
    draws = d.sample((N,)).numpy()
    assert draws.dtype == np.float64 and np.all((draws >= -math.pi) & (draws < math.pi))
    c, s = np.cos(draws - loc), np.sin(draws - loc)
    # E[cos(x - loc)] = I1(k) / I0(k), E[sin(x - loc)] = 0
    assert np.all(np.abs(c.mean(0) - _bessel_ratio(kappa)) <= 5 * c.std(0) / np.sqrt(N))
    assert np.all(np.abs(s.mean(0)) <= 5 * s.std(0) / np.sqrt(N))


def test_von_mises_float32_sample_dtype_and_expand():
    d = D.VonMises(munet.tensor([0.0, 1.0]), munet.tensor([1.0, 4.0])).expand((3, 2))
    x = d.sample((5,))
    assert x.dtype == munet.float32 and tuple(x.shape) == (5, 3, 2)


@pytest.mark.parametrize("dim", [2, 4])
def test_lkj_cholesky_samples(dim):
    munet.manual_seed(1)
    eta = np.array([0.7, 2.0])
    d = D.LKJCholesky(dim, munet.tensor(eta))
    draws = d.sample((N,))
    assert tuple(draws.shape) == (N, 2, dim, dim)
    assert bool(D.constraints.corr_cholesky.check(draws).all())
    corr = (draws @ draws.mT).numpy()
    off = corr[..., 1, 0]
    # each off-diagonal correlation is 2 Beta(b, b) - 1 with b = eta - 1 + dim / 2: mean 0, variance 1 / (2 b + 1)
    b = eta - 1 + dim / 2
    var = 1 / (2 * b + 1)
    assert np.all(np.abs(off.mean(0)) <= 5 * np.sqrt(var / N))
    m4 = ((off - off.mean(0)) ** 4).mean(0)
    assert np.all(np.abs(off.var(0) - var) <= 5 * np.sqrt((m4 - var**2) / N))
    t = TD.LKJCholesky(dim, torch.tensor(eta))
    sample = draws[:3]
    np.testing.assert_allclose(d.log_prob(sample).numpy(), t.log_prob(torch.tensor(sample.numpy())).numpy(), rtol=1e-9)


def test_lkj_cholesky_rejects_dim_below_two():
    with pytest.raises(ValueError, match="dim"):
        D.LKJCholesky(1, 1.0)


def test_one_hot_straight_through_gradient():
    probs = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
    pm = munet.tensor(probs, requires_grad=True)
    pt = torch.tensor(probs, requires_grad=True)
    munet.manual_seed(0)
    x = D.OneHotCategoricalStraightThrough(probs=pm).rsample((4,))
    assert np.all(x.detach().numpy().sum(-1) == 1.0)
    weights = np.random.default_rng(0).normal(size=(4, 2, 3))
    (gm,) = munet.autograd.grad((x * munet.tensor(weights)).sum(), [pm])
    xt = torch.tensor(x.detach().numpy()) + TD.OneHotCategoricalStraightThrough(probs=pt).probs
    xt = xt - xt.detach() + torch.tensor(x.detach().numpy())
    (gt,) = torch.autograd.grad((xt * torch.tensor(weights)).sum(), [pt])
    np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-12)


def test_exponential_family_entropy_matches_closed_forms():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(2, 3, 3))
    tril = np.linalg.cholesky(a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3))
    w = D.Wishart(munet.tensor([4.5, 6.0]), scale_tril=munet.tensor(tril))
    # the generic form differentiates the lgamma composite, whose derivative is within 1e-7 of digamma
    np.testing.assert_allclose(ExponentialFamily.entropy(w).detach().numpy(), w.entropy().numpy(), rtol=1e-7)
    cb = D.ContinuousBernoulli(probs=munet.tensor([0.2, 0.45, 0.8], dtype=munet.float64))
    np.testing.assert_allclose(ExponentialFamily.entropy(cb).detach().numpy(), cb.entropy().numpy(), rtol=1e-6)
    tb = TD.ContinuousBernoulli(probs=torch.tensor([0.2, 0.45, 0.8], dtype=torch.float64))
    np.testing.assert_allclose(
        ExponentialFamily.entropy(cb).detach().numpy(), TD.ExponentialFamily.entropy(tb).detach().numpy(), rtol=1e-9
    )
