"""``Distribution``: the base class with PyTorch's shapes, sampling and validation contract.

A distribution has a ``batch_shape`` (independent parameterizations) and an ``event_shape``
(the shape of one draw); ``sample(sample_shape)`` returns ``sample_shape + batch_shape +
event_shape``. With ``validate_args`` on (the default, as PyTorch's ``__debug__`` default),
parameters are checked against ``arg_constraints`` at construction and ``log_prob`` arguments
against ``support``; a violation raises ``ValueError``. The checks are ``check_values`` ops, not
host reads, so validated distributions also run inside ``munet.compile``.
"""

import munet
from munet.ops.checks import check_values

from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


def _size(shape) -> munet.Size:
    return munet.Size(tuple(shape))


class Distribution:
    """Base class of the probability distributions."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for distributions created afterwards."""
        if value not in (True, False):
            raise ValueError(f"Distribution.set_default_validate_args: expected a bool, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()
        super().__init__()

    def _check_parameters(self) -> None:
        for param, constraint in self.arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if param not in self.__dict__ and isinstance(getattr(type(self), param, None), (lazy_property, property)):
                continue  # a lazily computed alternative parameterization
            value = getattr(self, param)
            check_values(
                constraint.check(value),
                f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) "
                f"of distribution {type(self).__name__} to satisfy the constraint {constraint!r}, "
                "but found invalid values",
                ValueError,
            )

    @property
    def batch_shape(self) -> munet.Size:
        return self._batch_shape

    @property
    def event_shape(self) -> munet.Size:
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        return {}

    @property
    def support(self):
        raise NotImplementedError(f"{type(self).__name__} does not define a support")

    def expand(self, batch_shape, _instance=None):
        """The same distribution with its parameters expanded to ``batch_shape`` (views, no copies)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement expand")

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """A draw of shape ``sample_shape + batch_shape + event_shape``, without gradient."""
        with munet.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparameterized draw: differentiable with respect to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sampler (has_rsample is False)")

    def sample_n(self, n: int):
        return self.sample(munet.Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def enumerate_support(self, expand: bool = True):
        raise NotImplementedError(f"{type(self).__name__} has no enumerable support")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self):
        return munet.exp(self.entropy())

    def _extended_shape(self, sample_shape=()) -> munet.Size:
        return _size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value) -> None:
        """Raise ``ValueError`` unless ``value`` broadcasts with the shapes and lies in the support."""
        if not munet.is_tensor(value):
            raise ValueError(f"The value argument to log_prob must be a Tensor, got {type(value).__name__}")
        event_dim_start = len(value.shape) - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(
                f"The right-most size of value must match event_shape: {tuple(value.shape)} vs {tuple(self._event_shape)}."
            )
        actual_shape = tuple(value.shape)
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs {expected_shape}."
                )
        support = self.support
        if constraints.is_dependent(support):
            return
        check_values(
            support.check(value),
            f"Expected value argument ({type(value).__name__} of shape {actual_shape}) to be within the support "
            f"({support!r}) of the distribution {type(self).__name__}, but found invalid values",
            ValueError,
        )

    def _expand_parameters(self, cls, batch_shape, names, _instance=None, event_shape=None):
        """A new ``cls`` whose parameters ``names`` are this one's expanded to ``batch_shape``."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = _size(batch_shape)
        for name in names:
            if name in self.__dict__:
                value = self.__dict__[name]
                extra = tuple(value.shape[len(self._batch_shape) :])
                setattr(new, name, value.expand(tuple(batch_shape) + extra))
        event = self._event_shape if event_shape is None else event_shape
        Distribution.__init__(new, batch_shape, event, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom __init__ "
                "must also define a custom .expand()"
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else tuple(self.__dict__[p].shape)}"
            for p in names
        )
        return f"{type(self).__name__}({args})"
