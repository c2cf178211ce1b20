"""The gamma distribution ``Gamma(concentration, rate)``."""

import munet

from . import constraints
from ._sampling import standard_gamma
from ._special import digamma, gammainc, lgamma
from .elementwise import ElementwiseDistribution
from .utils import finfo_tiny


class Gamma(ElementwiseDistribution):
    """Gamma distribution with shape ``concentration`` and inverse scale ``rate``."""

    _parameters = ("concentration", "rate")
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self._set_parameters(validate_args, concentration=concentration, rate=rate)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape).contiguous()) / self.rate.expand(shape)
        return value.clamp(min=finfo_tiny(value.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = munet.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        return (
            munet.xlogy(self.concentration, self.rate)
            + munet.xlogy(self.concentration - 1, value)
            - self.rate * value
            - lgamma(self.concentration)
        )

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)

    def entropy(self):
        c = self.concentration
        return c - munet.log(self.rate) + lgamma(c) + (1.0 - c) * digamma(c)
