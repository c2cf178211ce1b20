"""KL divergences of the later families (ContinuousBernoulli, Geometric, Gumbel, HalfNormal, Pareto,
the exponential families), registered into ``kl_divergence``'s table with PyTorch's formulas."""

import math

import munet

from ._special import digamma, lgamma
from .beta import Beta
from .continuous_bernoulli import ContinuousBernoulli
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import EULER_CONSTANT, Gumbel
from .half_distributions import HalfNormal
from .kl import kl_divergence, register_kl
from .normal import Normal
from .pareto import Pareto
from .uniform import Uniform
from .utils import sum_rightmost

__all__: list[str] = []


def _infinite_like(tensor):
    return munet.full_like(tensor, math.inf)


def _inf_where(mask, result):
    return munet.where(mask, _infinite_like(result), result)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + munet.log1p(-p.probs)
    t3 = -q._cont_bern_log_norm() - munet.log1p(-q.probs)
    return t1 + t2 + t3


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """The Bregman divergence of the log normalizer, as PyTorch (same family only)."""
    if type(p) is not type(q):
        raise NotImplementedError(
            "The cross KL-divergence between different exponential families cannot be computed using Bregman divergences"
        )
    p_nparams = [n.detach().requires_grad_() for n in p._natural_params]
    with munet.enable_grad():
        lg_normal = p._log_normalizer(*p_nparams)
        gradients = munet.autograd.grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q._natural_params) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q._natural_params, gradients):
        result = result - sum_rightmost((qnp - pnp) * g, len(q.event_shape))
    return result


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - munet.log1p(-q.probs) / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * EULER_CONSTANT
    t3 = munet.exp(ct2 + lgamma(1 + ct1) - ct3)
    return t1 + t2 + t3 - (1 + EULER_CONSTANT)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return _inf_where(p.scale < q.scale, result)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = munet.exp(loc_scale_ratio) * scale_rate_prod / (scale_rate_prod + 1)
    return t1 - loc_scale_ratio + t2 + scale_rate_prod.reciprocal()


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    c = p.concentration
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = (c - 1) * digamma(c) - lgamma(c) - c
    t2 = beta_scale_prod.log() + c / beta_scale_prod
    t3 = munet.exp(loc_scale_ratio) * (1 + beta_scale_prod.reciprocal()).pow(-c) - loc_scale_ratio
    return t1 + t2 + t3


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * EULER_CONSTANT - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (EULER_CONSTANT + 1)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = munet.exp(-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio)
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * (munet.exp(-high_loc_diff) - munet.exp(-low_loc_diff))
    return t1 - t2


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, ContinuousBernoulli)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Pareto, Beta)
@register_kl(Pareto, ContinuousBernoulli)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return _infinite_like(p.scale)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate_prod = p.scale * q.rate
    t1 = (p.alpha / scale_rate_prod).log()
    result = t1 - p.alpha.reciprocal() + p.alpha * scale_rate_prod / (p.alpha - 1) - 1
    return _inf_where(p.alpha <= 1, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _inf_where(p.alpha <= 1, t1 + t2 + t3 + t4 - 1)
