"""Transforms (forward, inverse, log-det-Jacobian) and the composite distributions against torch."""

import numpy as np
import pytest
import torch
import torch.distributions as TD
import torch.distributions.transforms as TT

import munet
import munet.distributions as D
import munet.distributions.transforms as MT


def _pair(name):
    loc, scale = np.array([0.5, -1.0, 2.0]), np.array([2.0, -0.5, 1.5])
    return {
        "ExpTransform": (MT.ExpTransform(), TT.ExpTransform(), "real"),
        "AffineTransform": (
            MT.AffineTransform(munet.tensor(loc), munet.tensor(scale)),
            TT.AffineTransform(torch.tensor(loc), torch.tensor(scale)),
            "real",
        ),
        "AffineScalar": (MT.AffineTransform(1.0, -3.0), TT.AffineTransform(1.0, -3.0), "real"),
        "SigmoidTransform": (MT.SigmoidTransform(), TT.SigmoidTransform(), "real"),
        "TanhTransform": (MT.TanhTransform(), TT.TanhTransform(), "real"),
        "PowerTransform": (
            MT.PowerTransform(munet.tensor(2.5, dtype=munet.float64)),
            TT.PowerTransform(torch.tensor(2.5, dtype=torch.float64)),
            "positive",
        ),
        "StickBreakingTransform": (MT.StickBreakingTransform(), TT.StickBreakingTransform(), "real"),
        "SoftmaxTransform": (MT.SoftmaxTransform(), TT.SoftmaxTransform(), "real"),
        "ComposeTransform": (
            MT.ComposeTransform(
                [
                    MT.AffineTransform(0.5, 2.0),
                    MT.ExpTransform(),
                    MT.PowerTransform(munet.tensor(0.5, dtype=munet.float64)),
                ]
            ),
            TT.ComposeTransform(
                [
                    TT.AffineTransform(0.5, 2.0),
                    TT.ExpTransform(),
                    TT.PowerTransform(torch.tensor(0.5, dtype=torch.float64)),
                ]
            ),
            "real",
        ),
    }[name]


NAMES = [
    "ExpTransform",
    "AffineTransform",
    "AffineScalar",
    "SigmoidTransform",
    "TanhTransform",
    "PowerTransform",
    "StickBreakingTransform",
    "SoftmaxTransform",
    "ComposeTransform",
]


@pytest.mark.parametrize("name", NAMES)
def test_transform_matches_torch(name):
    mine, theirs, domain = _pair(name)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 3))
    if domain == "positive":
        x = np.abs(x) + 0.1
    xm, xt = munet.tensor(x), torch.tensor(x)
    ym, yt = mine(xm), theirs(xt)
    np.testing.assert_allclose(ym.numpy(), yt.numpy(), rtol=1e-7, atol=1e-12)
    assert tuple(mine.forward_shape((4, 3))) == tuple(theirs.forward_shape((4, 3)))
    np.testing.assert_allclose(mine.inv(ym).numpy(), theirs.inv(yt).numpy(), rtol=1e-6, atol=1e-9)
    if name == "SoftmaxTransform":
        return  # not bijective: no log-det-Jacobian in either library
    np.testing.assert_allclose(
        mine.log_abs_det_jacobian(xm, ym).numpy(), theirs.log_abs_det_jacobian(xt, yt).numpy(), rtol=1e-7, atol=1e-9
    )
    assert mine.inv.inv is mine and mine.bijective == theirs.bijective


def test_transformed_distribution_log_prob_sample_and_cdf():
    loc, scale = munet.tensor([0.0, 1.0], dtype=munet.float64), munet.tensor([1.0, 0.5], dtype=munet.float64)
    tloc, tscale = torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([1.0, 0.5], dtype=torch.float64)
    mine = D.TransformedDistribution(D.Normal(loc, scale), [MT.AffineTransform(1.0, -2.0), MT.SigmoidTransform()])
    theirs = TD.TransformedDistribution(TD.Normal(tloc, tscale), [TT.AffineTransform(1.0, -2.0), TT.SigmoidTransform()])
    value = theirs.sample((5,))
    np.testing.assert_allclose(
        mine.log_prob(munet.tensor(value.numpy())).numpy(), theirs.log_prob(value).numpy(), rtol=1e-7
    )
    np.testing.assert_allclose(mine.cdf(munet.tensor(value.numpy())).numpy(), theirs.cdf(value).numpy(), rtol=1e-7)
    assert tuple(mine.sample((3,)).shape) == (3, 2) and tuple(mine.expand((4, 2)).batch_shape) == (4, 2)


def test_stick_breaking_turns_normal_into_simplex_distribution():
    base = D.Independent(D.Normal(munet.zeros(3, dtype=munet.float64), munet.ones(3, dtype=munet.float64)), 1)
    tbase = TD.Independent(TD.Normal(torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)), 1)
    mine = D.TransformedDistribution(base, MT.StickBreakingTransform())
    theirs = TD.TransformedDistribution(tbase, TT.StickBreakingTransform())
    assert tuple(mine.event_shape) == tuple(theirs.event_shape) == (4,)
    value = theirs.sample((6,))
    np.testing.assert_allclose(
        mine.log_prob(munet.tensor(value.numpy())).numpy(), theirs.log_prob(value).numpy(), rtol=1e-7
    )


def test_independent_matches_torch():
    loc, scale = np.random.default_rng(0).normal(size=(2, 3, 4)), np.full((2, 3, 4), 0.7)
    mine = D.Independent(D.Normal(munet.tensor(loc), munet.tensor(scale)), 2)
    theirs = TD.Independent(TD.Normal(torch.tensor(loc), torch.tensor(scale)), 2)
    assert (tuple(mine.batch_shape), tuple(mine.event_shape)) == (tuple(theirs.batch_shape), tuple(theirs.event_shape))
    value = theirs.sample((5,))
    np.testing.assert_allclose(
        mine.log_prob(munet.tensor(value.numpy())).numpy(), theirs.log_prob(value).numpy(), rtol=1e-7
    )
    np.testing.assert_allclose(mine.entropy().numpy(), theirs.entropy().numpy(), rtol=1e-7)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(munet.zeros(3), munet.ones(3)), 2)


@pytest.mark.parametrize("event", [False, True])
def test_mixture_same_family_matches_torch(event):
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 3))
    loc, scale = rng.normal(size=(2, 3, 4)), rng.uniform(0.5, 2, size=(2, 3, 4))
    if event:
        mine_comp = D.Independent(D.Normal(munet.tensor(loc), munet.tensor(scale)), 1)
        their_comp = TD.Independent(TD.Normal(torch.tensor(loc), torch.tensor(scale)), 1)
    else:
        mine_comp = D.Normal(munet.tensor(loc[..., 0]), munet.tensor(scale[..., 0]))
        their_comp = TD.Normal(torch.tensor(loc[..., 0]), torch.tensor(scale[..., 0]))
    mine = D.MixtureSameFamily(D.Categorical(logits=munet.tensor(logits)), mine_comp)
    theirs = TD.MixtureSameFamily(TD.Categorical(logits=torch.tensor(logits)), their_comp)
    value = theirs.sample((5,))
    np.testing.assert_allclose(
        mine.log_prob(munet.tensor(value.numpy())).numpy(), theirs.log_prob(value).numpy(), rtol=1e-7
    )
    np.testing.assert_allclose(mine.mean.numpy(), theirs.mean.numpy(), rtol=1e-7)
    np.testing.assert_allclose(mine.variance.numpy(), theirs.variance.numpy(), rtol=1e-7)
    if not event:
        np.testing.assert_allclose(mine.cdf(munet.tensor(value.numpy())).numpy(), theirs.cdf(value).numpy(), rtol=1e-7)
    assert tuple(mine.sample((7,)).shape) == tuple(theirs.sample((7,)).shape)


def test_constraints_check_like_torch():
    import torch.distributions.constraints as TC

    import munet.distributions.constraints as C

    x = np.array([[0.2, 0.8], [0.5, 0.6], [-0.1, 1.1]])
    for name in ["simplex", "unit_interval", "positive", "real", "nonnegative", "boolean"]:
        np.testing.assert_array_equal(
            getattr(C, name).check(munet.tensor(x)).numpy(),
            getattr(TC, name).check(torch.tensor(x)).numpy(),
            err_msg=name,
        )
    spd = np.array([[2.0, 0.5], [0.5, 1.0]])
    assert bool(C.positive_definite.check(munet.tensor(spd))) and not bool(
        C.positive_definite.check(munet.tensor(-spd))
    )
    assert bool(C.lower_cholesky.check(munet.tensor(np.linalg.cholesky(spd))))
    assert C.is_dependent(C.dependent) and not C.is_dependent(C.real)
    with pytest.raises(ValueError, match="dependent"):
        C.dependent.check(munet.tensor(x))


def test_user_transform_subclass_and_caching():
    class Square(MT.Transform):
        domain = MT.constraints.positive
        codomain = MT.constraints.positive
        bijective = True

        def _call(self, x):
            return x * x

        def _inverse(self, y):
            return y.sqrt()

        def log_abs_det_jacobian(self, x, y):
            return (2 * x).log()

    base = D.Exponential(munet.tensor([1.0, 2.0], dtype=munet.float64))
    mine = D.TransformedDistribution(base, Square())
    theirs = TD.TransformedDistribution(
        TD.Exponential(torch.tensor([1.0, 2.0], dtype=torch.float64)), TT.PowerTransform(2.0)
    )
    value = theirs.sample((3,))
    np.testing.assert_allclose(
        mine.log_prob(munet.tensor(value.numpy())).numpy(), theirs.log_prob(value).numpy(), rtol=1e-7
    )
    cached = MT.ExpTransform().with_cache(1)
    x = munet.tensor([0.5])
    y = cached(x)
    assert cached.inv(y) is x
    with pytest.raises(NotImplementedError, match="_call"):
        MT.Transform()(x)
