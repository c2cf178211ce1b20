"""``kl_divergence(p, q)`` and its registry ``register_kl``, as ``torch.distributions.kl``.

Implementations are looked up by the pair of types; with several matches through subclassing
the pair closest in both method resolution orders wins (ordered by ``p``'s type first).
"""

import math

import munet

from ._special import digamma, lgamma
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Gamma
from .independent import Independent
from .laplace import Laplace
from .log_normal import LogNormal
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .multivariate_normal import MultivariateNormal, batch_mahalanobis
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_EULER_GAMMA = 0.57721566490153286060
_KL_REGISTRY: dict = {}
_KL_MEMOIZE: dict = {}


def register_kl(type_p, type_q):
    """Decorator registering ``fn(p, q)`` as the KL divergence of ``type_p`` from ``type_q``."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"register_kl: expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"register_kl: expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()
        return fn

    return decorator


def _dispatch_kl(type_p, type_q):
    matches = [(p, q) for p, q in _KL_REGISTRY if issubclass(type_p, p) and issubclass(type_q, q)]
    if not matches:
        return None

    def rank(pair):
        return (type_p.__mro__.index(pair[0]), type_q.__mro__.index(pair[1]))

    best = min(matches, key=rank)
    return _KL_REGISTRY[best]


def kl_divergence(p: Distribution, q: Distribution):
    """``KL(p || q)``, batched over the distributions' batch shape."""
    key = type(p), type(q)
    if key not in _KL_MEMOIZE:
        _KL_MEMOIZE[key] = _dispatch_kl(*key)
    fn = _KL_MEMOIZE[key]
    if fn is None:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type {type(p).__name__} and q type {type(q).__name__}"
        )
    return fn(p, q)


def _infinite_like(tensor):
    return munet.full_like(tensor, math.inf)


def _x_log_x(tensor):
    return tensor * tensor.log()


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (munet.nn.functional.softplus(-q.logits) - munet.nn.functional.softplus(-p.logits))
    t1 = munet.where(q.probs == 0, _infinite_like(t1), t1)
    t1 = munet.where(p.probs == 0, munet.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (munet.nn.functional.softplus(q.logits) - munet.nn.functional.softplus(p.logits))
    t2 = munet.where(q.probs == 1, _infinite_like(t2), t2)
    t2 = munet.where(p.probs == 1, munet.zeros_like(t2), t2)
    return t1 + t2


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = lgamma(q.concentration1) + lgamma(q.concentration0) + lgamma(sum_params_p)
    t2 = lgamma(p.concentration1) + lgamma(p.concentration0) + lgamma(sum_params_q)
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError(
            "KL between Binomials where q.total_count > p.total_count is not implemented (as PyTorch)"
        )
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    inf_idxs = p.total_count > q.total_count
    return munet.where(inf_idxs, _infinite_like(kl), kl)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = munet.where(q.probs == 0, _infinite_like(t), t)
    t = munet.where(p.probs == 0, munet.zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = lgamma(sum_p_concentration) - lgamma(sum_q_concentration)
    t2 = (lgamma(p.concentration) - lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p_concentration).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return rate_ratio - 1 - rate_ratio.log()


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * munet.log(p.rate / q.rate)
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * munet.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low) | (q.high < p.high)
    return munet.where(outside, _infinite_like(result), result)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims is not implemented")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError(
            "KL between TransformedDistributions with different transforms or event shapes is not implemented"
        )
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), len(p.event_shape) - len(p.base_dist.event_shape))


def _batch_trace_xxt(bmat):
    return bmat.pow(2).sum([-2, -1])


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes cannot be computed"
        )
    half_term1 = munet.diagonal(q._unbroadcasted_scale_tril, dim1=-2, dim2=-1).log().sum(-1) - munet.diagonal(
        p._unbroadcasted_scale_tril, dim1=-2, dim2=-1
    ).log().sum(-1)
    n = p.event_shape[0]
    combined_batch_shape = tuple(
        munet.broadcast_shapes(q._unbroadcasted_scale_tril.shape[:-2], p._unbroadcasted_scale_tril.shape[:-2])
    )
    q_scale_tril = q._unbroadcasted_scale_tril.expand(combined_batch_shape + (n, n))
    p_scale_tril = p._unbroadcasted_scale_tril.expand(combined_batch_shape + (n, n))
    term2 = _batch_trace_xxt(munet.linalg.solve_triangular(q_scale_tril, p_scale_tril, upper=False))
    diff = (q.loc - p.loc).expand(tuple(munet.broadcast_shapes(combined_batch_shape, q.loc.shape[:-1])) + (n,))
    term3 = batch_mahalanobis(q._unbroadcasted_scale_tril.expand(tuple(diff.shape[:-1]) + (n, n)), diff)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmultivariatenormal_lowrankmultivariatenormal(p, q):
    return _kl_gaussian_dense(p.loc, p.covariance_matrix, q.loc, q.covariance_matrix)


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    return _kl_gaussian_dense(p.loc, p.covariance_matrix, q.loc, q.covariance_matrix)


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    return _kl_gaussian_dense(p.loc, p.covariance_matrix, q.loc, q.covariance_matrix)


def _kl_gaussian_dense(loc_p, cov_p, loc_q, cov_q):
    """KL between Gaussians from dense covariances (Cholesky of each; cubic in the event size)."""
    if loc_p.shape[-1] != loc_q.shape[-1]:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes cannot be computed"
        )
    return _kl_multivariatenormal_multivariatenormal(
        MultivariateNormal(loc_p, covariance_matrix=cov_p, validate_args=False),
        MultivariateNormal(loc_q, covariance_matrix=cov_q, validate_args=False),
    )


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = munet.log(scale_ratio)
    t2 = math.sqrt(2 / math.pi) * p.scale * munet.exp(-0.5 * loc_diff_scale_ratio.pow(2))
    t3 = loc_diff * munet.erf(math.sqrt(0.5) * loc_diff_scale_ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * munet.log(ratio)
    return t1 + ratio + lgamma(q.concentration) + q.concentration * _EULER_GAMMA - (1 + _EULER_GAMMA)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * munet.log(rate_sqr * var_normal * 2 * math.pi)
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - munet.log(q.rate) + q.rate * p.mean


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = 0.5 * munet.log(beta_sqr * var_normal * 2 * math.pi) - p.concentration - lgamma(p.concentration)
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return t1 + (p.concentration - 1) * digamma(p.concentration) + (t2 - t3 + t4) / var_normal


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * munet.log(2 * scale_sqr_var_ratio / math.pi)
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = munet.log(math.sqrt(math.pi * 2) * q.scale / common_term)
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return munet.where(p.low < 0, _infinite_like(result), result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = q.concentration * q.rate.log()
    t3 = lgamma(q.concentration)
    t4 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t5 = q.rate * (p.high + p.low) / 2
    result = -t1 - t2 + t3 + t4 + t5
    return munet.where(p.low < 0, _infinite_like(result), result)


@register_kl(Uniform, Laplace)
def _kl_uniform_laplace(p, q):
    t1 = -((p.high - p.low) / (2 * q.scale)).log()
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t2 = (high_loc_diff.abs() * high_loc_diff - low_loc_diff.abs() * low_loc_diff) / 2
    t3 = munet.exp(-high_loc_diff.abs()) * high_loc_diff.sign() - munet.exp(-low_loc_diff.abs()) * low_loc_diff.sign()
    return t1 + (t2 + t3) * q.scale / (p.high - p.low) - 1


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low > p.support.lower_bound) | (q.high < p.support.upper_bound)
    return munet.where(outside, _infinite_like(result), result)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    e_x = p.concentration1 / (p.concentration1 + p.concentration0)
    var_normal = q.scale.pow(2)
    t1 = -p.entropy()
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (e_x * (1 - e_x) / (p.concentration1 + p.concentration0 + 1) + e_x.pow(2)) * 0.5
    t4 = q.loc * e_x
    t5 = q.loc.pow(2) * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var_normal
