"""The exponential distribution ``Exponential(rate)``."""

import munet

from . import constraints
from .elementwise import ElementwiseDistribution


class Exponential(ElementwiseDistribution):
    """Exponential distribution with rate ``rate`` (mean ``1 / rate``)."""

    _parameters = ("rate",)
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        self._set_parameters(validate_args, rate=rate)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return munet.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = munet.rand(shape, dtype=self.rate.dtype, device=self.rate.device)
        return -munet.log1p(-u) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return munet.log(self.rate) - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - munet.exp(-self.rate * value)

    def icdf(self, value):
        return -munet.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - munet.log(self.rate)
