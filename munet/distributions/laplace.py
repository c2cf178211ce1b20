"""The Laplace distribution ``Laplace(loc, scale)``."""

import math

import munet

from .elementwise import LocationScale
from .utils import finfo_eps


class Laplace(LocationScale):
    """Laplace distribution with location ``loc`` and scale ``scale``."""

    @property
    def mean(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = finfo_eps(self.loc.dtype)
        u = munet.rand(shape, dtype=self.loc.dtype, device=self.loc.device) * (2 - eps) - (1 - eps)  # in (-1, 1)
        return self.loc - self.scale * u.sign() * munet.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -munet.log(2 * self.scale) - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * munet.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * munet.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + munet.log(2 * self.scale)
