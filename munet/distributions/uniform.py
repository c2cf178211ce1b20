"""The continuous uniform distribution ``Uniform(low, high)`` on the half-open interval [low, high)."""

import munet
from munet.ops.checks import check_values

from . import constraints
from .elementwise import ElementwiseDistribution


class Uniform(ElementwiseDistribution):
    """Uniform distribution on ``[low, high)``."""

    _parameters = ("low", "high")
    arg_constraints = {
        "low": constraints.dependent(is_discrete=False, event_dim=0),
        "high": constraints.dependent(is_discrete=False, event_dim=0),
    }
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self._set_parameters(validate_args, low=low, high=high)
        if self._validate_args:
            check_values(self.low < self.high, "Uniform: expected low < high for every element", ValueError)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return munet.full_like(self.high, float("nan"))

    @property
    def stddev(self):
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = munet.rand(shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = ((self.low <= value) & (value < self.high)).to(self.low.dtype)
        return munet.log(inside) - munet.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return munet.log(self.high - self.low)
