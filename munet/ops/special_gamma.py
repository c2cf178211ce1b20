"""The regularized incomplete gamma functions ``igamma`` (``special.gammainc``, ``P(a, x)``) and
``igammac`` (``special.gammaincc``, ``Q(a, x) = 1 - P(a, x)``), and the scaled complementary error
function ``special.erfcx``, as ops defined by decompositions in public ops with analytic gradients.

``igamma``/``igammac`` follow PyTorch's (Cephes') choice of method per element: the power series
of DLMF 8.11.4 for ``P``, the series 8.7.3 for ``Q`` at small ``x`` and the continued fraction 8.9.2
for ``Q`` at ``x > a``, with ``x^a e^-x / gamma(a)`` from Lanczos' approximation near ``x = a``.
and Temme's uniform asymptotic expansion (DLMF 8.12) for ``a`` above 20 within 30% of ``x``
(closer above ``a = 200``). The iterations run until every element has converged (at most 2000, PyTorch's cap), which
is read on the host, so these two cannot be compiled by ``munet.compile``. Their gradient is
defined for ``x`` only; for ``a`` PyTorch's is not implemented and MuNet raises as PyTorch does.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet.ops._registry import Meta, apply, define
from munet.ops._utils import broadcast_shapes, float_result_type, is_tensor, reduce_grad
from munet.ops.creation import scalar_tensor
from munet.ops.elementwise import _float_input, _out, where
from munet.ops.elementwise_math import erfc, expm1, log1p
from munet.ops.special import lgamma
from munet.ops.temme_coefficients import TEMME_D

__all__ = ["igamma", "igammac"]
__tensor_methods__ = ["igamma", "igamma_", "igammac", "igammac_"]
__special__ = ["gammainc", "gammaincc", "erfcx"]

_MAX_ITERATIONS = 2000
_CHECK_EVERY = 8  # iterations between the host reads that end a loop once every element converged
_LANCZOS_G = 6.024680040776729583740234375
_LANCZOS_NUM = (0.006061842346248906525783753964555936883222, 0.5098416655656676188125178644804694509993,
                19.51992788247617482847860966235652136208, 449.9445569063168119446858607650988409623,
                6955.999602515376140356310115515198987526, 75999.29304014542649875303443598909137092,
                601859.6171681098786670226533699352302507, 3481712.15498064590882071018964774556468,
                14605578.08768506808414169982791359218571, 43338889.32467613834773723740590533316085,
                86363131.28813859145546927288977868422342, 103794043.1163445451906271053616070238554,
                56906521.91347156388090791033559122686859)  # fmt: skip
_LANCZOS_DENOM = (1.0, 66.0, 1925.0, 32670.0, 357423.0, 2637558.0, 13339535.0, 45995730.0, 105258076.0,
                  150917976.0, 120543840.0, 39916800.0, 0.0)  # fmt: skip


def _machine_epsilon(dtype) -> float:
    return 1.11022302462515654042e-16 if dtype is D.float64 else 5.9604644775390625e-8


def _horner(z, coefficients):
    total = coefficients[0]
    for c in coefficients[1:]:
        total = total * z + c
    return total


def _lanczos_sum_expg_scaled(a):
    """Boost's rational Lanczos sum, evaluated in ``1 / a`` above 1 (as Cephes' ``ratevl``)."""
    large = a.abs() > 1
    y = where(large, 1 / where(large, a, 1.0), a)
    forward = _horner(y, _LANCZOS_NUM) / _horner(y, _LANCZOS_DENOM)
    backward = _horner(y, _LANCZOS_NUM[::-1]) / _horner(y, _LANCZOS_DENOM[::-1])
    return where(large, backward, forward)


def _power_factor(a, x):
    """``x^a e^-x / gamma(a)`` (Cephes' ``igam_fac``): directly away from ``x = a``, else by Lanczos."""
    max_log = 7.09782712893383996843e2 if a.dtype is D.float64 else 88.72283905206835
    log_direct = a * x.log() - x - lgamma(a)
    direct = where(log_direct < -max_log, 0.0, log_direct.exp())
    fac = a + _LANCZOS_G - 0.5
    scale = (fac / math.e).sqrt() / _lanczos_sum_expg_scaled(a)
    moderate = scale * (a - x).exp() * (x / fac).pow(a)
    ratio = (x - a - _LANCZOS_G + 0.5) / fac
    huge = scale * (a * (log1p(ratio) - ratio) + x * (0.5 - _LANCZOS_G) / fac).exp()
    near = where((a < 200) & (x < 200), moderate, huge)
    return where((a - x).abs() > 0.4 * a.abs(), direct, near)


def _converging(active, i: int) -> bool:
    return i % _CHECK_EVERY != _CHECK_EVERY - 1 or bool(active.any())


def _lower_series(a, x, active):
    """``P(a, x)`` by DLMF 8.11.4 where ``active``."""
    eps = _machine_epsilon(a.dtype)
    factor = _power_factor(a, x)
    r, c, total = a, 1.0, 1.0
    for i in range(_MAX_ITERATIONS):
        r = r + 1
        c = c * x / r
        total = total + where(active, c, 0.0)
        active = active & ~(c <= eps * total)
        if not _converging(active, i):
            break
    return where(factor == 0, 0.0, total * factor / a)


def _upper_series(a, x, active):
    """``Q(a, x)`` by DLMF 8.7.3 where ``active`` (small ``x``)."""
    eps = _machine_epsilon(a.dtype)
    fac, total = 1.0, 0.0
    for n in range(1, _MAX_ITERATIONS):
        fac = fac * (-x / n)
        term = fac / (a + n)
        total = total + where(active, term, 0.0)
        active = active & ~(term.abs() <= eps * total.abs())
        if not _converging(active, n):
            break
    log_x = x.log()
    return -expm1(a * log_x - lgamma(1 + a)) - (a * log_x - lgamma(a)).exp() * total


def _upper_continued_fraction(a, x, active):
    """``Q(a, x)`` by DLMF 8.9.2 where ``active`` (``x > a``), with Cephes' rescaling."""
    eps = _machine_epsilon(a.dtype)
    big, big_inverse = (4.503599627370496e15, 2.22044604925031308085e-16) if a.dtype is D.float64 else (
        16777216.0, 5.9604644775390625e-8)  # fmt: skip
    factor = _power_factor(a, x)
    y = 1 - a
    z = x + y + 1
    c = 0.0
    pkm2, qkm2, pkm1, qkm1 = 1.0 + 0 * x, x, x + 1, z * x
    answer = pkm1 / qkm1
    for i in range(_MAX_ITERATIONS):
        c += 1.0
        y = y + 1
        z = z + 2
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        nonzero = qk != 0
        r = pk / where(nonzero, qk, 1.0)
        change = where(nonzero, ((answer - r) / r).abs(), 1.0)
        answer = where(active & nonzero, r, answer)
        rescale = pk.abs() > big
        scale = where(rescale, big_inverse, 1.0)
        pkm2, pkm1, qkm2, qkm1 = pkm1 * scale, pk * scale, qkm1 * scale, qk * scale
        active = active & ~(change <= eps)
        if not _converging(active, i):
            break
    return where(factor == 0, 0.0, answer * factor)


def _temme(a, x, active, *, lower: bool):
    """``P`` (``lower``) or ``Q`` by Temme's expansion (DLMF 8.12.3/8.12.4) where ``active``: ``a`` large and
    ``x`` near ``a``. Each coefficient sums ``d[k][n] eta^n`` until a term is negligible; the series over
    ``k`` stops when its terms stop decreasing or become negligible (Cephes' ``asymptotic_series``)."""
    eps = _machine_epsilon(a.dtype)
    sigma = (x - a) / a
    root = (-2 * (log1p(sigma) - sigma)).clamp_min(0).sqrt()
    eta = where(x > a, root, where(x < a, -root, 0.0))
    sign = -1.0 if lower else 1.0
    result = 0.5 * erfc(sign * eta * (a / 2).sqrt())
    powers = [1.0, eta]
    total, afac, previous = 0.0, 1.0, math.inf
    going = active
    for k in range(len(TEMME_D)):
        ck, inner = TEMME_D[k][0], going
        for n in range(1, len(TEMME_D[k])):
            if n == len(powers):
                powers.append(powers[-1] * eta)
            term = TEMME_D[k][n] * powers[n]
            ck = ck + where(inner, term, 0.0)
            inner = inner & ~(term.abs() < eps * ck.abs())
            if not _converging(inner, n - 1):
                break
        term = ck * afac
        size = term.abs()
        going = going & ~(size > previous)
        total = total + where(going, term, 0.0)
        going = going & ~(size < eps * total.abs())
        previous = where(going, size, previous)
        afac = afac / a
        if not bool(going.any()):
            break
    pi_float32 = 3.1415927410125732  # PyTorch's c10::pi<float>, in every dtype
    return result + sign * (-0.5 * a * eta * eta).exp() * total / (2 * pi_float32 * a).sqrt()


def _incomplete_gamma(a, x, *, upper: bool):
    """PyTorch's ``calc_igamma`` (``upper=False``) or ``calc_igammac``, elementwise."""
    invalid = (x < 0) | (a < 0) | a.isnan() | x.isnan()
    regular = ~invalid & (a != 0) & (x != 0) & ~a.isinf() & ~x.isinf()
    a_s, x_s = where(regular, a, 1.0), where(regular, x, 1.0)
    distance = (x_s - a_s).abs() / a_s
    asymptotic = regular & (
        ((a_s > 20) & (a_s < 200) & (distance < 0.3)) | ((a_s > 200) & (distance < 4.5 / a_s.sqrt()))
    )
    regular = regular & ~asymptotic
    if upper:  # calc_igammac's choice
        by_fraction = regular & (x_s > 1.1) & (x_s >= a_s)
        small_x = -0.4 / where(x_s < 1, x_s, 0.5).log()
        by_lower = (
            regular
            & ~by_fraction
            & (
                ((x_s > 1.1) & (x_s < a_s))
                | ((x_s <= 0.5) & (small_x < a_s))
                | ((x_s > 0.5) & (x_s <= 1.1) & (x_s * 1.1 < a_s))
            )
        )
        by_upper_series = regular & ~by_fraction & ~by_lower
    else:  # calc_igamma: 1 - calc_igammac above x = max(1, a), whose choice there is one of these two
        complement = regular & (x_s > 1) & (x_s > a_s)
        by_fraction = complement & (x_s > 1.1)
        by_upper_series = complement & ~by_fraction
        by_lower = regular & ~complement
    lower = _lower_series(a_s, x_s, by_lower)
    q = where(by_fraction, _upper_continued_fraction(a_s, x_s, by_fraction), _upper_series(a_s, x_s, by_upper_series))
    if upper:
        value, edges = where(by_lower, 1 - lower, q), (0.0, 1.0, 1.0, 0.0)
    else:
        value, edges = where(by_lower, lower, 1 - q), (1.0, 0.0, 0.0, 1.0)
    value = where(asymptotic, _temme(a_s, x_s, asymptotic, lower=not upper), value)
    at_a0, at_x0, at_a_inf, at_x_inf = edges
    result = where(x.isinf(), at_x_inf, value)
    result = where(a.isinf(), where(x.isinf(), math.nan, at_a_inf), result)
    result = where(x == 0, at_x0, result)
    result = where(a == 0, where(x > 0, at_a0, math.nan), result)
    return where(invalid, math.nan, result)


def _binary_meta(a, x):
    return Meta(broadcast_shapes(tuple(a.shape), tuple(x.shape), op="igamma"), a.dtype)


def _incomplete_gamma_backward(name: str, sign: float):
    def backward(ctx, grad):
        if ctx.needs_input_grad[0]:
            raise NotImplementedError(f"the derivative for '{name}: input' is not implemented.")
        a, x = ctx.saved_tensor("self"), ctx.saved_tensor("other")
        density = ((a - 1) * x.log() - x - lgamma(a)).exp()
        return None, reduce_grad(grad * (sign * density), ctx.input_shapes[1])

    return backward


igamma_op = define(
    "igamma",
    inputs=("self", "other"),
    meta=_binary_meta,
    backward=_incomplete_gamma_backward("igamma", 1.0),
    saves=("self", "other"),
    decomposition=lambda a, x: _incomplete_gamma(a, x, upper=False),
)
igammac_op = define(
    "igammac",
    inputs=("self", "other"),
    meta=_binary_meta,
    backward=_incomplete_gamma_backward("igammac", -1.0),
    saves=("self", "other"),
    decomposition=lambda a, x: _incomplete_gamma(a, x, upper=True),
)


def _float_operands(name: str, input, other):
    if not is_tensor(input) and not is_tensor(other):
        raise TypeError(f"{name}: expected at least one tensor operand")
    dtype = float_result_type(input, other)
    device = (input if is_tensor(input) else other).device

    def as_tensor(v):
        return v.to(dtype) if is_tensor(v) else scalar_tensor(float(v), dtype=dtype, device=device)

    return as_tensor(input), as_tensor(other)


def igamma(input, other, *, out=None):
    """The regularized lower incomplete gamma function ``P(input, other)``; NaN for negative arguments."""
    a, x = _float_operands("igamma", input, other)
    return _out(apply(igamma_op, a, x), out)


def igammac(input, other, *, out=None):
    """The regularized upper incomplete gamma function ``Q(input, other) = 1 - P(input, other)``."""
    a, x = _float_operands("igammac", input, other)
    return _out(apply(igammac_op, a, x), out)


def igamma_(self, other):
    return self.copy_(igamma(self.clone(), other))  # the graph keeps the old values, not self


def igammac_(self, other):
    return self.copy_(igammac(self.clone(), other))


gammainc = igamma
gammaincc = igammac

# erfcx ----------------------------------------------------------------------------------------------------

_ERFCX_SWITCH = 2.5  # below: exp(x^2) erfc(x) directly; above: Laplace's continued fraction
_ERFCX_DEPTH = 40  # its terms: float64-exact from 2.5 on


def _erfcx_decomposition(x):
    near = x < _ERFCX_SWITCH
    xn = where(near, x, 0.0)
    direct = (xn * xn).exp() * erfc(xn)
    xf = where(near, _ERFCX_SWITCH, x)
    t = xf
    for k in range(_ERFCX_DEPTH, 0, -1):
        t = xf + (k / 2) / t
    fraction = 1 / (math.sqrt(math.pi) * t)
    return where(near, direct, fraction)


def _erfcx_backward(ctx, grad):
    x, result = ctx.saved_tensor("self"), ctx.saved_tensor("result")
    return grad * (2 * x * result - 2 / math.sqrt(math.pi))


erfcx_op = define(
    "erfcx",
    meta=lambda x: Meta(tuple(x.shape), x.dtype),
    backward=_erfcx_backward,
    saves=("self", "result"),
    decomposition=_erfcx_decomposition,
)


def erfcx(input, *, out=None):
    """The scaled complementary error function ``exp(x^2) erfc(x)``, without its overflow."""
    return _out(apply(erfcx_op, _float_input(input)), out)
