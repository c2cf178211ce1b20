"""The Dirichlet distribution ``Dirichlet(concentration)`` over the probability simplex."""

import munet

from . import constraints
from ._sampling import standard_gamma
from ._special import digamma, lgamma
from .distribution import Distribution
from .utils import finfo_eps, finfo_tiny


class Dirichlet(Distribution):
    """Dirichlet distribution; ``concentration`` has the event dim last."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("Dirichlet: concentration must be at least one-dimensional")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(Dirichlet, batch_shape, ("concentration",), _instance)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        gammas = standard_gamma(self.concentration.expand(shape).contiguous())
        draw = gammas / gammas.sum(-1, keepdim=True)
        eps = finfo_tiny(draw.dtype)
        return draw.clamp(min=eps, max=1 - finfo_eps(draw.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return munet.xlogy(c - 1.0, value).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        shifted = (self.concentration - 1).clamp(min=0.0)
        mode = shifted / shifted.sum(-1, keepdim=True)
        below_one = (self.concentration < 1).all(-1)
        one_hot = munet.nn.functional.one_hot(self.concentration.argmax(-1), self.concentration.shape[-1]).to(
            mode.dtype
        )
        return munet.where(below_one.unsqueeze(-1), one_hot, mode)

    @property
    def variance(self):
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def entropy(self):
        k = self.concentration.shape[-1]
        c = self.concentration
        total = c.sum(-1)
        return lgamma(c).sum(-1) - lgamma(total) - (k - total) * digamma(total) - ((c - 1.0) * digamma(c)).sum(-1)
