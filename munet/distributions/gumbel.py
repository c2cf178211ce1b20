"""The Gumbel (type-I extreme value) distribution ``Gumbel(loc, scale)``."""

import math
from numbers import Number

import munet

from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, ExpTransform
from .uniform import Uniform
from .utils import broadcast_all, finfo_eps, finfo_tiny

EULER_CONSTANT = 0.57721566490153286060


class Gumbel(TransformedDistribution):
    """``loc - scale * log(-log(U))`` for ``U ~ Uniform(tiny, 1 - eps)``, as PyTorch builds it."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        tiny, eps = finfo_tiny(self.loc.dtype), finfo_eps(self.loc.dtype)
        if isinstance(loc, Number) and isinstance(scale, Number):
            base_dist = Uniform(tiny, 1 - eps, validate_args=validate_args)
        else:
            base_dist = Uniform(
                munet.full_like(self.loc, tiny), munet.full_like(self.loc, 1 - eps), validate_args=validate_args
            )
        transforms = [
            ExpTransform().inv,
            AffineTransform(loc=0, scale=-munet.ones_like(self.scale)),
            ExpTransform().inv,
            AffineTransform(loc=self.loc, scale=-self.scale),
        ]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(tuple(batch_shape))
        new.scale = self.scale.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return y - y.exp() - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * EULER_CONSTANT

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return math.pi / math.sqrt(6) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + EULER_CONSTANT)
