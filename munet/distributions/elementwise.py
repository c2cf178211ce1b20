"""``ElementwiseDistribution``: the base of distributions whose parameters broadcast elementwise to the batch shape."""

from numbers import Number

from .distribution import Distribution
from .utils import broadcast_all


class ElementwiseDistribution(Distribution):
    """Parameters named in ``_parameters`` are broadcast together; all numbers give batch shape ``()``."""

    _parameters: tuple = ()

    def _set_parameters(self, validate_args, **values) -> None:
        tensors = broadcast_all(*values.values())
        for name, tensor in zip(values, tensors):
            setattr(self, name, tensor)
        all_numbers = all(isinstance(v, Number) for v in values.values())
        Distribution.__init__(self, () if all_numbers else tensors[0].shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_parameters(type(self), batch_shape, self._parameters, _instance)
