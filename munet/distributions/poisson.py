"""The Poisson distribution ``Poisson(rate)``."""

from numbers import Number

import munet

from . import constraints
from ._sampling import poisson
from ._special import lgamma
from .distribution import Distribution
from .utils import broadcast_all


class Poisson(Distribution):
    """Poisson distribution with rate ``rate``; samples are float counts, as PyTorch's."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(() if isinstance(rate, Number) else self.rate.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(Poisson, batch_shape, ("rate",), _instance)

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
