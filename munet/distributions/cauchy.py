"""The Cauchy distribution ``Cauchy(loc, scale)``."""

import math

import munet

from .elementwise import LocationScale


class Cauchy(LocationScale):
    """Cauchy (Lorentz) distribution; its mean and variance are undefined (nan and inf, as PyTorch)."""

    @property
    def mean(self):
        return munet.full(self._extended_shape(), math.nan, dtype=self.loc.dtype, device=self.loc.device)

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
