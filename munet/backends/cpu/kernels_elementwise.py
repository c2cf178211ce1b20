"""CPU kernels for elementwise ops (vectorized NumPy).

Operands arrive already promoted to one dtype by the op definitions; Python numbers are
converted to the array operand's dtype here (wrapping like PyTorch's scalar conversion).
float16/bfloat16 compute in float32 and the result is cast back by the caller, as PyTorch
does on CPU. In-place variants (``name_``) write into their first argument.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from munet.backends.cpu.kernels_reduce import LOW_PRECISION, upcast
from munet.backends.cpu.registry import kernel


def _compute(x):
    """Upcast float16/bfloat16 arrays to float32; other arrays and numbers pass through."""
    return upcast(x) if isinstance(x, np.ndarray) else x


def operands(*args):
    """Compute-dtype arrays for all operands: Python numbers take the array operands' dtype."""
    for a in args:
        if type(a) is not np.ndarray or a.dtype in LOW_PRECISION:
            break
    else:
        return args  # the common case: arrays of one computable dtype, nothing to convert
    args = [_compute(a) for a in args]
    dtype = next((a.dtype for a in args if isinstance(a, np.ndarray)), None)
    if dtype is None:
        return [np.asarray(a) for a in args]
    return [a if isinstance(a, np.ndarray) or a is None else _scalar(a, dtype) for a in args]


def _scalar(value, dtype):
    if dtype.kind == "f" and type(value) is float:
        with np.errstate(over="ignore"):
            return dtype.type(value)  # a NumPy scalar: NEP 50 keeps the array's dtype
    if dtype.kind in "iu" and isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        bits = 8 * dtype.itemsize
        return np.array(int(value) & ((1 << bits) - 1), dtype=np.uint64).astype(dtype)
    with np.errstate(over="ignore"):
        return np.array(value).astype(dtype)


def _ew(*names):
    """Register a kernel whose NumPy operands are converted by ``operands``."""

    def register(fn):
        def run(*args, **attrs):
            with np.errstate(all="ignore"):
                return fn(*operands(*args), **attrs)

        kernel(*names)(run)
        return fn

    return register


# unary functions of floats ---------------------------------------------------------------------------

_UNARY = {
    "exp2": np.exp2,
    "expm1": np.expm1,
    "log2": np.log2,
    "log10": np.log10,
    "log1p": np.log1p,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "frac": lambda x: x - np.trunc(x),
    "deg2rad": lambda x: x * np.asarray(math.pi / 180, x.dtype),
    "rad2deg": lambda x: x * np.asarray(180 / math.pi, x.dtype),
}

for _name, _fn in _UNARY.items():
    _ew(_name)(_fn)


@_ew("reciprocal")
def reciprocal(x):
    return np.asarray(1, x.dtype) / x


@_ew("sigmoid")
def sigmoid(x):
    # exp of a non-positive number only: no overflow for large |x|.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


@_ew("abs")
def abs_(x):
    return np.abs(x)


@_ew("sign")
def sign(x):
    if x.dtype == np.bool_:
        return x.copy()
    # PyTorch: sign(nan) == 0.
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


@_ew("floor")
def floor(x):
    return np.floor(x) if x.dtype.kind == "f" else x.copy()


@_ew("ceil")
def ceil(x):
    return np.ceil(x) if x.dtype.kind == "f" else x.copy()


@_ew("trunc")
def trunc(x):
    return np.trunc(x) if x.dtype.kind == "f" else x.copy()


@_ew("round")
def round_(x, *, decimals=0):
    if x.dtype.kind != "f":
        return x.copy()
    if decimals == 0:
        return np.rint(x)
    if decimals > 0:
        scale = np.asarray(10.0**decimals, x.dtype)
        return np.rint(x * scale) / scale
    scale = np.asarray(10.0 ** (-decimals), x.dtype)
    return np.rint(x / scale) * scale


@_ew("signbit")
def signbit(x):
    return np.signbit(x) if x.dtype.kind == "f" else (x < 0)


def _float_test(test, integer_answer: bool):
    """``test`` on floating arrays; an integer or bool array answers ``integer_answer`` everywhere."""

    def run(x):
        return test(x) if x.dtype.kind == "f" else np.full(x.shape, integer_answer, np.bool_)

    return run


for _name, _test, _integer_answer in (
    ("isnan", np.isnan, False),
    ("isinf", np.isinf, False),
    ("isposinf", np.isposinf, False),
    ("isneginf", np.isneginf, False),
    ("isfinite", np.isfinite, True),
):
    _ew(_name)(_float_test(_test, _integer_answer))


@kernel("nan_to_num")
def nan_to_num(x, *, nan, posinf, neginf):
    if x.dtype.kind != "f" and x.dtype not in LOW_PRECISION:
        return x.copy()
    info = ml_dtypes.finfo(x.dtype)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    y = _compute(x)
    return np.nan_to_num(y, nan=nan, posinf=posinf, neginf=neginf)


# erf, erfc, erfinv (no SciPy) --------------------------------------------------------------------------
# erf on |x| < 2 from the positive-term series erf(x) = 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (2n+1)!!
# (no cancellation); erfc on x >= 1.5 from its continued fraction (Abramowitz & Stegun 7.1.14),
# evaluated bottom-up at a fixed depth. Both reach ~1e-15 relative error in float64.

_SERIES_TERMS = 60
_CF_DEPTH = 80
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


def _exp_neg_square(x):
    """exp(-x*x) without the rounding error of x*x (split x into a short head and a tail)."""
    head = np.round(x * 16.0) / 16.0
    tail = x - head
    return np.where(np.isinf(x), 0.0, np.exp(-head * head) * np.exp(-tail * (x + head)))


def _erf_series(x):
    term = x.copy()
    total = x.copy()
    x2 = 2.0 * x * x
    for n in range(1, _SERIES_TERMS):
        term = term * x2 / (2 * n + 1)
        total = total + term
    return 2.0 * _INV_SQRT_PI * np.exp(-x * x) * total


def _erfc_fraction(a):
    """erfc(a) for a >= 1.5."""
    t = a.copy()
    for k in range(_CF_DEPTH, 0, -1):
        t = a + (0.5 * k) / t
    return _INV_SQRT_PI * _exp_neg_square(a) / t


def _erf64(x):
    a = np.abs(x)
    small = a < 2.0
    inner = _erf_series(np.where(small, x, 0.0))
    outer = np.sign(x) * (1.0 - _erfc_fraction(np.where(small, 2.0, a)))
    return np.where(small, inner, np.where(np.isnan(x), x, outer))


def _erfc64(x):
    a = np.abs(x)
    small = a < 1.5
    inner = 1.0 - _erf_series(np.where(small, x, 0.0))
    tail = _erfc_fraction(np.where(small, 1.5, a))
    outer = np.where(x < 0, 2.0 - tail, tail)
    return np.where(small, inner, np.where(np.isnan(x), x, outer))


# Single precision needs far fewer passes: erfc from the Chebyshev fit of Numerical Recipes
# (relative error < 1.2e-7 for every x) and, for |x| < 0.5 where 1 - erfc would cancel, nine
# Taylor terms; both in float64, so float32/16-bit results are within one ulp.
_ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
             -0.82215223, 0.17087277)  # fmt: skip


def _erfc_fit(a):
    """erfc(a) for a >= 0 to ~1e-7 relative."""
    t = 1.0 / (1.0 + 0.5 * a)
    poly = _ERFC_FIT[-1]
    for c in reversed(_ERFC_FIT[:-1]):
        poly = c + t * poly
    return t * np.exp(-a * a + poly)


def _erf_taylor(x):
    """erf(x) for |x| < 0.5: sum of (-1)^n x^(2n+1) / (n! (2n+1))."""
    x2 = x * x
    term = x.copy()
    total = x.copy()
    for n in range(1, 10):
        term = term * -x2 / n
        total = total + term / (2 * n + 1)
    return 2.0 * _INV_SQRT_PI * total


def _erf_single(x):
    small = np.abs(x) < 0.5
    outer = np.sign(x) * (1.0 - _erfc_fit(np.abs(x)))
    return np.where(small, _erf_taylor(np.where(small, x, 0.0)), np.where(np.isnan(x), x, outer))


def _erfc_single(x):
    tail = _erfc_fit(np.abs(x))
    return np.where(np.isnan(x), x, np.where(x < 0, 2.0 - tail, tail))


def _single_precision(x) -> bool:
    """float32, float16 and bfloat16 arrays take the fast path; float64 keeps full precision."""
    dtype = getattr(x, "dtype", None)
    return dtype is not None and dtype != np.float64


@kernel("erf")
def erf(x):
    with np.errstate(all="ignore"):
        if _single_precision(x):
            return _erf_single(np.asarray(x, np.float64))
        return _erf64(np.asarray(x, np.float64))


@kernel("erfc")
def erfc(x):
    with np.errstate(all="ignore"):
        if _single_precision(x):
            return _erfc_single(np.asarray(x, np.float64))
        return _erfc64(np.asarray(x, np.float64))


def _poly(coeffs, x):
    out = np.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        out = out * x + c
    return out


def _erfinv64(y):
    """Giles' single-precision approximation, refined by Newton steps (float64)."""
    w = -np.log((1.0 - y) * (1.0 + y))
    small = w < 5.0
    ws = np.where(small, w - 2.5, 0.0)
    wl = np.where(small, 3.0, np.sqrt(np.where(small, 3.0, w)) - 3.0)
    ps = _poly(
        (
            2.81022636e-08,
            3.43273939e-07,
            -3.5233877e-06,
            -4.39150654e-06,
            0.00021858087,
            -0.00125372503,
            -0.00417768164,
            0.246640727,
            1.50140941,
        ),
        ws,
    )
    pl = _poly(
        (
            -0.000200214257,
            0.000100950558,
            0.00134934322,
            -0.00367342844,
            0.00573950773,
            -0.0076224613,
            0.00943887047,
            1.00167406,
            2.83297682,
        ),
        wl,
    )
    x = np.where(small, ps, pl) * y
    # Newton on erf(x) = y near 0; toward the tails on log erfc(|x|) = log(1 - |y|) (1 - |y| is exact
    # for |y| >= 0.5, and the logarithm keeps Newton's steps well-scaled).
    a, tail = np.abs(y), np.abs(y) >= 0.5
    for _ in range(3):
        density = 2.0 * _INV_SQRT_PI * _exp_neg_square(x)
        upper = _erfc64(np.abs(x))
        tail_step = np.sign(y) * (np.log(upper) - np.log(1.0 - a)) * upper / density
        x = np.where(tail, x + tail_step, x - (_erf64(x) - y) / density)
    x = np.where(np.abs(y) == 1.0, np.copysign(np.inf, y), x)
    return np.where(np.abs(y) > 1.0, np.nan, x)


@kernel("erfinv")
def erfinv(x):
    with np.errstate(all="ignore"):
        return _erfinv64(np.asarray(x, np.float64))


# binary --------------------------------------------------------------------------------------------------


def _check_int_divisor(b):
    if b.dtype.kind in "iub" and np.any(b == 0):
        raise RuntimeError("ZeroDivisionError")


@_ew("div_floor")
def div_floor(a, b):
    _check_int_divisor(b)
    if a.dtype.kind == "f":
        return np.where(b == 0, a / b, np.floor_divide(a, b))
    return np.floor_divide(a, b)


@_ew("div_trunc")
def div_trunc(a, b):
    _check_int_divisor(b)
    if a.dtype.kind == "f":
        return np.trunc(a / b)
    q = np.floor_divide(a, b)
    # Floor and trunc differ when the signs differ and the division is inexact.
    return q + ((q < 0) & (q * b != a)).astype(q.dtype)


@_ew("remainder")
def remainder(a, b):
    _check_int_divisor(b)
    if a.dtype.kind == "f":
        # PyTorch: a - b * floor(a / b), then adjusted into the sign of b.
        r = np.fmod(a, b)
        return np.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
    return np.remainder(a, b)


@_ew("fmod")
def fmod(a, b):
    _check_int_divisor(b)
    return np.fmod(a, b)


@_ew("pow")
def pow_(a, b):
    if a.dtype == np.bool_:
        return a | ~b
    if a.dtype.kind in "iu":
        # Negative integer exponents: 1 ** n == 1, (-1) ** n == +-1, anything else truncates to 0.
        neg = b < 0
        safe = np.power(a, np.where(neg, 0, b))
        odd = (np.abs(b) % 2) == 1
        special = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(a.dtype)
        return np.where(neg, special, safe)
    return np.power(a, b)


@_ew("atan2")
def atan2(a, b):
    return np.arctan2(a, b)


@_ew("hypot")
def hypot(a, b):
    return np.hypot(a, b)


@_ew("copysign")
def copysign(a, b):
    return np.copysign(a, b)


@_ew("xlogy")
def xlogy(a, b):
    return np.where((a == 0) & ~np.isnan(b), np.zeros((), a.dtype), a * np.log(b))


@_ew("heaviside")
def heaviside(a, b):
    return np.where(a == 0, b, (a > 0).astype(a.dtype))


@_ew("maximum")
def maximum(a, b):
    return np.maximum(a, b)


@_ew("minimum")
def minimum(a, b):
    return np.minimum(a, b)


@_ew("fmax")
def fmax(a, b):
    return np.fmax(a, b)


@_ew("fmin")
def fmin(a, b):
    return np.fmin(a, b)


@_ew("clamp")
def clamp(x, lo, hi):
    out = x
    if lo is not None:
        out = np.maximum(out, lo)
    if hi is not None:
        out = np.minimum(out, hi)
    return out.copy() if out is x else out


@kernel("where")
def where(condition, a, b):
    a, b = operands(a, b)
    return np.where(condition, a, b)


# comparisons, logical and bitwise ------------------------------------------------------------------------

for _name, _fn in {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}.items():
    _ew(_name)(_fn)


def _truth(x):
    return x if x.dtype == np.bool_ else (_compute(x) != 0)


def _logical(ufunc):
    def run(*args):
        return ufunc(*(_truth(a) for a in args))

    return run


for _name, _fn in {
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
    "logical_not": np.logical_not,
}.items():
    kernel(_name)(_logical(_fn))


for _name, _fn in {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}.items():
    _ew(_name)(_fn)


@_ew("bitwise_not")
def bitwise_not(a):
    return np.logical_not(a) if a.dtype == np.bool_ else np.invert(a)


@_ew("bitwise_left_shift")
def bitwise_left_shift(a, b):
    bits = 8 * a.dtype.itemsize
    out_of_range = (b < 0) | (b >= bits)
    shifted = np.left_shift(a, np.where(out_of_range, 0, b).astype(a.dtype))
    return np.where(out_of_range, np.zeros((), a.dtype), shifted)


@_ew("bitwise_right_shift")
def bitwise_right_shift(a, b):
    bits = 8 * a.dtype.itemsize
    out_of_range = (b < 0) | (b >= bits)
    shifted = np.right_shift(a, np.where(out_of_range, bits - 1, b).astype(a.dtype))
    if a.dtype.kind == "u":
        return np.where(out_of_range, np.zeros((), a.dtype), shifted)
    return shifted
