"""The multinomial distribution ``Multinomial(total_count=1, probs=None, logits=None)``."""

import munet

from . import constraints
from ._special import lgamma
from .categorical import CategoricalParameters
from .distribution import Distribution


class Multinomial(CategoricalParameters, Distribution):
    """Counts of ``total_count`` categorical draws over K categories (event shape ``(K,)``)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}

    def __init__(self, total_count: int = 1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("Multinomial: inhomogeneous total_count is not supported (as PyTorch)")
        self.total_count = total_count
        self._set_categorical(probs, logits, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_categorical(Multinomial, batch_shape, _instance)
        new.total_count = self.total_count
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        sample_shape = tuple(sample_shape)
        draws = self._categorical.sample((self.total_count,) + sample_shape)  # (n, sample, batch)
        k = self._event_shape[0]
        one_hot = munet.nn.functional.one_hot(draws, k).to(self.probs.dtype)
        return one_hot.sum(0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = munet.broadcast_tensors(self.logits, value)
        logits = logits.clone()
        log_factorial_n = lgamma(value.sum(-1) + 1)
        log_factorial_xs = lgamma(value + 1).sum(-1)
        logits = munet.where((value == 0) & (logits == -float("inf")), munet.zeros_like(logits), logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers

    def entropy(self):
        n = munet.tensor(float(self.total_count), dtype=self.probs.dtype)
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - lgamma(n + 1)
        support = munet.arange(1, self.total_count + 1, dtype=self.probs.dtype, device=self.probs.device)
        binomial_probs = _binomial_log_prob_grid(self.total_count, self.probs, support)
        weights = lgamma(support + 1).view((-1,) + (1,) * (binomial_probs.dim() - 1))
        term2 = (munet.exp(binomial_probs) * weights).sum([0, -1])
        return term1 + term2


def _binomial_log_prob_grid(total_count: int, probs, support):
    """``log Binomial(total_count, probs).pmf(k)`` for each ``k`` of ``support`` along a new first dim."""
    k = support.view((-1,) + (1,) * probs.dim())
    n = float(total_count)
    log_choose = lgamma(munet.tensor(n + 1, dtype=probs.dtype)) - lgamma(k + 1) - lgamma(n - k + 1)
    return log_choose + munet.xlogy(k, probs) + munet.xlogy(n - k, 1 - probs)
