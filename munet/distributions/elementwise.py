"""``ElementwiseDistribution``: the base of distributions whose parameters broadcast elementwise to the batch shape."""

from numbers import Number

from . import constraints
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


class LocationScale(ElementwiseDistribution):
    """A family ``loc + scale * X`` for a fixed standard ``X``: its parameters, support and mode."""

    _parameters = ("loc", "scale")
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self._set_parameters(validate_args, loc=loc, scale=scale)

    @property
    def mode(self):
        return self.loc
