"""``RelaxedOneHotCategorical(temperature, probs=None, logits=None)``: the Concrete / Gumbel-softmax distribution."""

import math

import munet

from . import constraints
from .categorical import CategoricalParameters
from .distribution import Distribution
from .relaxed_bernoulli import RelaxedParameters
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform
from .utils import clamp_probs


class ExpRelaxedCategorical(CategoricalParameters, Distribution):
    """The log of a ``RelaxedOneHotCategorical`` sample (Maddison et al., 2017; Jang et al., 2017)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        self._set_categorical(probs, logits, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_categorical(ExpRelaxedCategorical, batch_shape, _instance)
        new.temperature = self.temperature
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        uniforms = clamp_probs(munet.rand(shape, dtype=self.logits.dtype, device=self.logits.device))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = munet.broadcast_tensors(self.logits, value)
        temperature = munet.as_tensor(self.temperature, dtype=value.dtype)
        log_scale = math.lgamma(k) + (k - 1) * munet.log(temperature)
        score = logits - value.mul(temperature)
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(RelaxedParameters, TransformedDistribution):
    """A continuous relaxation of ``OneHotCategorical`` on the simplex, reparameterizable."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)
