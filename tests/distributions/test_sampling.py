"""Samplers: moments of draws with a fixed seed within bounds set by the sample size, and rsample gradients.

A sample mean of N draws is within 5 standard errors (sqrt(var / N)) of the true mean, and a sample
variance within 5 of its standard errors (sqrt((m4 - var^2) / N), with the sample's fourth central
moment); with a fixed seed these are deterministic checks that a wrong sampler fails.
"""

import numpy as np
import pytest
import torch
import torch.distributions as TD

import munet
import munet.distributions as D
from tests.distributions.cases import CASES, build

N = 20000
SAMPLED = [
    "Normal",
    "LogNormal",
    "Uniform",
    "Exponential",
    "Laplace",
    "Gamma",
    "Beta",
    "Dirichlet",
    "StudentT",
    "Bernoulli",
    "Categorical",
    "OneHotCategorical",
    "Multinomial",
    "Binomial",
    "Poisson",
    "MultivariateNormal",
    "LowRankMultivariateNormal",
    "Chi2",
    "ContinuousBernoulli",
    "FisherSnedecor",
    "Geometric",
    "Gumbel",
    "HalfNormal",
    "InverseGamma",
    "Kumaraswamy",
    "NegativeBinomial",
    "OneHotCategoricalStraightThrough",
    "Pareto",
    "Weibull",
    "Wishart",
]


def _check_moments(draws, mean, var):
    draws = draws.astype(np.float64)
    n = draws.shape[0]
    centered = draws - draws.mean(0)
    m4 = (centered**4).mean(0)
    assert np.all(np.abs(draws.mean(0) - mean) <= 5 * np.sqrt(var / n)), (draws.mean(0), mean)
    assert np.all(np.abs(draws.var(0) - var) <= 5 * np.sqrt(np.maximum(m4 - var**2, 0) / n) + 1e-12), (
        draws.var(0),
        var,
    )


@pytest.mark.parametrize("case", SAMPLED)
def test_sample_moments(case):
    params = CASES[case][0](np.random.default_rng(5), (3,))
    if case == "StudentT":
        params["df"] = params["df"] + 3.0  # the variance bound needs a finite fourth moment: df > 4
    munet.manual_seed(0)
    m, _ = build(D, munet, case, params, munet.float64)
    t, _ = build(TD, torch, case, params, torch.float64)
    draws = m.sample((N,)).numpy()
    if case == "Categorical":
        probs = t.probs.numpy()
        draws = np.eye(probs.shape[-1])[draws]  # one-hot: per-category frequencies
        mean, var = probs, probs * (1 - probs)
    else:
        mean, var = t.mean.numpy(), t.variance.numpy()
    _check_moments(draws, mean, var)


def test_sample_is_reproducible_with_manual_seed():
    d = D.Gamma(munet.tensor([0.4, 3.0]), munet.tensor([1.0, 2.0]))
    munet.manual_seed(7)
    a = d.sample((5,))
    munet.manual_seed(7)
    b = d.sample((5,))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_sample_has_no_grad_and_rsample_has():
    loc = munet.zeros(3, requires_grad=True)
    d = D.Normal(loc, munet.ones(3))
    assert not d.sample().requires_grad
    assert d.rsample().requires_grad
    with pytest.raises(NotImplementedError, match="rsample"):
        D.Bernoulli(munet.tensor(0.3)).rsample()


def _loss(x):
    return (x.sin() * x).sum()


LOCATION_SCALE = {
    # case: how torch rebuilds the same draw from munet's noise (the reparameterization is PyTorch's)
    "Normal": lambda p, eps: p["loc"] + eps * p["scale"],
    "Laplace": lambda p, eps: p["loc"] + eps * p["scale"],
    "Cauchy": lambda p, eps: p["loc"] + eps * p["scale"],
    "LogNormal": lambda p, eps: (p["loc"] + eps * p["scale"]).exp(),
    "Uniform": lambda p, eps: p["low"] + eps * (p["high"] - p["low"]),
    "Exponential": lambda p, eps: eps / p["rate"],
}


def _noise(case, x, p):
    if case == "LogNormal":
        return (np.log(x) - p["loc"]) / p["scale"]
    if case == "Uniform":
        return (x - p["low"]) / (p["high"] - p["low"])
    if case == "Exponential":
        return x * p["rate"]
    return (x - p["loc"]) / p["scale"]


@pytest.mark.parametrize("case", list(LOCATION_SCALE))
def test_rsample_gradient_matches_torch_for_the_same_noise(case):
    params = CASES[case][0](np.random.default_rng(1), (2, 3))
    m, mleaves = build(D, munet, case, params, munet.float64, requires_grad=True)
    x = m.rsample((4,))
    grads_m = munet.autograd.grad(_loss(x), list(mleaves.values()))
    eps = torch.tensor(_noise(case, x.detach().numpy(), params))
    tleaves = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    grads_t = torch.autograd.grad(_loss(LOCATION_SCALE[case](tleaves, eps)), list(tleaves.values()))
    for gm, gt in zip(grads_m, grads_t):
        np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-7, atol=1e-9)


def test_multivariate_normal_rsample_gradient_matches_torch_for_the_same_noise():
    params = CASES["MultivariateNormal"][0](np.random.default_rng(2), (2,))
    m, mleaves = build(D, munet, "MultivariateNormal", params, munet.float64, requires_grad=True)
    x = m.rsample((4,))
    grads_m = munet.autograd.grad(_loss(x), list(mleaves.values()))
    eps = np.linalg.solve(params["scale_tril"], (x.detach().numpy() - params["loc"])[..., None])[..., 0]
    loc, tril = (torch.tensor(params[k], requires_grad=True) for k in ("loc", "scale_tril"))
    y = loc + (tril @ torch.tensor(eps).unsqueeze(-1)).squeeze(-1)
    grads_t = torch.autograd.grad(_loss(y), [loc, tril])
    for gm, gt in zip(grads_m, grads_t):
        np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-7, atol=1e-9)


def test_gamma_rsample_gradient_is_pytorchs_implicit_reparameterization():
    alpha = munet.tensor([0.05, 0.3, 1.0, 2.5, 10.0, 80.0], dtype=munet.float64, requires_grad=True)
    x = D.Gamma(alpha, munet.ones(6, dtype=munet.float64)).rsample((50,))
    (grad,) = munet.autograd.grad(x.sum(), [alpha])
    xs = torch.tensor(x.detach().numpy())
    expected = torch._standard_gamma_grad(torch.tensor(alpha.detach().numpy()).expand(50, 6), xs).sum(0)
    # torch evaluates dx/dalpha with a rational approximation of about 1e-3 relative accuracy;
    # the series here is exact to float64 rounding, so the bound is torch's approximation error
    np.testing.assert_allclose(grad.numpy(), expected.numpy(), rtol=2e-3)


@pytest.mark.parametrize(
    "make, derivative",
    [
        # d/dc E[x] for Gamma(c, rate=2): 1 / rate
        (lambda c: D.Gamma(c, munet.tensor(2.0, dtype=munet.float64)), lambda c: np.full_like(c, 0.5)),
        # d/dc1 E[x] for Beta(c1, c0=2): c0 / (c1 + c0)^2
        (lambda c: D.Beta(c, munet.tensor(2.0, dtype=munet.float64)), lambda c: 2.0 / (c + 2.0) ** 2),
    ],
    ids=["Gamma", "Beta"],
)
def test_rsample_expectation_gradients(make, derivative):
    """The mean of per-draw gradients dx/dc is within 5 standard errors of d/dc E[x]."""
    munet.manual_seed(3)
    values = np.array([0.6, 1.5, 4.0])
    c = munet.tensor(np.tile(values, (N, 1)), requires_grad=True)  # one leaf per draw: per-draw gradients
    (per_draw,) = munet.autograd.grad(make(c).rsample().sum(), [c])
    per_draw = per_draw.numpy()
    error = np.abs(per_draw.mean(0) - derivative(values))
    assert np.all(error <= 5 * per_draw.std(0) / np.sqrt(N)), (per_draw.mean(0), derivative(values))


def test_dirichlet_rsample_expectation_gradient():
    """Per-draw gradients of the first coordinate average to d/dc_j E[x_0] = (delta_0j S - c_0) / S^2."""
    munet.manual_seed(4)
    values = np.array([0.7, 1.5, 3.0])
    c = munet.tensor(np.tile(values, (N, 1)), requires_grad=True)
    (per_draw,) = munet.autograd.grad(D.Dirichlet(c).rsample()[..., 0].sum(), [c])
    per_draw = per_draw.numpy()
    total = values.sum()
    expected = (np.eye(3)[0] * total - values[0]) / total**2
    assert np.all(np.abs(per_draw.mean(0) - expected) <= 5 * per_draw.std(0) / np.sqrt(N)), (per_draw.mean(0), expected)


# TransformedDistribution families whose parameters live in the transforms (and Pareto's rate): the
# base draw is recovered by the inverse transforms, and PyTorch's own transforms of it give the
# reference gradient
TRANSFORMED = ["Gumbel", "Kumaraswamy", "Pareto", "Weibull"]


@pytest.mark.parametrize("case", TRANSFORMED)
def test_transformed_rsample_gradient_matches_torch_for_the_same_base_draw(case):
    params = CASES[case][0](np.random.default_rng(2), (2, 3))
    m, mleaves = build(D, munet, case, params, munet.float64, requires_grad=True)
    t, tleaves = build(TD, torch, case, params, torch.float64, requires_grad=True)
    x = m.rsample((4,))
    grads_m = munet.autograd.grad(_loss(x), list(mleaves.values()))
    base = torch.tensor(x.detach().numpy())
    with torch.no_grad():
        for transform in reversed(t.transforms):
            base = transform.inv(base)
    if case == "Pareto":  # the base Exponential(alpha) carries alpha: rebuild it from the unit-rate noise
        base = base * params["alpha"] / tleaves["alpha"]
    y = base
    for transform in t.transforms:
        y = transform(y)
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy(), rtol=1e-9, atol=1e-12)
    grads_t = torch.autograd.grad(_loss(y), list(tleaves.values()))
    for gm, gt in zip(grads_m, grads_t):
        np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("case", ["ContinuousBernoulli", "GeneralizedPareto"])
def test_inverse_cdf_rsample_gradient_matches_torch_for_the_same_uniform(case):
    rng = np.random.default_rng(3)
    if case == "ContinuousBernoulli":
        params = {"probs": rng.uniform(0.1, 0.9, size=(2, 3))}
    else:
        params = {"loc": rng.normal(size=(2, 3)), "scale": rng.uniform(0.5, 2, size=(2, 3)),
                  "concentration": rng.uniform(-0.3, 0.3, size=(2, 3))}  # fmt: skip
    mleaves = {k: munet.tensor(v, requires_grad=True) for k, v in params.items()}
    tleaves = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    m, t = getattr(D, case)(**mleaves), getattr(TD, case)(**tleaves)
    munet.manual_seed(0)
    x = m.rsample((4,))
    grads_m = munet.autograd.grad(_loss(x), list(mleaves.values()))
    u = torch.tensor(m.cdf(x.detach()).detach().numpy())
    y = t.icdf(u)
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy(), rtol=1e-7, atol=1e-9)
    grads_t = torch.autograd.grad(_loss(y), list(tleaves.values()))
    for gm, gt in zip(grads_m, grads_t):
        np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("case", ["HalfNormal", "HalfCauchy"])
def test_half_rsample_gradient_matches_torch_for_the_same_noise(case):
    params = CASES[case][0](np.random.default_rng(4), (2, 3))
    m, mleaves = build(D, munet, case, params, munet.float64, requires_grad=True)
    x = m.rsample((4,))
    (gm,) = munet.autograd.grad(_loss(x), [mleaves["scale"]])
    scale = torch.tensor(params["scale"], requires_grad=True)
    noise = torch.tensor(x.detach().numpy() / params["scale"])  # |eps|: the sign is lost by the abs anyway
    (gt,) = torch.autograd.grad(_loss((scale * noise).abs()), [scale])
    np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-9, atol=1e-12)


def test_logistic_normal_rsample_gradient_matches_torch_for_the_same_noise():
    params = CASES["LogisticNormal"][0](np.random.default_rng(5), (2,))
    m, mleaves = build(D, munet, "LogisticNormal", params, munet.float64, requires_grad=True)
    t, _ = build(TD, torch, "LogisticNormal", params, torch.float64)
    x = m.rsample((4,))
    grads_m = munet.autograd.grad(_loss(x), list(mleaves.values()))
    with torch.no_grad():
        base = t.transforms[0].inv(torch.tensor(x.detach().numpy()))
    noise = (base - torch.tensor(params["loc"])) / torch.tensor(params["scale"])
    loc, scale = (torch.tensor(params[k], requires_grad=True) for k in ("loc", "scale"))
    y = t.transforms[0](loc + scale * noise)
    grads_t = torch.autograd.grad(_loss(y), [loc, scale])
    for gm, gt in zip(grads_m, grads_t):
        np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-7, atol=1e-10)
