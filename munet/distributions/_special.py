"""Special functions the distributions need, written as composites of public munet ops.

``lgamma`` and ``digamma`` are defined for positive arguments (every distribution here calls
them on concentrations, rates, counts + 1 or degrees of freedom): the argument is shifted up by
``_SHIFT`` with the recurrences ``lgamma(x) = lgamma(x + 1) - log(x)`` and
``digamma(x) = digamma(x + 1) - 1 / x`` and the asymptotic (Stirling) series is evaluated at
``x + _SHIFT``, where its first omitted term is below 1e-12 relative. Their gradients come from
autograd through the composite.
"""

import math

import munet

from .utils import finfo_tiny

_SHIFT = 8
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def lgamma(x):
    """``log(Gamma(x))`` for ``x > 0``."""
    shift = munet.zeros_like(x)
    for k in range(_SHIFT):
        shift = shift + munet.log(x + k)
    z = x + _SHIFT
    inv = 1.0 / z
    inv2 = inv * inv
    series = inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 * (1 / 1680 - inv2 / 1188))))
    return (z - 0.5) * munet.log(z) - z + _HALF_LOG_2PI + series - shift


def digamma(x):
    """``d/dx log(Gamma(x))`` for ``x > 0``."""
    shift = munet.zeros_like(x)
    for k in range(_SHIFT):
        shift = shift + 1.0 / (x + k)
    z = x + _SHIFT
    inv = 1.0 / z
    inv2 = inv * inv
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132))))
    return munet.log(z) - 0.5 * inv - series - shift


def mvlgamma(x, p: int):
    """The multivariate log-gamma ``log Gamma_p(x)``, as ``torch.mvlgamma``."""
    total = p * (p - 1) / 4 * math.log(math.pi)
    for j in range(p):
        total = total + lgamma(x - j / 2)
    return total


def series_terms(x) -> int:
    """How many terms ``sum_n x^n / (a+1)...(a+n)`` needs for float64 accuracy at the largest ``x``."""
    if not x.numel():
        return 0
    largest = max(float(x.max()), 0.0)
    return int(largest + 12 * math.sqrt(largest) + 40)


def gammainc(a, x):
    """The regularized lower incomplete gamma ``P(a, x)`` (``torch.special.gammainc``) for ``a > 0``, ``x >= 0``.

    Evaluated in ``x``'s dtype from the series ``P = x^a e^-x sum_n x^n / Gamma(a + n + 1)``, whose
    terms are positive, so the sum has no cancellation; the number of terms grows with ``max(x)``.
    """
    safe_x = x.clamp(min=finfo_tiny(x.dtype))
    log_x = munet.log(safe_x)
    log_term = a * log_x - safe_x - lgamma(a + 1)
    total = munet.exp(log_term)
    for n in range(1, series_terms(x)):
        log_term = log_term + log_x - munet.log(a + n)
        total = total + munet.exp(log_term)
    return munet.where(x > 0, total.clamp(max=1.0), munet.zeros_like(total))
