"""The continuous Bernoulli distribution ``ContinuousBernoulli(probs=None, logits=None, lims=(0.499, 0.501))``.

Its density on ``[0, 1]`` is ``C(p) p^x (1 - p)^(1 - x)`` (Loaiza-Ganem and Cunningham, 2019). The
normalizer ``C``, the mean and the variance have removable singularities at ``p = 1/2``; inside
``lims`` they are evaluated from their Taylor expansions, as PyTorch does.
"""

import math

import munet

from . import constraints
from .binary_parameters import BinaryParameters
from .exp_family import ExponentialFamily
from .utils import clamp_probs, lazy_property, logits_to_probs


class ContinuousBernoulli(BinaryParameters, ExponentialFamily):
    """Continuous Bernoulli with shape parameter ``probs`` in (0, 1) or ``logits`` (its log-odds); rsample by inverse cdf."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        param, is_scalar = self._set_probs_or_logits(probs, logits, "ContinuousBernoulli")
        self._lims = lims
        super().__init__(() if is_scalar else param.shape, validate_args=validate_args)
        if probs is not None:
            self.probs = clamp_probs(self.probs)
            self._param = self.probs

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(ContinuousBernoulli, batch_shape, ("probs", "logits"), _instance)
        new._lims = self._lims
        new._reset_param_after_expand()
        return new

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return munet.where(self._outside_unstable_region(), self.probs, munet.full_like(self.probs, self._lims[0]))

    def _cont_bern_log_norm(self):
        """The log normalizing constant ``log C(probs)``."""
        cut_probs = self._cut_probs()
        below_half = munet.where(cut_probs <= 0.5, cut_probs, munet.zeros_like(cut_probs))
        above_half = munet.where(cut_probs >= 0.5, cut_probs, munet.ones_like(cut_probs))
        log_norm = munet.log(munet.abs(munet.log1p(-cut_probs) - munet.log(cut_probs))) - munet.where(
            cut_probs <= 0.5, munet.log1p(-2.0 * below_half), munet.log(2.0 * above_half - 1.0)
        )
        x = (self.probs - 0.5) ** 2
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return munet.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / (munet.log1p(-cut_probs) - munet.log(cut_probs))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x**2) * x
        return munet.where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self):
        cut_probs = self._cut_probs()
        variances = (
            cut_probs * (cut_probs - 1.0) / (1.0 - 2.0 * cut_probs) ** 2
            + 1.0 / (munet.log1p(-cut_probs) - munet.log(cut_probs)) ** 2
        )
        x = (self.probs - 0.5) ** 2
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return munet.where(self._outside_unstable_region(), variances, taylor)

    @property
    def param_shape(self):
        return self._param.shape

    def sample(self, sample_shape=()):
        with munet.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = munet.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = munet.broadcast_tensors(self.logits, munet.as_tensor(value, dtype=self.logits.dtype))
        bce = munet.nn.functional.binary_cross_entropy_with_logits(logits, value, reduction="none")
        return -bce + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = (cut_probs**value * (1.0 - cut_probs) ** (1.0 - value) + cut_probs - 1.0) / (2.0 * cut_probs - 1.0)
        unbounded = munet.where(self._outside_unstable_region(), cdfs, value)
        return munet.where(
            value <= 0.0, munet.zeros_like(unbounded), munet.where(value >= 1.0, munet.ones_like(unbounded), unbounded)
        )

    def icdf(self, value):
        cut_probs = self._cut_probs()
        inverted = (munet.log1p(-cut_probs + value * (2.0 * cut_probs - 1.0)) - munet.log1p(-cut_probs)) / (
            munet.log(cut_probs) - munet.log1p(-cut_probs)
        )
        return munet.where(self._outside_unstable_region(), inverted, value)

    def entropy(self):
        log_probs0 = munet.log1p(-self.probs)
        log_probs1 = munet.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        outside = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = munet.where(outside, x, munet.full_like(x, self._lims[0] - 0.5))
        log_norm = munet.log(munet.abs(munet.expm1(cut))) - munet.log(munet.abs(cut))
        taylor = 0.5 * x + x**2 / 24.0 - x**4 / 2880.0
        return munet.where(outside, log_norm, taylor)
