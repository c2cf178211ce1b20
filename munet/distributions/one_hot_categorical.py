"""The one-hot categorical distribution ``OneHotCategorical(probs=None, logits=None)``."""

import munet

from . import constraints
from .categorical import CategoricalParameters
from .distribution import Distribution


class OneHotCategorical(CategoricalParameters, Distribution):
    """A ``Categorical`` whose samples are one-hot vectors of length K (event shape ``(K,)``)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._set_categorical(probs, logits, validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_categorical(OneHotCategorical, batch_shape, _instance)

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return munet.nn.functional.one_hot(probs.argmax(-1), probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape=()):
        probs = self._categorical.probs
        indices = self._categorical.sample(sample_shape)
        return munet.nn.functional.one_hot(indices, probs.shape[-1]).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True):
        n = self._event_shape[0]
        values = munet.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.view((n,) + (1,) * len(self._batch_shape) + (n,))
        return values.expand((n,) + tuple(self._batch_shape) + (n,)) if expand else values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """``OneHotCategorical`` whose ``rsample`` is ``sample + (probs - probs.detach())``: the straight-through estimator."""

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
