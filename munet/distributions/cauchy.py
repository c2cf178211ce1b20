"""The Cauchy distribution ``Cauchy(loc, scale)``."""

import math
from numbers import Number

import munet

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all


class Cauchy(Distribution):
    """Cauchy (Lorentz) distribution; its mean and variance are undefined (nan and inf, as PyTorch)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = () if isinstance(loc, Number) and isinstance(scale, Number) else self.loc.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(Cauchy, batch_shape, ("loc", "scale"), _instance)

    @property
    def mean(self):
        return munet.full(self._extended_shape(), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return munet.full(self._extended_shape(), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = munet.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self.scale * munet.tan(math.pi * (u - 0.5))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - munet.log(self.scale) - munet.log1p(((value - self.loc) / self.scale) ** 2)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return munet.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return munet.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + munet.log(self.scale)
