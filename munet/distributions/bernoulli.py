"""The Bernoulli distribution ``Bernoulli(probs=None, logits=None)``."""

import munet

from . import constraints
from .binary_parameters import BinaryParameters
from .distribution import Distribution


class Bernoulli(BinaryParameters, Distribution):
    """A coin with success probability ``probs`` (or log-odds ``logits``); samples are floats 0./1."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        param, is_scalar = self._set_probs_or_logits(probs, logits, "Bernoulli")
        super().__init__(() if is_scalar else param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(Bernoulli, batch_shape, ("probs", "logits"), _instance)
        new._reset_param_after_expand()
        return new

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return munet.where(self.probs == 0.5, munet.full_like(mode, float("nan")), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with munet.no_grad():
            return munet.bernoulli(self.probs.expand(shape).contiguous())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = munet.broadcast_tensors(self.logits, munet.as_tensor(value, dtype=self.logits.dtype))
        return -munet.nn.functional.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return munet.nn.functional.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True):
        values = munet.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
