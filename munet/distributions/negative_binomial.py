"""The negative binomial distribution ``NegativeBinomial(total_count, probs=None, logits=None)``."""

import munet

from . import constraints
from ._sampling import poisson
from ._special import lgamma
from .binary_parameters import BinaryParameters, check_exactly_one
from .distribution import Distribution
from .gamma import Gamma
from .utils import broadcast_all


class NegativeBinomial(BinaryParameters, Distribution):
    """Successes before ``total_count`` failures of Bernoulli(``probs``) trials; sampled as Poisson(Gamma)."""

    arg_constraints = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        check_exactly_one(probs, logits, "NegativeBinomial")
        given = "probs" if probs is not None else "logits"
        total_count, param = broadcast_all(total_count, probs if probs is not None else logits)
        self.total_count = total_count.type_as(param)
        setattr(self, given, param)
        self._param = param
        super().__init__(param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(NegativeBinomial, batch_shape, ("total_count", "probs", "logits"), _instance)
        new._reset_param_after_expand()
        return new

    @property
    def mean(self):
        return self.total_count * munet.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / munet.sigmoid(-self.logits)

    @property
    def param_shape(self):
        return self._param.shape

    def sample(self, sample_shape=()):
        with munet.no_grad():
            rate = Gamma(self.total_count, munet.exp(-self.logits), validate_args=False).sample(sample_shape)
            return poisson(rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logsigmoid = munet.nn.functional.logsigmoid
        log_unnormalized_prob = self.total_count * logsigmoid(-self.logits) + value * logsigmoid(self.logits)
        # lgamma here is defined for positive arguments: total_count = 0 (a point mass at 0) is masked below
        total = self.total_count + value
        safe_total = munet.where(total == 0, munet.ones_like(total), total)
        safe_count = munet.where(self.total_count == 0, munet.ones_like(self.total_count), self.total_count)
        log_normalization = -lgamma(safe_total) + lgamma(1.0 + value) + lgamma(safe_count)
        log_normalization = munet.where(total == 0, munet.zeros_like(log_normalization), log_normalization)
        return log_unnormalized_prob - log_normalization
