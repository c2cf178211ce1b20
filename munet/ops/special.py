"""``torch.special`` functions and the torch-level special functions (``sinc``, ``logaddexp``,
``logaddexp2``, ``ldexp``), as composites of public ops.

Each function is written with public differentiable ops (``where``, ``log``, ``erfc``, ...), so its
gradient, tracing, compilation and every device come from those ops; no new kernel is defined
here. Names listed in ``__special__`` form ``munet.special``; many are PyTorch's aliases of
functions defined elsewhere (``special.expit`` is ``sigmoid``). Integer inputs compute in the
default float dtype, as PyTorch.
"""

from __future__ import annotations

import math

import numpy as np

from munet.ops import _utils
from munet.ops.activation import log_softmax as _log_softmax
from munet.ops.activation import softmax as _softmax
from munet.ops.convert import cast
from munet.ops.creation import scalar_tensor
from munet.ops.elementwise import _float_input, _out, where
from munet.ops.elementwise_math import (  # noqa: F401 - several are re-exported under torch.special's names
    erf,
    erfc,
    erfinv,
    exp2,
    expm1,
    log1p,
    logit,
    round,  # noqa: A004 - PyTorch's name
    sigmoid,
    xlogy,
)
from munet.ops.reduce import all as _all
from munet.ops.reduce import logsumexp as _logsumexp

__all__ = ["sinc", "logaddexp", "logaddexp2", "ldexp", "lgamma", "digamma", "mvlgamma", "i0", "polygamma"]
__tensor_methods__ = ["sinc", "sinc_", "logaddexp", "logaddexp2", "ldexp", "ldexp_", "lgamma", "lgamma_",
                      "digamma", "digamma_", "mvlgamma", "mvlgamma_", "i0", "i0_", "polygamma_"]  # fmt: skip
__special__ = [
    "erf", "erfc", "erfinv", "expit", "logit", "xlogy", "xlog1py", "entr", "sinc", "ndtr", "ndtri",
    "log_ndtr", "log1p", "expm1", "exp2", "softmax", "log_softmax", "logsumexp", "round", "gammaln",
    "digamma", "psi", "multigammaln", "i0", "i0e", "i1", "i1e", "zeta",
    "polygamma",
]  # fmt: skip

expit = sigmoid
_SQRT1_2 = math.sqrt(0.5)
_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_LN2 = math.log(2.0)


def _float_pair(name: str, input, other):
    """Both operands as tensors of their promoted float dtype (a Python number becomes rank 0)."""
    if not _utils.is_tensor(input) and not _utils.is_tensor(other):
        raise TypeError(f"{name}: expected at least one tensor operand, got {type(input).__name__} and "
                        f"{type(other).__name__}")  # fmt: skip
    dtype = _utils.float_result_type(input, other)
    device = (input if _utils.is_tensor(input) else other).device

    def as_tensor(x):
        if _utils.is_tensor(x):
            return x if x.dtype is dtype else cast(x, dtype)
        return scalar_tensor(x, dtype=dtype, device=device)

    return as_tensor(input), as_tensor(other)


def _inplace(name: str, self, fn, *args):
    """``self`` overwritten by ``fn`` of a copy of it (the graph keeps the old values, not ``self``)."""
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"{name}: result type {_float_input(self).dtype.name} can't be cast to the desired output "
                           f"type {self.dtype.name}")  # fmt: skip
    return self.copy_(fn(self.clone(), *args))


# elementwise functions of one tensor ----------------------------------------------------------------------


def sinc(input, *, out=None):
    """Normalized sinc ``sin(pi x) / (pi x)``, 1 at 0."""
    x = _float_input(input)
    zero = x == 0
    px = where(zero, 1.0, x) * math.pi  # 1 where x is 0, so the unused branch has no 0/0 in its gradient
    return _out(where(zero, 1.0, px.sin() / px), out)


def sinc_(self):
    return _inplace("sinc_", self, sinc)


def entr(input, *, out=None):
    """Elementwise entropy ``-x log(x)``: 0 at 0, ``-inf`` for negative ``x``, NaN stays NaN."""
    x = _float_input(input)
    positive = x > 0
    safe = where(positive, x, 1.0)
    result = where(positive, -safe * safe.log(), where(x == 0, 0.0, where(x.isnan(), x, -math.inf)))
    return _out(result, out)


def ndtr(input, *, out=None):
    """The standard normal CDF, ``(1 + erf(x / sqrt(2))) / 2`` (computed with ``erfc``, exact in the tails)."""
    x = _float_input(input)
    return _out(0.5 * erfc(-x * _SQRT1_2), out)


def ndtri(input, *, out=None):
    """Inverse of ``ndtr``: the ``p``-quantile of the standard normal; ``-inf``/``inf`` at 0/1, NaN outside.

    Solved in the lower tail ``q = min(p, 1 - p)`` (then mirrored) by Newton's method on
    ``log_ndtr(x) = log(q)``, which converges from any start since ``log_ndtr`` is concave; the start
    is ``sqrt(2) erfinv(2q - 1)``, or the tail asymptote ``-sqrt(-2 log q - log(-2 log q) - log(2 pi))``
    below ``q = 0.05``. The gradient, through the converged iteration, is ``1 / pdf(x)``.
    """
    p = _float_input(input)
    upper = p > 0.5
    q = where(upper, 1 - p, p)
    inside = (q > 0) & (q <= 0.5)
    qs = where(inside, q, 0.25)
    log_q = qs.log()
    w = -2 * log_q
    tail_start = -(w - w.log() - 2 * _LOG_SQRT_2PI).clamp_min(0).sqrt()
    x = where(qs < 0.05, tail_start, _SQRT2 * erfinv(2 * qs - 1))
    for _ in range(4):
        log_cdf = log_ndtr(x)
        slope = (-0.5 * x * x - _LOG_SQRT_2PI - log_cdf).exp()  # pdf / ndtr, the derivative of log_ndtr
        x = x - (log_cdf - log_q) / slope
    x = where(upper, -x, x)
    edge = where(p == 0, -math.inf, where(p == 1, math.inf, math.nan))
    return _out(where(inside, x, where(p == 0.5, 0.0, edge)), out)


def log_ndtr(input, *, out=None):
    """``log(ndtr(x))``, accurate in both tails: ``log1p(-ndtr(-x))`` for ``x > 0`` and the asymptotic
    series of Mills' ratio below ``x = -10`` (where ``ndtr`` underflows in float32)."""
    x = _float_input(input)
    far = x < -10
    body_x = where(far, -10.0, x)
    positive = body_x > 0
    body = where(positive, log1p(-ndtr(-where(positive, body_x, 1.0))), ndtr(where(positive, -1.0, body_x)).log())
    t = where(far, x, -10.0)
    inv2 = 1 / (t * t)
    series, term = 1.0, 1.0
    for k in range(1, 11):
        term = term * (-(2 * k - 1)) * inv2
        series = series + term
    tail = -0.5 * t * t - (-t).log() - _LOG_SQRT_2PI + series.log()
    return _out(where(far, tail, body), out)


# the gamma function family ----------------------------------------------------------------------------------

_SHIFT = 8.0  # the recurrences below move x up to at least this, where the asymptotic series converge


def _shift_up(x):
    """``(y, steps)``: ``y = x + k >= 8`` with the smallest such ``k >= 0``, and per step a mask and a
    factor: ``x, x + 1, ..., y - 1`` where the mask is set, 1 elsewhere (the recurrences of lgamma and
    digamma, ``x > 0``)."""
    y, steps = x, []
    for _ in range(int(_SHIFT)):
        small = y < _SHIFT
        steps.append((small, where(small, y, 1.0)))
        y = where(small, y + 1, y)
    return y, steps


def _positive(x, fn, fallback=1.0):
    """``fn`` on the positive entries of ``x``; elsewhere ``fn(fallback)``, so no NaN reaches a gradient."""
    return fn(where(x > 0, x, fallback))


def _lgamma_positive(x):
    """``log(gamma(x))`` for ``x > 0``: ``lgamma(x + k) - log(x (x + 1) ... (x + k - 1))`` and Stirling's
    series at ``x + k >= 8`` (the next term is below 1e-11)."""
    y, steps = _shift_up(x)
    product = steps[0][1]
    for _, factor in steps[1:]:
        product = product * factor  # each factor < 8: no overflow
    inv = 1 / y
    inv2 = inv * inv
    series = inv * (
        1 / 12 + inv2 * (-1 / 360 + inv2 * (1 / 1260 + inv2 * (-1 / 1680 + inv2 * (1 / 1188 - inv2 * 691 / 360360))))
    )
    return (y - 0.5) * y.log() - y + _LOG_SQRT_2PI + series - product.log()


def _sin_pi_abs(x):
    """``|sin(pi x)|``, exact at integers (computed on ``x - round(x)``)."""
    return ((x - x.round()) * math.pi).sin().abs()


def lgamma(input, *, out=None):
    """``log|gamma(x)|``; ``inf`` at 0, the negative integers and ``+-inf``. Negative ``x`` uses the
    reflection ``log(pi / |sin(pi x)|) - lgamma(1 - x)``."""
    x = _float_input(input)
    negative = x <= 0
    right = _positive(x, _lgamma_positive)
    reflected = math.log(math.pi) - _sin_pi_abs(x).log() - _lgamma_positive(where(negative, 1 - x, 1.0))
    result = where(negative, reflected, right)
    return _out(where(x.isinf(), math.inf, where(x.isnan(), x, result)), out)


def lgamma_(self):
    return _inplace("lgamma_", self, lgamma)


def _digamma_positive(x):
    """``digamma(x)`` for ``x > 0``: ``digamma(x + k) - sum 1 / (x + i)`` and the asymptotic series."""
    y, steps = _shift_up(x)
    shift = 0.0
    for small, factor in steps:
        shift = shift + where(small, 1 / factor, 0.0)
    inv2 = 1 / (y * y)
    series = inv2 * (
        1 / 12
        - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 * (1 / 132 - inv2 * (691 / 32760 - inv2 / 12)))))
    )
    return y.log() - 0.5 / y - series - shift


def digamma(input, *, out=None):
    """``d/dx log(gamma(x))``: ``-inf`` at 0 and ``inf`` at -0 (as PyTorch), NaN at the negative integers. Negative ``x``
    uses the reflection ``digamma(1 - x) - pi / tan(pi x)``."""
    x = _float_input(input)
    negative = x < 0
    right = _positive(x, _digamma_positive)
    r = where(negative, x - x.round(), 0.5)
    reflected = _digamma_positive(where(negative, 1 - x, 1.0)) - math.pi / (r * math.pi).tan()
    result = where(negative, where(r == 0, math.nan, reflected), right)
    result = where(x == 0, where(x.signbit(), math.inf, -math.inf), where(x.isnan(), x, result))  # +-0: -+inf, as C's
    return _out(where(x == math.inf, math.inf, where(x == -math.inf, math.nan, result)), out)


def digamma_(self):
    return _inplace("digamma_", self, digamma)


psi = digamma
gammaln = lgamma


def multigammaln(input, p: int, *, out=None):
    """Multivariate log-gamma of dimension ``p``: ``p(p-1)/4 log(pi) + sum_j lgamma(x - j/2)``, j < p;
    every element must be greater than ``(p - 1) / 2``."""
    if p < 1:
        raise ValueError(f"multigammaln: p has to be greater than or equal to 1, got {p}")
    x = _float_input(input)
    if x.numel() and not bool(_all(x > (p - 1) / 2)):
        raise ValueError(f"multigammaln: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    result = p * (p - 1) / 4 * math.log(math.pi)
    for j in range(p):
        result = result + lgamma(x - j / 2)
    return _out(result, out)


def mvlgamma(input, p: int, *, out=None):
    """``multigammaln`` under its torch-level name."""
    return multigammaln(input, p, out=out)


def mvlgamma_(self, p: int):
    return _inplace("mvlgamma_", self, multigammaln, p)


# modified Bessel functions of the first kind -----------------------------------------------------------------

# Chebyshev coefficients of exp(-x) I0(x) and exp(-x) I1(x) / x on [0, 8] (A) and of exp(-x) sqrt(x) I0(x),
# exp(-x) sqrt(x) I1(x) on (8, inf) in 32 / x - 2 (B): the Cephes Math Library's, as PyTorch uses
_I0E_A = (
    -4.41534164647933937950e-18,
    3.33079451882223809783e-17,
    -2.43127984654795469359e-16,
    1.71539128555513303061e-15,
    -1.16853328779934516808e-14,
    7.67618549860493561688e-14,
    -4.85644678311192946090e-13,
    2.95505266312963983461e-12,
    -1.72682629144155570723e-11,
    9.67580903537323691224e-11,
    -5.18979560163526290666e-10,
    2.65982372468238665035e-9,
    -1.30002500998624804212e-8,
    6.04699502254191894932e-8,
    -2.67079385394061173391e-7,
    1.11738753912010371815e-6,
    -4.41673835845875056359e-6,
    1.64484480707288970893e-5,
    -5.75419501008210370398e-5,
    1.88502885095841655729e-4,
    -5.76375574538582365885e-4,
    1.63947561694133579842e-3,
    -4.32430999505057594430e-3,
    1.05464603945949983183e-2,
    -2.37374148058994688156e-2,
    4.93052842396707084878e-2,
    -9.49010970480476444210e-2,
    1.71620901522208775349e-1,
    -3.04682672343198398683e-1,
    6.76795274409476084995e-1,
)
_I0E_B = (
    -7.23318048787475395456e-18,
    -4.83050448594418207126e-18,
    4.46562142029675999901e-17,
    3.46122286769746109310e-17,
    -2.82762398051658348494e-16,
    -3.42548561967721913462e-16,
    1.77256013305652638360e-15,
    3.81168066935262242075e-15,
    -9.55484669882830764870e-15,
    -4.15056934728722208663e-14,
    1.54008621752140982691e-14,
    3.85277838274214270114e-13,
    7.18012445138366623367e-13,
    -1.79417853150680611778e-12,
    -1.32158118404477131188e-11,
    -3.14991652796324136454e-11,
    1.18891471078464383424e-11,
    4.94060238822496958910e-10,
    3.39623202570838634515e-9,
    2.26666899049817806459e-8,
    2.04891858946906374183e-7,
    2.89137052083475648297e-6,
    6.88975834691682398426e-5,
    3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)
_I1E_A = (
    2.77791411276104639959e-18,
    -2.11142121435816608115e-17,
    1.55363195773620046921e-16,
    -1.10559694773538630805e-15,
    7.60068429473540693410e-15,
    -5.04218550472791168711e-14,
    3.22379336594557470981e-13,
    -1.98397439776494371520e-12,
    1.17361862988909016308e-11,
    -6.66348972350202774223e-11,
    3.62559028155211703701e-10,
    -1.88724975172282928790e-9,
    9.38153738649577178388e-9,
    -4.44505912879632808065e-8,
    2.00329475355213526229e-7,
    -8.56872026469545474066e-7,
    3.47025130813767847674e-6,
    -1.32731636560394358279e-5,
    4.78156510755005422638e-5,
    -1.61760815825896745588e-4,
    5.12285956168575772895e-4,
    -1.51357245063125314899e-3,
    4.15642294431288815669e-3,
    -1.05640848946261981558e-2,
    2.47264490306265168283e-2,
    -5.29459812080949914269e-2,
    1.02643658689847095384e-1,
    -1.76416518357834055153e-1,
    2.52587186443633654823e-1,
)
_I1E_B = (
    7.51729631084210481353e-18,
    4.41434832307170791151e-18,
    -4.65030536848935832153e-17,
    -3.20952592199342395980e-17,
    2.96262899764595013876e-16,
    3.30820231092092828324e-16,
    -1.88035477551078244854e-15,
    -3.81440307243700780478e-15,
    1.04202769841288027642e-14,
    4.27244001671195135429e-14,
    -2.10154184277266431302e-14,
    -4.08355111109219731823e-13,
    -7.19855177624590851209e-13,
    2.03562854414708950722e-12,
    1.41258074366137813316e-11,
    3.25260358301548823856e-11,
    -1.89749581235054123450e-11,
    -5.58974346219658380687e-10,
    -3.83538038596423702205e-9,
    -2.63146884688951950684e-8,
    -2.51223623787020892529e-7,
    -3.88256480887769039346e-6,
    -1.10588938762623716291e-4,
    -9.76109749136146840777e-3,
    7.78576235018280120474e-1,
)


def chebyshev_power_form(chebyshev_coefficients) -> tuple:
    """Cephes' ``chbevl`` series (highest order first, ``0.5 (b0 - b2)`` at ``y``) as power-series
    coefficients in ``t = y / 2``, highest first. Evaluated by Horner's rule, each step reads only the
    previous one, so a traced graph stays a chain (Clenshaw's two-term recurrence shares every partial
    sum twice). The conversion is exact to 3e-15 relative in float64 over ``t`` in [-1, 1]."""
    c = np.array(chebyshev_coefficients[::-1], dtype=np.float64)
    c[0] *= 0.5
    return tuple(float(v) for v in np.polynomial.chebyshev.cheb2poly(c)[::-1])


def chebyshev_series(y, coefficients):
    """The Chebyshev series of ``coefficients`` (converted by ``chebyshev_power_form``) at ``y`` in [-2, 2]."""
    t = y / 2
    total = coefficients[0]
    for c in coefficients[1:]:
        total = total * t + c
    return total


_I0E_A, _I0E_B, _I1E_A, _I1E_B = (chebyshev_power_form(c) for c in (_I0E_A, _I0E_B, _I1E_A, _I1E_B))


def _scaled_bessel(x, small, large):
    """``(|x| <= 8, exp(-|x|) I(|x|) on [0, 8] / (1 or |x|), exp(-|x|) I(|x|) on (8, inf))`` from the
    series ``small`` and ``large``; NaN where ``x`` is NaN."""
    a = x.abs()
    near = a <= 8
    an = where(near, a, 0.0)
    af = where(near, 16.0, a)
    inner = chebyshev_series(an / 2 - 2, small)
    outer = chebyshev_series(32 / af - 2, large) / af.sqrt()
    return near, a, inner, outer


def i0e(input, *, out=None):
    """Exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)``."""
    x = _float_input(input)
    near, _, inner, outer = _scaled_bessel(x, _I0E_A, _I0E_B)
    return _out(where(x.isnan(), x, where(near, inner, outer)), out)


def i0(input, *, out=None):
    """Modified Bessel function of the first kind of order 0."""
    x = _float_input(input)
    near, a, inner, outer = _scaled_bessel(x, _I0E_A, _I0E_B)
    return _out(where(x.isnan(), x, where(near, inner, outer) * a.exp()), out)


def i0_(self):
    return _inplace("i0_", self, i0)


def i1e(input, *, out=None):
    """Exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I1(x)`` (odd in ``x``)."""
    x = _float_input(input)
    near, _, inner, outer = _scaled_bessel(x, _I1E_A, _I1E_B)
    return _out(where(x.isnan(), x, where(near, inner * x, where(x < 0, -outer, outer))), out)


def i1(input, *, out=None):
    """Modified Bessel function of the first kind of order 1 (odd in ``x``)."""
    x = _float_input(input)
    near, a, inner, outer = _scaled_bessel(x, _I1E_A, _I1E_B)
    return _out(where(x.isnan(), x, where(near, inner * x, where(x < 0, -outer, outer)) * a.exp()), out)


# Hurwitz zeta and polygamma --------------------------------------------------------------------------------

# (2k)! / B_2k, the Euler-Maclaurin denominators (Cephes' zeta.c, as PyTorch)
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)  # fmt: skip
_ZETA_MAX_SHIFT = 10_000


def zeta(input, other, *, out=None):
    """Hurwitz zeta ``sum_k (other + k) ** -input``: ``inf`` at ``input == 1`` and at ``other`` a
    non-positive integer, NaN for ``input < 1`` and for negative ``other`` with non-integer ``input``.

    Euler-Maclaurin summation after at least 9 terms and past ``other + terms > 9`` (Cephes' method):
    a negative ``other`` needs more terms, so its count is read from the data (one host read).
    """
    x, q = _float_pair("zeta", input, other)
    lowest = float(q.amin()) if q.numel() else 0.0
    extra = 0 if not lowest < 0 else math.ceil(-lowest)  # NaN and -inf add nothing: they end as NaN / inf
    if extra > _ZETA_MAX_SHIFT:
        raise ValueError(f"zeta: other must be greater than -{_ZETA_MAX_SHIFT}, got {lowest}")
    terms = 9 + extra
    total = q.pow(-x)
    for k in range(1, terms + 1):
        total = total + (q + k).pow(-x)
    w = q + terms
    b = w.pow(-x)
    total = total + b * w / (x - 1) - 0.5 * b
    rising, k = 1.0, 0.0
    for denominator in _ZETA_A:
        rising = rising * (x + k)
        b = b / w
        total = total + rising * b / denominator
        rising = rising * (x + k + 1)
        b = b / w
        k += 2
    pole = (q <= 0) & (q == q.floor())
    invalid = (x < 1) | ((q < 0) & (x != x.floor()))
    return _out(where(pole | (x == 1), math.inf, where(invalid, math.nan, total)), out)


def polygamma(n: int, input, *, out=None):
    """The ``n``-th derivative of ``digamma``: ``(-1) ** (n + 1) n! zeta(n + 1, x)`` for ``n >= 1``."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative integer, got {n!r}")
    if n == 0:
        return digamma(input, out=out)
    x = _float_input(input)
    scale = (-1.0) ** (n + 1) * math.factorial(n)
    result = scale * zeta(scalar_tensor(float(n + 1), dtype=x.dtype, device=x.device), x)
    if n == 1:  # PyTorch's trigamma gives 0 at inf; its zeta (n >= 2) gives NaN there
        result = where(x == math.inf, 0.0, result)
    return _out(result, out)


def polygamma_(self, n: int):
    return _inplace("polygamma_", self, lambda x: polygamma(n, x))


def _polygamma_method(self, n: int):
    """``Tensor.polygamma(n)``: the tensor comes first, unlike ``munet.polygamma(n, input)``."""
    return polygamma(n, self)


__tensor_method_impls__ = {"polygamma": _polygamma_method}


# elementwise functions of two operands --------------------------------------------------------------------


def xlog1py(input, other, *, out=None):
    """``input * log1p(other)``, 0 where ``input`` is 0 unless ``other`` is NaN (as ``xlogy``)."""
    x, y = _float_pair("xlog1py", input, other)
    log1p_y = log1p(y)
    return _out(x * where((x == 0) & ~y.isnan() & ~log1p_y.isfinite(), 0.0, log1p_y), out)


def logaddexp(input, other, *, out=None):
    """``log(exp(input) + exp(other))`` without overflow: ``max + log1p(exp(-|a - b|))``."""
    a, b = _float_pair("logaddexp", input, other)
    return _out(_log_add(a, b, lambda d: log1p((-d).exp())), out)


def logaddexp2(input, other, *, out=None):
    """``log2(2**input + 2**other)`` without overflow: ``max + log2(1 + 2**-|a - b|)``."""
    a, b = _float_pair("logaddexp2", input, other)
    return _out(_log_add(a, b, lambda d: log1p(exp2(-d)) / _LN2), out)


def _log_add(a, b, log_one_plus):
    """``max(a, b) + log_one_plus(|a - b|)``; equal infinities give themselves (``inf - inf`` would be NaN)."""
    same_inf = (a == b) & a.isinf()
    a_safe, b_safe = where(same_inf, 0.0, a), where(same_inf, 0.0, b)
    combined = a_safe.maximum(b_safe) + log_one_plus((a_safe - b_safe).abs())
    return where(same_inf, a, combined)


def ldexp(input, other, *, out=None):
    """``input * 2**other``."""
    x, e = _float_pair("ldexp", input, other)
    return _out(x * exp2(e), out)


def ldexp_(self, other):
    return _inplace("ldexp_", self, ldexp, other)


# reductions and softmax: torch.special's signatures --------------------------------------------------------


def softmax(input, dim: int, *, dtype=None):
    """``softmax`` along ``dim``; ``dtype`` casts the input first."""
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim: int, *, dtype=None):
    """``log_softmax`` along ``dim``; ``dtype`` casts the input first."""
    return _log_softmax(input, dim, dtype=dtype)


def logsumexp(input, dim, keepdim: bool = False, *, out=None):
    """``log(sum(exp(input)))`` over ``dim``, computed stably."""
    return _out(_logsumexp(input, dim, keepdim), out)
