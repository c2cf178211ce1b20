"""The Kumaraswamy distribution ``Kumaraswamy(concentration1, concentration0)`` on ``(0, 1)``."""

import math

import munet

from . import constraints
from ._special import digamma, lgamma
from .gumbel import EULER_CONSTANT
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all


def _moments(a, b, n):
    """``E[X^n]`` of Kumaraswamy(a, b): ``b B(1 + n / a, b)``."""
    arg1 = 1 + n / a
    return b * munet.exp(lgamma(arg1) + lgamma(b) - lgamma(arg1 + b))


class Kumaraswamy(TransformedDistribution):
    """``(1 - U^(1 / concentration0))^(1 / concentration1)`` for ``U ~ Uniform(0, 1)``, as PyTorch builds it."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(
            munet.zeros_like(self.concentration0), munet.ones_like(self.concentration0), validate_args=validate_args
        )
        transforms = [
            PowerTransform(exponent=self.concentration0.reciprocal()),
            AffineTransform(loc=1.0, scale=-1.0),
            PowerTransform(exponent=self.concentration1.reciprocal()),
        ]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        c1, c0 = self.concentration1, self.concentration0
        log_mode = c0.reciprocal() * (-c0).log1p() - (-c0 * c1).log1p()
        log_mode = munet.where((c0 < 1) | (c1 < 1), munet.full_like(log_mode, math.nan), log_mode)
        return log_mode.exp()

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = digamma(self.concentration0 + 1) + EULER_CONSTANT
        return t0 + t1 * h0 - munet.log(self.concentration1) - munet.log(self.concentration0)
