"""The Poisson distribution ``Poisson(rate)``."""

import munet

from . import constraints
from ._sampling import poisson
from ._special import lgamma
from .elementwise import ElementwiseDistribution


class Poisson(ElementwiseDistribution):
    """Poisson distribution with rate ``rate``; samples are float counts, as PyTorch's."""

    _parameters = ("rate",)
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        self._set_parameters(validate_args, rate=rate)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with munet.no_grad():
            return poisson(self.rate.expand(shape).contiguous())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = munet.broadcast_tensors(self.rate, munet.as_tensor(value, dtype=self.rate.dtype))
        return munet.xlogy(value, rate) - rate - lgamma(value + 1)
