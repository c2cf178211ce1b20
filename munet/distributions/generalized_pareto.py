"""The generalized Pareto distribution ``GeneralizedPareto(loc, scale, concentration)``.

Exponential at ``concentration == 0`` (tested with ``isclose``, as PyTorch), Pareto for positive
and bounded above by ``loc - scale / concentration`` for negative concentration.
"""

import math

import munet

from . import constraints
from .elementwise import ElementwiseDistribution


class GeneralizedPareto(ElementwiseDistribution):
    """Generalized Pareto with location ``loc``, scale ``scale`` and shape ``concentration``; rsample by inverse cdf."""

    _parameters = ("loc", "scale", "concentration")
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self._set_parameters(validate_args, loc=loc, scale=scale, concentration=concentration)

    def _safe_concentration(self):
        eq_zero = munet.isclose(self.concentration, munet.zeros_like(self.concentration))
        return eq_zero, munet.where(eq_zero, munet.ones_like(self.concentration), self.concentration)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = munet.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def _z(self, x):
        return (x - self.loc) / self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        y = 1 / safe_conc + munet.ones_like(z)
        where_nonzero = munet.where(y == 0, y, y * munet.log1p(safe_conc * z))
        return -self.scale.log() - munet.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration()
        return munet.where(eq_zero, -z, -munet.log1p(safe_conc * z) / safe_conc)

    def log_cdf(self, value):
        return munet.log1p(-munet.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return munet.exp(self.log_cdf(value))

    def icdf(self, value):
        eq_zero, safe_conc = self._safe_concentration()
        logu = munet.log1p(-value)
        where_nonzero = self.loc + self.scale / safe_conc * munet.expm1(-safe_conc * logu)
        return munet.where(eq_zero, self.loc - self.scale * logu, where_nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        safe_conc = munet.where(valid, self.concentration, munet.full_like(self.concentration, 0.5))
        result = self.loc + self.scale / (1 - safe_conc)
        return munet.where(valid, result, munet.full_like(result, math.nan))

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe_conc = munet.where(valid, self.concentration, munet.full_like(self.concentration, 0.25))
        result = self.scale**2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return munet.where(valid, result, munet.full_like(result, math.nan))

    def entropy(self):
        return (munet.log(self.scale) + self.concentration + 1).broadcast_to(tuple(self._batch_shape))

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        upper = munet.where(
            self.concentration < 0, self.loc - self.scale / self.concentration, munet.full_like(self.loc, math.inf)
        )
        return constraints.interval(self.loc, upper)
