"""Constraints: the sets a parameter or a sample must lie in, as ``torch.distributions.constraints``.

``constraint.check(value)`` returns a bool tensor over the batch (event dims reduced), which
``Distribution`` uses to validate parameters and ``log_prob`` arguments.
"""

import munet

__all__ = [
    "Constraint",
    "boolean",
    "cat",
    "corr_cholesky",
    "dependent",
    "dependent_property",
    "greater_than",
    "greater_than_eq",
    "half_open_interval",
    "independent",
    "integer_interval",
    "interval",
    "is_dependent",
    "less_than",
    "lower_cholesky",
    "lower_triangular",
    "multinomial",
    "nonnegative",
    "nonnegative_integer",
    "one_hot",
    "positive",
    "positive_definite",
    "positive_integer",
    "positive_semidefinite",
    "real",
    "real_vector",
    "simplex",
    "square",
    "stack",
    "symmetric",
    "unit_interval",
]


class Constraint:
    """A region: ``check(value)`` is true where ``value`` lies in it."""

    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError(f"{type(self).__name__} is abstract: use one of the constraint instances")

    def __repr__(self):
        bounds = {k: v for k, v in vars(self).items() if k.endswith("_bound") and isinstance(v, (int, float))}
        return type(self).__name__.lstrip("_") + "(" + ", ".join(f"{k}={v}" for k, v in bounds.items()) + ")"


class _Dependent(Constraint):
    """A placeholder for a support that depends on other parameters; it cannot be checked."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete = is_discrete
        self.event_dim = event_dim

    def __call__(self, *, is_discrete=False, event_dim=0):
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, value):
        raise ValueError("constraints.dependent cannot be checked: the support depends on the parameters")


def is_dependent(constraint) -> bool:
    """Whether ``constraint`` is ``dependent`` (not checkable)."""
    return isinstance(constraint, _Dependent)


class dependent_property(property):  # noqa: N801 - PyTorch's name
    """A property that is also ``dependent``: a support computed from parameters."""

    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        super().__init__(fn)
        self.is_discrete = is_discrete
        self.event_dim = event_dim

    def __call__(self, fn):
        return dependent_property(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _IndependentConstraint(Constraint):
    """``base`` with its rightmost ``reinterpreted_batch_ndims`` dims treated as one event."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims: int):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        for _ in range(self.reinterpreted_batch_ndims):
            result = result.all(-1)
        return result


independent = _IndependentConstraint


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        is_boolean = ((value == 0) | (value == 1)).all(-1)
        return is_boolean & (value.sum(-1) == 1)


def _is_integral(value):
    """True where ``value`` is a whole number (always, for an integer dtype)."""
    if value.dtype.is_floating_point:
        return value % 1 == 0
    return munet.ones_like(value, dtype=munet.bool)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return _is_integral(value) & (value >= self.lower_bound) & (value <= self.upper_bound)


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return _is_integral(value) & (value >= self.lower_bound)


class _Real(Constraint):
    def check(self, value):
        return value == value  # false only at NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return value > self.lower_bound


class _GreaterThanEq(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return value >= self.lower_bound


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value >= self.lower_bound) & (value <= self.upper_bound)


class _HalfOpenInterval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value >= self.lower_bound) & (value < self.upper_bound)


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Multinomial(Constraint):
    """Nonnegative integer vectors summing to at most ``upper_bound``."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return (value >= 0).all(-1) & (value.sum(-1) <= self.upper_bound)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return (munet.tril(value) == value).flatten(-2).min(-1).values


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        lower = (munet.tril(value) == value).flatten(-2).min(-1).values
        positive_diagonal = (munet.diagonal(value, dim1=-2, dim2=-1) > 0).min(-1).values
        return lower & positive_diagonal


class _CorrCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        tol = 10 * 2.0**-23 * value.shape[-1]
        row_norm = munet.linalg.norm(value.detach(), dim=-1)
        unit_rows = ((row_norm - 1.0).abs() <= tol).all(-1)
        return _LowerCholesky().check(value) & unit_rows


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        is_square = value.shape[-1] == value.shape[-2]
        return munet.full(value.shape[:-2], is_square, dtype=munet.bool, device=value.device)


class _Symmetric(_Square):
    def check(self, value):
        if value.shape[-1] != value.shape[-2]:
            return super().check(value)
        return munet.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        symmetric = super().check(value)
        if value.shape[-1] != value.shape[-2]:
            return symmetric
        return symmetric & munet.linalg.eigvalsh(value).ge(0).all(-1)


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        symmetric = super().check(value)
        if value.shape[-1] != value.shape[-2]:
            return symmetric
        return symmetric & munet.linalg.cholesky_ex(value).info.eq(0)


class _ConstraintSequence(Constraint):
    """A constraint made of the constraints ``cseq`` over parts of a value."""

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)


class _Cat(_ConstraintSequence):
    """Constraints applied to consecutive slices of ``value`` along ``dim``."""

    def __init__(self, cseq, dim: int = 0, lengths=None):
        self.cseq = list(cseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.cseq)
        self.dim = dim

    def check(self, value):
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start += length
        return munet.cat(checks, self.dim)


class _Stack(_ConstraintSequence):
    """Constraints applied to the slices of ``value`` along ``dim``."""

    def __init__(self, cseq, dim: int = 0):
        self.cseq = list(cseq)
        self.dim = dim

    def check(self, value):
        slices = [value.select(self.dim, i) for i in range(value.shape[self.dim])]
        return munet.stack([c.check(s) for c, s in zip(self.cseq, slices)], self.dim)


dependent = _Dependent()
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack
