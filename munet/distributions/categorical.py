"""The categorical distribution ``Categorical(probs=None, logits=None)`` over ``0 .. K-1``."""

import math

import munet

from . import constraints
from .binary_parameters import check_exactly_one
from .distribution import Distribution
from .utils import finfo_eps, lazy_property, logits_to_probs, probs_to_logits


class Categorical(Distribution):
    """Categories ``0 .. K-1`` with probabilities over the last dim of ``probs`` (normalized) or ``logits``."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        check_exactly_one(probs, logits, "Categorical")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("Categorical: `probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("Categorical: `logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(Categorical, batch_shape, ("probs", "logits"), _instance)
        new._param = new.__dict__.get("probs", new.__dict__.get("logits"))
        new._num_events = self._num_events
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return munet.full(self._extended_shape(), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return munet.full(self._extended_shape(), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=()):
        sample_shape = tuple(sample_shape)
        n = math.prod(sample_shape)
        probs_2d = self.probs.reshape(-1, self._num_events)
        with munet.no_grad():
            samples_2d = munet.multinomial(probs_2d, n, True).T
        return samples_2d.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = munet.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        min_real = -(2 - finfo_eps(self.logits.dtype)) * 2.0 ** (127 if self.logits.dtype != munet.float64 else 1023)
        logits = self.logits.clamp(min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True):
        values = munet.arange(self._num_events, dtype=munet.long, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class CategoricalParameters:
    """Mixin for distributions built on a ``Categorical`` stored as ``self._categorical``."""

    def _set_categorical(self, probs, logits, validate_args) -> None:
        self._categorical = Categorical(probs, logits)
        Distribution.__init__(
            self, self._categorical.batch_shape, self._categorical.param_shape[-1:], validate_args=validate_args
        )

    def _expand_categorical(self, cls, batch_shape, _instance=None):
        new = self._get_checked_instance(cls, _instance)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape
