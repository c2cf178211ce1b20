"""The ``Transform`` base, composition, and the elementwise and simplex transforms.

A ``Transform`` maps ``x`` to ``y = t(x)``; ``t.inv`` is its inverse and
``t.log_abs_det_jacobian(x, y)`` is ``log |dy/dx|`` summed over the transform's event dims.
``TransformedDistribution`` composes them with a base distribution.
"""

import math
import numbers

import munet

from .. import constraints
from ..utils import finfo_eps, finfo_tiny, sum_rightmost

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "ComposeTransform",
    "CumulativeDistributionTransform",
    "ExpTransform",
    "PowerTransform",
    "SigmoidTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StickBreakingTransform",
    "TanhTransform",
    "Transform",
    "identity_transform",
]


class Transform:
    """Base class: subclasses define ``_call``, ``_inverse``, ``log_abs_det_jacobian``, ``domain``, ``codomain``."""

    bijective = False
    sign = 1
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size: int = 0):
        if cache_size not in (0, 1):
            raise ValueError(f"Transform: cache_size must be 0 or 1, got {cache_size}")
        self._cache_size = cache_size
        self._cached_x_y = None, None
        self._inv = None

    @property
    def event_dim(self) -> int:
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self).__name__}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x):
        return self._through_cache(x, forward=True)

    def _inv_call(self, y):
        return self._through_cache(y, forward=False)

    def _through_cache(self, value, forward: bool):
        """``_call`` or ``_inverse`` of ``value``, reusing the last pair when ``cache_size`` is 1."""
        compute = self._call if forward else self._inverse
        if self._cache_size == 0:
            return compute(value)
        x_old, y_old = self._cached_x_y
        if value is (x_old if forward else y_old):
            return y_old if forward else x_old
        result = compute(value)
        self._cached_x_y = (value, result) if forward else (result, value)
        return result

    def _call(self, x):
        raise NotImplementedError(f"{type(self).__name__} does not define its forward map (_call)")

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} does not define its inverse (_inverse)")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError(f"{type(self).__name__} does not define log_abs_det_jacobian")

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    """The inverse of a transform, sharing its cache."""

    def __init__(self, transform: Transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def with_cache(self, cache_size: int = 1):
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """Apply ``parts`` left to right."""

    def __init__(self, parts, cache_size: int = 0):
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self):
        if self._inv is None:
            inverse = ComposeTransform([p.inv for p in reversed(self.parts)])
            inverse._inv = self
            self._inv = inverse
        return self._inv

    def with_cache(self, cache_size: int = 1):
        return self if self._cache_size == cache_size else ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return munet.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms = []
        event_dim = self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(sum_rightmost(part.log_abs_det_jacobian(a, b), event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        return total

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self):
        return "ComposeTransform(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


class _ParameterFreeTransform(Transform):
    """A transform without parameters: all instances of one type are equal."""

    def __eq__(self, other):
        return type(other) is type(self)

    __hash__ = object.__hash__


class ExpTransform(_ParameterFreeTransform):
    """``y = exp(x)``."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = 1

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """``y = x ** exponent`` on positive reals."""

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.exponent = munet.as_tensor(exponent) if isinstance(exponent, numbers.Number) else exponent

    def with_cache(self, cache_size: int = 1):
        return self if self._cache_size == cache_size else PowerTransform(self.exponent, cache_size=cache_size)

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and bool(munet.as_tensor(self.exponent == other.exponent).all())

    __hash__ = object.__hash__

    @property
    def sign(self):
        return self.exponent.sign()

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return munet.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))

    def inverse_shape(self, shape):
        return munet.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))


def _clipped_sigmoid(x):
    return munet.sigmoid(x).clamp(min=finfo_tiny(x.dtype), max=1.0 - finfo_eps(x.dtype))


class SigmoidTransform(_ParameterFreeTransform):
    """``y = sigmoid(x)``."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = 1

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        y = y.clamp(min=finfo_tiny(y.dtype), max=1.0 - finfo_eps(y.dtype))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -munet.nn.functional.softplus(-x) - munet.nn.functional.softplus(x)


class TanhTransform(_ParameterFreeTransform):
    """``y = tanh(x)``."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = 1

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return munet.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) written stably
        return 2.0 * (math.log(2.0) - x - munet.nn.functional.softplus(-2.0 * x))


class AffineTransform(Transform):
    """``y = loc + scale * x``; ``event_dim`` dims on the right form one event."""

    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        return constraints.real if self._event_dim == 0 else constraints.independent(constraints.real, self._event_dim)

    @property
    def codomain(self):
        return self.domain

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self._event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        same = [
            a is b or (not munet.is_tensor(a) and not munet.is_tensor(b) and a == b)
            for a, b in ((self.loc, other.loc), (self.scale, other.scale))
        ]
        return all(same)

    __hash__ = object.__hash__

    @property
    def sign(self):
        return (
            self.scale.sign() if munet.is_tensor(self.scale) else (1 if self.scale > 0 else -1 if self.scale < 0 else 0)
        )

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if isinstance(self.scale, numbers.Real):
            result = munet.full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self._event_dim:
            result = sum_rightmost(result, self._event_dim)
            shape = shape[: len(shape) - self._event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return munet.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))

    def inverse_shape(self, shape):
        return munet.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))


class SoftmaxTransform(_ParameterFreeTransform):
    """``y = softmax(x)`` over the last dim; not bijective (no log-det-Jacobian, as PyTorch)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        logprobs = x
        probs = (logprobs - logprobs.max(-1, keepdim=True).values).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        raise ValueError("SoftmaxTransform is not bijective: it has no log_abs_det_jacobian")

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape


class StickBreakingTransform(_ParameterFreeTransform):
    """Map ``R^(K-1)`` onto the K-simplex by stick breaking (bijective)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def _offset(self, x):
        k = x.shape[-1]
        return munet.arange(k, 0, -1, dtype=x.dtype, device=x.device)

    def _call(self, x):
        z = _clipped_sigmoid(x - self._offset(x).log())
        z_cumprod = (1 - z).cumprod(-1)
        ones = munet.ones(tuple(x.shape[:-1]) + (1,), dtype=x.dtype, device=x.device)
        return munet.cat([z, ones], -1) * munet.cat([ones, z_cumprod], -1)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        offset = y.shape[-1] - munet.arange(1, y.shape[-1], dtype=y.dtype, device=y.device)
        sf = 1 - y_crop.cumsum(-1)
        sf = sf.clamp(min=finfo_tiny(y.dtype))
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        offset = self._offset(x)
        x = x - offset.log()
        detj = (-x + munet.nn.functional.logsigmoid(x) + y[..., :-1].log()).sum(-1)
        return detj

    def forward_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class AbsTransform(_ParameterFreeTransform):
    """``y = |x|``; not bijective (its inverse is the identity on the positive half, as PyTorch)."""

    domain = constraints.real
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class SoftplusTransform(_ParameterFreeTransform):
    """``y = log(1 + exp(x))``."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = 1

    def _call(self, x):
        return munet.nn.functional.softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -munet.nn.functional.softplus(-x)


class CumulativeDistributionTransform(Transform):
    """``y = distribution.cdf(x)``: maps the distribution's support onto the unit interval."""

    bijective = True
    codomain = constraints.unit_interval
    sign = 1

    def __init__(self, distribution, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size: int = 1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)
