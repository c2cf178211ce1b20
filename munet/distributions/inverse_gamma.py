"""The inverse gamma distribution ``InverseGamma(concentration, rate)``: ``1 / X`` for ``X ~ Gamma(concentration, rate)``."""

import math

import munet

from . import constraints
from ._special import digamma, lgamma
from .gamma import Gamma
from .transformed_distribution import TransformedDistribution
from .transforms import PowerTransform


class InverseGamma(TransformedDistribution):
    """Inverse gamma with shape ``concentration`` and scale ``rate``."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -base_dist.rate.new_ones(())
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        result = self.rate / (self.concentration - 1)
        return munet.where(self.concentration > 1, result, munet.full_like(result, math.inf))

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        result = self.rate.square() / ((self.concentration - 1).square() * (self.concentration - 2))
        return munet.where(self.concentration > 2, result, munet.full_like(result, math.inf))

    def entropy(self):
        c = self.concentration
        return c + self.rate.log() + lgamma(c) - (1 + c) * digamma(c)
