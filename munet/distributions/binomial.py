"""The binomial distribution ``Binomial(total_count=1, probs=None, logits=None)``."""

import munet

from . import constraints
from ._sampling import binomial
from ._special import lgamma
from .binary_parameters import BinaryParameters, check_exactly_one
from .distribution import Distribution
from .utils import broadcast_all


class Binomial(BinaryParameters, Distribution):
    """Number of successes in ``total_count`` Bernoulli trials of probability ``probs``."""

    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        check_exactly_one(probs, logits, "Binomial")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
            param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
            param = self.logits
        self._param = param
        super().__init__(param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(Binomial, batch_shape, ("total_count", "probs", "logits"), _instance)
        new._reset_param_after_expand()
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with munet.no_grad():
            return binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n = self.total_count
        log_factorial_n = lgamma(n + 1)
        log_factorial_k = lgamma(value + 1)
        log_factorial_nmk = lgamma(n - value + 1)
        # k * logits - n * log1p(exp(logits)), written to stay finite for large |logits|
        normalize_term = n * self.logits.clamp(min=0) + n * munet.log1p(munet.exp(-self.logits.abs())) - log_factorial_n
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def entropy(self):
        total = int(float(self.total_count.max()))
        if not bool((self.total_count == total).all()):
            raise NotImplementedError("Binomial.entropy: inhomogeneous total_count is not supported (as PyTorch)")
        values = self.enumerate_support(expand=False)
        log_prob = self.log_prob(values)
        return -(munet.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True):
        total = int(float(self.total_count.max()))
        if not bool((self.total_count == total).all()):
            raise NotImplementedError(
                "Binomial.enumerate_support: inhomogeneous total_count is not supported (as PyTorch)"
            )
        values = munet.arange(1 + total, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
