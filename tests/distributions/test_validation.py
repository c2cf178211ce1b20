"""validate_args: ValueError on invalid parameters and out-of-support values, as PyTorch, and the switches."""

import pytest

import munet
import munet.distributions as D


@pytest.mark.parametrize(
    "make",
    [
        lambda: D.Normal(munet.tensor([0.0]), munet.tensor([-1.0])),
        lambda: D.Exponential(munet.tensor([0.0])),
        lambda: D.Gamma(munet.tensor([1.0]), munet.tensor([-2.0])),
        lambda: D.Bernoulli(probs=munet.tensor([1.5])),
        lambda: D.Categorical(probs=munet.tensor([[0.5, -0.5]])),
        lambda: D.Dirichlet(munet.tensor([1.0, 0.0])),
        lambda: D.Binomial(2.5, probs=munet.tensor([0.5])),
        lambda: D.Uniform(munet.tensor([1.0]), munet.tensor([0.0])),
        lambda: D.MultivariateNormal(munet.zeros(2), covariance_matrix=munet.tensor([[1.0, 2.0], [2.0, 1.0]])),
        lambda: D.MultivariateNormal(munet.zeros(2), scale_tril=munet.tensor([[1.0, 1.0], [0.0, 1.0]])),
        lambda: D.StudentT(munet.tensor([-1.0])),
    ],
)
def test_invalid_parameters_raise_value_error(make):
    with pytest.raises(ValueError, match="Expected|expected"):
        make()


@pytest.mark.parametrize(
    "dist, value",
    [
        (lambda: D.Exponential(munet.tensor([1.0])), munet.tensor([-1.0])),
        (lambda: D.Bernoulli(probs=munet.tensor([0.3])), munet.tensor([0.5])),
        (lambda: D.Categorical(probs=munet.tensor([0.5, 0.5])), munet.tensor(2)),
        (lambda: D.Poisson(munet.tensor([1.0])), munet.tensor([1.5])),
        (lambda: D.Beta(munet.tensor([1.0]), munet.tensor([1.0])), munet.tensor([1.5])),
        (lambda: D.Dirichlet(munet.tensor([1.0, 1.0])), munet.tensor([0.7, 0.7])),
        (lambda: D.Uniform(munet.tensor([0.0]), munet.tensor([1.0])), munet.tensor([2.0])),
    ],
)
def test_out_of_support_log_prob_raises_value_error(dist, value):
    with pytest.raises(ValueError, match="support"):
        dist().log_prob(value)


def test_shape_mismatch_raises():
    d = D.Normal(munet.zeros(3), munet.ones(3))
    with pytest.raises(ValueError, match="broadcastable"):
        d.log_prob(munet.zeros(4))
    with pytest.raises(ValueError, match="event_shape"):
        D.MultivariateNormal(munet.zeros(3), munet.eye(3)).log_prob(munet.zeros(2))


def test_exactly_one_of_probs_and_logits():
    with pytest.raises(ValueError, match="probs"):
        D.Bernoulli()
    with pytest.raises(ValueError, match="probs"):
        D.Categorical(probs=munet.tensor([0.5, 0.5]), logits=munet.tensor([0.0, 0.0]))


def test_validate_args_switches():
    bad = munet.tensor([-1.0])
    d = D.Normal(munet.tensor([0.0]), bad, validate_args=False)  # per instance
    assert d.scale is bad
    D.Distribution.set_default_validate_args(False)
    try:
        D.Normal(munet.tensor([0.0]), bad)
        D.Exponential(munet.tensor([1.0])).log_prob(munet.tensor([-1.0]))
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(munet.tensor([0.0]), bad)
    with pytest.raises(ValueError, match="bool"):
        D.Distribution.set_default_validate_args("yes")


def test_number_parameters_give_scalar_batch_and_default_dtype():
    for d in [D.Normal(0.0, 1.0), D.Gamma(2.0, 3.0), D.Bernoulli(0.3), D.StudentT(4.0), D.Exponential(1.0)]:
        assert tuple(d.batch_shape) == () and d.sample().dtype == munet.get_default_dtype()
        assert "(" in repr(d)


def test_parameters_broadcast_like_torch():
    import torch
    import torch.distributions as TD

    loc, scale = munet.tensor([0.0, 1.0, 2.0]), munet.tensor([[1.0], [2.0]])
    mine, theirs = D.Normal(loc, scale), TD.Normal(torch.tensor([0.0, 1.0, 2.0]), torch.tensor([[1.0], [2.0]]))
    assert tuple(mine.batch_shape) == tuple(theirs.batch_shape) == (2, 3)
    value = munet.tensor([0.5, 1.5, -1.0])
    assert munet.allclose(mine.log_prob(value), munet.tensor(theirs.log_prob(torch.tensor([0.5, 1.5, -1.0])).numpy()))
    mixed = D.Gamma(munet.tensor([1.0, 2.0]), 3.0)
    assert tuple(mixed.batch_shape) == (2,)
