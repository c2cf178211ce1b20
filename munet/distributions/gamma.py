"""The gamma distribution ``Gamma(concentration, rate)``."""

from numbers import Number

import munet

from . import constraints
from ._sampling import standard_gamma
from ._special import digamma, lgamma
from .distribution import Distribution
from .utils import broadcast_all, finfo_tiny


class Gamma(Distribution):
    """Gamma distribution with shape ``concentration`` and inverse scale ``rate``."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        batch_shape = () if isinstance(concentration, Number) and isinstance(rate, Number) else self.rate.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(Gamma, batch_shape, ("concentration", "rate"), _instance)

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

    def entropy(self):
        c = self.concentration
        return c - munet.log(self.rate) + lgamma(c) + (1.0 - c) * digamma(c)
