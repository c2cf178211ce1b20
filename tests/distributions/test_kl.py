"""kl_divergence against torch.distributions.kl_divergence for every registered pair, and register_kl dispatch."""

import numpy as np
import pytest
import torch
import torch.distributions as TD

import munet
import munet.distributions as D
from tests.distributions.cases import CASES, build

PAIRS = [
    ("Bernoulli", "Bernoulli"),
    ("Beta", "Beta"),
    ("Binomial", "Binomial"),
    ("Categorical", "Categorical"),
    ("OneHotCategorical", "OneHotCategorical"),
    ("Dirichlet", "Dirichlet"),
    ("Exponential", "Exponential"),
    ("Gamma", "Gamma"),
    ("Laplace", "Laplace"),
    ("Normal", "Normal"),
    ("Poisson", "Poisson"),
    ("Cauchy", "Cauchy"),
    ("LogNormal", "LogNormal"),
    ("MultivariateNormal", "MultivariateNormal"),
    ("MultivariateNormalCov", "MultivariateNormalPrec"),
    ("LowRankMultivariateNormal", "LowRankMultivariateNormal"),
    ("Normal", "Laplace"),
    ("Exponential", "Gamma"),
    ("Exponential", "Normal"),
    ("Gamma", "Exponential"),
    ("Gamma", "Normal"),
    ("Laplace", "Normal"),
    ("Uniform", "Normal"),
    ("Beta", "Exponential"),
    ("Beta", "Normal"),
    ("ContinuousBernoulli", "ContinuousBernoulli"),
    ("ContinuousBernoulliLogits", "ContinuousBernoulli"),
    ("Geometric", "Geometric"),
    ("HalfNormal", "HalfNormal"),
    ("Gumbel", "Gumbel"),
    ("Pareto", "Pareto"),
    ("Chi2", "Chi2"),
    ("Wishart", "Wishart"),
    ("Exponential", "Gumbel"),
    ("Gamma", "Gumbel"),
    ("Gumbel", "Normal"),
    ("Normal", "Gumbel"),
    ("Uniform", "Gumbel"),
    ("Gumbel", "Exponential"),
    ("Pareto", "Exponential"),
    ("Pareto", "Gamma"),
    ("Pareto", "Uniform"),
]


def _pair(lib, module, dtype, p_case, q_case, batch, requires_grad=False):
    rng = np.random.default_rng(3)
    p_params = CASES[p_case][0](rng, batch)
    q_params = CASES[q_case][0](rng, batch)
    p, p_leaves = build(module, lib, p_case, p_params, dtype, requires_grad)
    q, q_leaves = build(module, lib, q_case, q_params, dtype, requires_grad)
    return p, q, list(p_leaves.values()) + list(q_leaves.values())


@pytest.mark.parametrize("batch", [(), (2, 3)], ids=str)
@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
def test_kl_matches_torch_float64_with_gradients(pair, batch):
    tp, tq, tleaves = _pair(torch, TD, torch.float64, *pair, batch, requires_grad=True)
    mp, mq, mleaves = _pair(munet, D, munet.float64, *pair, batch, requires_grad=True)
    expected = TD.kl_divergence(tp, tq)
    got = D.kl_divergence(mp, mq)
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-7, atol=1e-7)
    if not batch:
        return
    if not expected.requires_grad:  # an infinite divergence is a constant in both libraries
        assert not got.requires_grad and np.all(np.isinf(got.numpy()))
        return
    grads_t = torch.autograd.grad(expected.sum(), tleaves, allow_unused=True)
    grads_m = munet.autograd.grad(got.sum(), mleaves, allow_unused=True)
    for gt, gm in zip(grads_t, grads_m):
        if gt is not None:
            gt, gm = gt.numpy(), gm.numpy()
            if "Wishart" in pair and gt.ndim == 4:  # scale_tril: the densities read its lower triangle only
                gt, gm = np.tril(gt), np.tril(gm)
            np.testing.assert_allclose(gm, gt, rtol=1e-6, atol=1e-7)


def test_kl_uniform_pairs_and_infinite_support_mismatch():
    p = D.Uniform(munet.tensor([0.0, 0.0]), munet.tensor([1.0, 1.0]))
    q = D.Uniform(munet.tensor([-1.0, 0.5]), munet.tensor([2.0, 3.0]))
    tp = TD.Uniform(torch.tensor([0.0, 0.0]), torch.tensor([1.0, 1.0]))
    tq = TD.Uniform(torch.tensor([-1.0, 0.5]), torch.tensor([2.0, 3.0]))
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), TD.kl_divergence(tp, tq).numpy())
    rate = munet.tensor([1.5, 2.0])
    np.testing.assert_allclose(
        D.kl_divergence(p, D.Exponential(rate)).numpy(),
        TD.kl_divergence(tp, TD.Exponential(torch.tensor([1.5, 2.0]))).numpy(),
        rtol=1e-6,
    )


def test_kl_independent_and_transformed():
    loc, scale = munet.randn(2, 3), munet.rand(2, 3) + 0.5
    p = D.Independent(D.Normal(loc, scale), 1)
    q = D.Independent(D.Normal(loc * 0, scale * 0 + 1), 1)
    tp = TD.Independent(TD.Normal(torch.tensor(loc.numpy()), torch.tensor(scale.numpy())), 1)
    tq = TD.Independent(TD.Normal(torch.zeros(2, 3), torch.ones(2, 3)), 1)
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), TD.kl_divergence(tp, tq).numpy(), rtol=1e-5)


def test_register_kl_dispatch_and_missing_pair():
    class MyNormal(D.Normal):
        pass

    p, q = MyNormal(munet.tensor(0.0), munet.tensor(1.0)), D.Normal(munet.tensor(1.0), munet.tensor(2.0))
    inherited = D.kl_divergence(p, q)
    np.testing.assert_allclose(
        inherited.numpy(), TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Normal(1.0, 2.0)).numpy(), rtol=1e-6
    )

    @D.register_kl(MyNormal, D.Normal)
    def _my_kl(p, q):
        return munet.tensor(42.0)

    assert float(D.kl_divergence(p, q)) == 42.0
    with pytest.raises(NotImplementedError, match="Poisson"):
        D.kl_divergence(D.Poisson(munet.tensor(1.0)), D.Normal(munet.tensor(0.0), munet.tensor(1.0)))
    with pytest.raises(TypeError):
        D.register_kl(int, D.Normal)
