"""Student's t distribution ``StudentT(df, loc=0.0, scale=1.0)``."""

import math

import munet

from . import constraints
from ._sampling import standard_gamma
from ._special import digamma, lgamma
from .elementwise import ElementwiseDistribution


class StudentT(ElementwiseDistribution):
    """Student's t with ``df`` degrees of freedom, location ``loc`` and scale ``scale``."""

    _parameters = ("df", "loc", "scale")
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self._set_parameters(validate_args, df=df, loc=loc, scale=scale)

    @property
    def mean(self):
        return munet.where(self.df > 1, self.loc, munet.full_like(self.loc, math.nan))

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        var = self.scale.pow(2) * self.df / (self.df - 2)
        var = munet.where(self.df > 2, var, munet.full_like(var, math.inf))
        return munet.where(self.df > 1, var, munet.full_like(var, math.nan))

    def rsample(self, sample_shape=()):
        # X ~ Normal(0, 1), Z ~ Chi2(df) = 2 Gamma(df / 2); Y = X * rsqrt(Z / df) ~ StudentT(df)
        shape = self._extended_shape(sample_shape)
        x = munet.randn(shape, dtype=self.df.dtype, device=self.df.device)
        z = 2 * standard_gamma((0.5 * self.df).expand(shape).contiguous())
        return self.loc + self.scale * x * munet.rsqrt(z / self.df)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (
            munet.log(self.scale)
            + 0.5 * munet.log(self.df)
            + 0.5 * math.log(math.pi)
            + lgamma(0.5 * self.df)
            - lgamma(0.5 * (self.df + 1.0))
        )
        return -0.5 * (self.df + 1.0) * munet.log1p(y**2.0 / self.df) - z

    def entropy(self):
        half_df = 0.5 * self.df
        log_beta = lgamma(half_df) + math.lgamma(0.5) - lgamma(half_df + 0.5)
        return (
            munet.log(self.scale)
            + 0.5 * (self.df + 1) * (digamma(0.5 * (self.df + 1)) - digamma(half_df))
            + 0.5 * munet.log(self.df)
            + log_beta
        )
