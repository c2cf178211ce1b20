"""The geometric distribution ``Geometric(probs=None, logits=None)``: failures before the first success."""

import munet

from . import constraints
from .binary_parameters import BinaryParameters
from .distribution import Distribution
from .utils import finfo_tiny


class Geometric(BinaryParameters, Distribution):
    """The number of failures before the first success of Bernoulli(``probs``) trials; support 0, 1, 2, ..."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        param, is_scalar = self._set_probs_or_logits(probs, logits, "Geometric")
        super().__init__(() if is_scalar else param.shape, validate_args=validate_args)
        if self._validate_args and probs is not None and not bool((self.probs > 0).all()):
            raise ValueError(
                f"Expected parameter probs ({type(self.probs).__name__} of shape {tuple(self.probs.shape)}) "
                f"of distribution {self!r} to be positive but found invalid values"
            )

    def expand(self, batch_shape, _instance=None):
        new = self._expand_parameters(Geometric, batch_shape, ("probs", "logits"), _instance)
        new._reset_param_after_expand()
        return new

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return munet.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with munet.no_grad():
            u = munet.rand(shape, dtype=self.probs.dtype, device=self.probs.device).clamp(
                min=finfo_tiny(self.probs.dtype)
            )
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = munet.broadcast_tensors(munet.as_tensor(value, dtype=self.probs.dtype), self.probs)
        probs = munet.where((probs == 1) & (value == 0), munet.zeros_like(probs), probs)  # 0 * log(0) is 0 here
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        bce = munet.nn.functional.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")
        return bce / self.probs
