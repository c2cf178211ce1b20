"""``RelaxedBernoulli(temperature, probs=None, logits=None)``: the binary Concrete distribution."""

import munet

from . import constraints
from .binary_parameters import BinaryParameters
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import SigmoidTransform
from .utils import clamp_probs


class RelaxedParameters:
    """Mixin: ``temperature``, ``logits`` and ``probs`` of a relaxed distribution, read from its base."""

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class LogitRelaxedBernoulli(BinaryParameters, Distribution):
    """The logit of a ``RelaxedBernoulli`` sample (Maddison et al., 2017)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        param, is_scalar = self._set_probs_or_logits(probs, logits, "LogitRelaxedBernoulli")
        super().__init__(() if is_scalar else param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(LogitRelaxedBernoulli, batch_shape, ("probs", "logits"), _instance)
        new.temperature = self.temperature
        new._reset_param_after_expand()
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(munet.rand(shape, dtype=probs.dtype, device=probs.device))
        return (uniforms.log() - (-uniforms).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = munet.broadcast_tensors(self.logits, value)
        diff = logits - value * self.temperature
        return (
            munet.log(munet.as_tensor(self.temperature, dtype=diff.dtype))
            + diff
            - 2 * munet.nn.functional.softplus(diff)
        )


class RelaxedBernoulli(RelaxedParameters, TransformedDistribution):
    """A continuous relaxation of ``Bernoulli`` on (0, 1), reparameterizable; ``temperature`` sets its sharpness."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)
