"""The matrix and structural transforms, Abs/Softplus/CDF transforms and biject_to/transform_to against torch.

Each transform is compared on random float64 inputs: forward, inverse, log-det-Jacobian and the
gradient of ``sum(y) + sum(log_abs_det_jacobian)`` with respect to ``x``.
"""

import numpy as np
import pytest
import torch
import torch.distributions as TD
import torch.distributions.transforms as TT
from torch.distributions import constraint_registry as TR
from torch.distributions import constraints as TC

import munet
import munet.distributions as D
import munet.distributions.transforms as MT
from munet.distributions import constraints as MC


def _pairs():
    scale = np.array([1.5, 0.5, 2.0])
    return {
        "Abs": (MT.AbsTransform(), TT.AbsTransform(), (4, 3)),
        "Softplus": (MT.SoftplusTransform(), TT.SoftplusTransform(), (4, 3)),
        "LowerCholesky": (MT.LowerCholeskyTransform(), TT.LowerCholeskyTransform(), (2, 3, 3)),
        "PositiveDefinite": (MT.PositiveDefiniteTransform(), TT.PositiveDefiniteTransform(), (2, 3, 3)),
        "CorrCholesky": (MT.CorrCholeskyTransform(), TT.CorrCholeskyTransform(), (2, 6)),
        "Independent": (
            MT.IndependentTransform(MT.AffineTransform(0.5, munet.tensor(scale)), 1),
            TT.IndependentTransform(TT.AffineTransform(0.5, torch.tensor(scale)), 1),
            (4, 3),
        ),
        "Reshape": (MT.ReshapeTransform((2, 3), (3, 2)), TT.ReshapeTransform((2, 3), (3, 2)), (4, 2, 3)),
        "Cat": (
            MT.CatTransform([MT.ExpTransform(), MT.SoftplusTransform()], dim=1, lengths=[2, 3]),
            TT.CatTransform([TT.ExpTransform(), TT.SoftplusTransform()], dim=1, lengths=[2, 3]),
            (4, 5),
        ),
        "Stack": (
            MT.StackTransform([MT.ExpTransform(), MT.SigmoidTransform(), MT.AffineTransform(1.0, 2.0)], dim=1),
            TT.StackTransform([TT.ExpTransform(), TT.SigmoidTransform(), TT.AffineTransform(1.0, 2.0)], dim=1),
            (4, 3),
        ),
        "CumulativeDistribution": (
            MT.CumulativeDistributionTransform(D.Normal(munet.tensor(0.3, dtype=munet.float64), 2.0)),
            TT.CumulativeDistributionTransform(TD.Normal(torch.tensor(0.3, dtype=torch.float64), 2.0)),
            (4, 3),
        ),
    }


@pytest.mark.parametrize("name", list(_pairs()))
def test_transform_matches_torch(name):
    mine, theirs, shape = _pairs()[name]
    x = np.random.default_rng(0).normal(size=shape)
    xt = torch.tensor(x, requires_grad=True)
    xm = munet.tensor(x, requires_grad=True)
    yt, ym = theirs(xt), mine(xm)
    np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mine.inv(ym).detach().numpy(), theirs.inv(yt).detach().numpy(), rtol=1e-7, atol=1e-9)
    assert tuple(mine.forward_shape(shape)) == tuple(theirs.forward_shape(shape))
    assert mine.domain.event_dim == theirs.domain.event_dim
    assert mine.codomain.event_dim == theirs.codomain.event_dim
    assert mine.bijective == theirs.bijective
    if not theirs.bijective and name != "Abs":
        return
    if name in ("Abs", "LowerCholesky", "PositiveDefinite"):  # no log-det-Jacobian in either library
        with pytest.raises(NotImplementedError):
            mine.log_abs_det_jacobian(xm, ym)
        loss_t, loss_m = yt.sum(), ym.sum()
    else:
        lt, lm = theirs.log_abs_det_jacobian(xt, yt), mine.log_abs_det_jacobian(xm, ym)
        np.testing.assert_allclose(lm.detach().numpy(), lt.detach().numpy(), rtol=1e-9, atol=1e-12)
        loss_t, loss_m = yt.sum() + lt.sum(), ym.sum() + lm.sum()
    (gt,) = torch.autograd.grad(loss_t, [xt])
    (gm,) = munet.autograd.grad(loss_m, [xm])
    np.testing.assert_allclose(gm.numpy(), gt.numpy(), rtol=1e-8, atol=1e-10)


def test_corr_cholesky_output_is_a_correlation_cholesky_factor():
    x = munet.tensor(np.random.default_rng(1).normal(size=(5, 10)))
    y = MT.CorrCholeskyTransform()(x)
    assert tuple(y.shape) == (5, 5, 5)
    assert bool(MC.corr_cholesky.check(y).all())
    np.testing.assert_allclose((y @ y.mT).diagonal(dim1=-2, dim2=-1).numpy(), 1.0, rtol=1e-12)


def test_stack_and_cat_check_sizes():
    with pytest.raises(ValueError, match="StackTransform"):
        MT.StackTransform([MT.ExpTransform()], dim=0)(munet.ones(2, 3))
    with pytest.raises(ValueError, match="CatTransform"):
        MT.CatTransform([MT.ExpTransform()], dim=0, lengths=[1])(munet.ones(2, 3))
    with pytest.raises(ValueError, match="ReshapeTransform"):
        MT.ReshapeTransform((2, 3), (4, 2))


def _constraint_pairs():
    return [
        (MC.real, TC.real),
        (MC.positive, TC.positive),
        (MC.nonnegative, TC.nonnegative),
        (MC.greater_than(-1.5), TC.greater_than(-1.5)),
        (MC.less_than(2.0), TC.less_than(2.0)),
        (MC.unit_interval, TC.unit_interval),
        (MC.interval(-1.0, 3.0), TC.interval(-1.0, 3.0)),
        (MC.half_open_interval(0.0, 2.0), TC.half_open_interval(0.0, 2.0)),
        (MC.simplex, TC.simplex),
        (MC.independent(MC.positive, 1), TC.independent(TC.positive, 1)),
        (MC.lower_cholesky, TC.lower_cholesky),
        (MC.positive_definite, TC.positive_definite),
        (MC.corr_cholesky, TC.corr_cholesky),
        (MC.cat([MC.positive, MC.real], 1, [2, 1]), TC.cat([TC.positive, TC.real], 1, [2, 1])),
        (MC.stack([MC.positive, MC.unit_interval, MC.real], 1), TC.stack([TC.positive, TC.unit_interval, TC.real], 1)),
    ]


def _input_shape(constraint):
    if isinstance(constraint, type(TC.corr_cholesky)):
        return (4, 6)
    if constraint.event_dim == 2:
        return (4, 3, 3)
    return (4, 3)


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("index", range(len(_constraint_pairs())))
def test_registries_match_torch(registry, index):
    mine_c, theirs_c = _constraint_pairs()[index]
    mine_reg, theirs_reg = getattr(D, registry), getattr(TR, registry)
    try:
        theirs = theirs_reg(theirs_c)
    except NotImplementedError:
        with pytest.raises(NotImplementedError, match="Cannot transform"):
            mine_reg(mine_c)
        return
    mine = mine_reg(mine_c)
    x = np.random.default_rng(index).normal(size=_input_shape(theirs_c))
    ym, yt = mine(munet.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(ym.numpy(), yt.numpy(), rtol=1e-9, atol=1e-12)
    assert bool(mine_c.check(ym).all())
    assert mine.bijective == theirs.bijective


def test_register_rejects_non_constraints():
    with pytest.raises(TypeError, match="Constraint"):
        D.biject_to.register(int, lambda c: None)
    assert D.identity_transform(munet.ones(2)).tolist() == [1.0, 1.0]
