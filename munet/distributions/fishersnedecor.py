"""The Fisher-Snedecor (F) distribution ``FisherSnedecor(df1, df2)``."""

import math

import munet

from . import constraints
from ._special import lgamma
from .elementwise import ElementwiseDistribution
from .gamma import Gamma
from .utils import finfo_tiny


class FisherSnedecor(ElementwiseDistribution):
    """The ratio of two scaled chi-squared variables with ``df1`` and ``df2`` degrees of freedom."""

    _parameters = ("df1", "df2")
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self._set_parameters(validate_args, df1=df1, df2=df2)

    def _gammas(self):
        return Gamma(self.df1 * 0.5, self.df1, validate_args=False), Gamma(
            self.df2 * 0.5, self.df2, validate_args=False
        )

    @property
    def mean(self):
        df2 = munet.where(self.df2 > 2, self.df2, munet.full_like(self.df2, math.nan))
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return munet.where(self.df1 > 2, mode, munet.full_like(mode, math.nan))

    @property
    def variance(self):
        df2 = munet.where(self.df2 > 4, self.df2, munet.full_like(self.df2, math.nan))
        return 2 * df2.pow(2) * (self.df1 + df2 - 2) / (self.df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=()):
        gamma1, gamma2 = self._gammas()
        tiny = finfo_tiny(self.df1.dtype)
        x1 = gamma1.rsample(sample_shape)
        x2 = gamma2.rsample(sample_shape).clamp(min=tiny)
        return (x1 / x2).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = lgamma(ct1 + ct2) - lgamma(ct1) - lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * munet.log(value)
        t3 = (ct1 + ct2) * munet.log1p(ct3 * value)
        return t1 + t2 - t3
