"""The von Mises (circular normal) distribution ``VonMises(loc, concentration)`` on ``[-pi, pi)``.

``log I0`` and ``log I1`` of the normalizer use PyTorch's polynomial approximations (Abramowitz
and Stegun 9.8.1-9.8.4), so densities agree with PyTorch's to rounding. Sampling is Best and
Fisher's rejection sampler, run in float64 as PyTorch does.
"""

import math

import munet

from . import constraints
from .elementwise import ElementwiseDistribution
from .utils import lazy_property

_I0_COEF_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813]
_I0_COEF_LARGE = [
    0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537, -0.01647633, 0.00392377,
]  # fmt: skip
_I1_COEF_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411]
_I1_COEF_LARGE = [
    0.39894228, -0.03988024, -0.00362018, 0.00163801, -0.01031555, 0.02282967, -0.02895312, 0.01787654, -0.00420059,
]  # fmt: skip
_COEF_SMALL = [_I0_COEF_SMALL, _I1_COEF_SMALL]
_COEF_LARGE = [_I0_COEF_LARGE, _I1_COEF_LARGE]


def _eval_poly(y, coef):
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


def log_modified_bessel_fn(x, order: int = 0):
    """``log I_order(x)`` for ``x > 0`` and order 0 or 1 (PyTorch's approximation)."""
    if order not in (0, 1):
        raise ValueError(f"log_modified_bessel_fn: order must be 0 or 1, got {order}")
    y = (x / 3.75) ** 2
    small = _eval_poly(y, _COEF_SMALL[order])
    if order == 1:
        small = x.abs() * small
    small = small.log()
    safe_x = x.clamp(min=3.75)  # the large-x branch is evaluated where x >= 3.75 only (no nan gradients)
    large = safe_x - 0.5 * safe_x.log() + _eval_poly(3.75 / safe_x, _COEF_LARGE[order]).log()
    return munet.where(x < 3.75, small, large)


def _rejection_sample(loc, concentration, proposal_r, shape):
    x = munet.zeros(shape, dtype=loc.dtype, device=loc.device)
    done = munet.zeros(shape, dtype=munet.bool, device=loc.device)
    while not bool(done.all()):
        u1, u2, u3 = munet.rand((3,) + tuple(shape), dtype=loc.dtype, device=loc.device).unbind()
        z = munet.cos(math.pi * u1)
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | (((c / u2).log() + 1 - c) >= 0)
        x = munet.where(accept & ~done, (u3 - 0.5).sign() * f.acos(), x)
        done = done | accept
    return munet.remainder(x + math.pi + loc, 2 * math.pi) - math.pi


class VonMises(ElementwiseDistribution):
    """Von Mises with mean direction ``loc`` and concentration ``concentration``; no rsample (as PyTorch)."""

    _parameters = ("loc", "concentration")
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self._set_parameters(validate_args, loc=loc, concentration=concentration)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * munet.cos(value - self.loc)
        return log_prob - math.log(2 * math.pi) - log_modified_bessel_fn(self.concentration, order=0)

    @lazy_property
    def _proposal_r(self):
        kappa = self.concentration.double()
        tau = 1 + (1 + 4 * kappa**2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        proposal_r = (1 + rho**2) / (2 * rho)
        return munet.where(kappa < 1e-5, 1 / kappa + kappa, proposal_r)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with munet.no_grad():
            loc, kappa = self.loc.detach().double(), self.concentration.detach().double()
            draws = _rejection_sample(loc, kappa, self._proposal_r.detach(), shape)
            return draws.to(self.loc.dtype)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        log_i1 = log_modified_bessel_fn(self.concentration, order=1)
        return 1 - (log_i1 - log_modified_bessel_fn(self.concentration, order=0)).exp()
