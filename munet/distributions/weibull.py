"""The Weibull distribution ``Weibull(scale, concentration)``: ``scale * E^(1 / concentration)`` for ``E ~ Exponential(1)``."""

import munet

from . import constraints
from ._special import lgamma
from .exponential import Exponential
from .gumbel import EULER_CONSTANT
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .utils import broadcast_all


class Weibull(TransformedDistribution):
    """Weibull with scale ``scale`` and shape ``concentration``."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(munet.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        batch_shape = tuple(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        transforms = [PowerTransform(exponent=new.concentration_reciprocal), AffineTransform(loc=0, scale=new.scale)]
        TransformedDistribution.__init__(new, self.base_dist.expand(batch_shape), transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * munet.exp(lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        c = self.concentration
        return self.scale * ((c - 1) / c) ** c.reciprocal()

    @property
    def variance(self):
        r = self.concentration_reciprocal
        return self.scale.pow(2) * (munet.exp(lgamma(1 + 2 * r)) - munet.exp(2 * lgamma(1 + r)))

    def entropy(self):
        r = self.concentration_reciprocal
        return EULER_CONSTANT * (1 - r) + munet.log(self.scale * r) + 1
