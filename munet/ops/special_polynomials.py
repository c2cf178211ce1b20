"""``torch.special``'s orthogonal polynomials of degree ``n`` (elementwise; ``n`` a tensor or a
number, truncated to an integer): Chebyshev ``T, U, V, W`` and their shifted forms on [0, 1],
physicists' and probabilists' Hermite ``H, He``, Laguerre ``L`` and Legendre ``P``.

Each follows PyTorch's algorithm: its three-term recurrence, with PyTorch's closed forms at the
interval ends and (for the Chebyshev families) its trigonometric form for large ``n`` inside the
interval. The recurrence is a Python loop over the degree, up to the largest ``n`` an element
needs it for (read from the data when ``n`` is a tensor, so such a call cannot be compiled); each
step keeps the two previous values, masked per element where its own degree is reached. As in
PyTorch, there is no gradient: results never require grad.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet.ops._utils import broadcast_shapes, float_result_type, is_tensor
from munet.ops.creation import scalar_tensor
from munet.ops.elementwise import _out, where

__special__ = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]  # fmt: skip


def _operands(name: str, input, n):
    """``(x, degree, n_max)``: ``x`` a float tensor outside autograd, ``degree`` the integer-valued
    degrees (a float tensor, or a Python int), ``n_max`` the largest degree (an int)."""
    if not is_tensor(input) and not is_tensor(n):
        raise TypeError(f"{name}: expected at least one tensor operand, got {type(input).__name__} and "
                        f"{type(n).__name__}")  # fmt: skip
    dtype = float_result_type(input, n)
    device = (input if is_tensor(input) else n).device
    x = input.detach().to(dtype) if is_tensor(input) else scalar_tensor(float(input), dtype=dtype, device=device)
    if not is_tensor(n):
        return x, int(n), int(n)
    degree = n.detach().to(dtype)
    finite = degree.isfinite()
    degree = where(finite, degree.trunc(), -1.0)  # NaN or infinite degrees: as negative ones (PyTorch's int cast)
    n_max = int(degree.amax()) if degree.numel() else 0
    return x, degree, n_max


def _recurrence(first, second, step, degree, n_max: int, start: int):
    """The value at each element's degree ``n >= 2`` of the recurrence ``p_j = step(k, p_{j-1}, p_{j-2})``
    from ``p_0 = first`` and ``p_1 = second``, where ``k = start + j - 2`` is PyTorch's loop counter;
    elements of lower degree keep their last value (a tensor ``degree`` masks each step)."""
    p, q = first, second
    for j in range(2, n_max + 1):
        r = step(start + j - 2, q, p)
        if is_tensor(degree):
            going = degree >= j
            p, q = where(going, q, p), where(going, r, q)
        else:
            p, q = q, r
    return q


def _as_tensor(value, like):
    return value if is_tensor(value) else scalar_tensor(float(value), dtype=like.dtype, device=like.device)


def _steps_needed(degree, n_max: int, uses_recurrence) -> int:
    """The largest degree among the elements ``uses_recurrence`` selects (all of them for a number)."""
    if not is_tensor(degree) or not degree.numel():
        return n_max
    needed = where(uses_recurrence, degree, 0.0)
    return int(needed.amax()) if needed.numel() else 0


def _chebyshev(name: str, input, n, *, kind: str, shifted: bool, out):
    """PyTorch's ``[shifted_]chebyshev_polynomial_{t,u,v,w}``; ``y`` is the argument on [-1, 1]."""
    x, degree, n_max = _operands(name, input, n)
    n_f = _as_tensor(degree, x)
    y = x + x - 1 if shifted else x
    two_y = y + y
    second = {"t": y, "u": two_y, "v": two_y - 1, "w": two_y + 1}[kind]
    trig_after = ({"t": 6, "u": 6, "v": 6, "w": 4} if shifted else {"t": 6, "u": 8, "v": 8, "w": 8})[kind]
    inside = y.abs() < 1
    trig = (n_f > trig_after) & inside
    high, low = (x == 1, x == 0) if shifted else (x == 1, x == -1)
    steps = _steps_needed(degree, n_max, ~trig & ~high & ~low)
    recurrence = _recurrence(_as_tensor(1.0, x), second, lambda k, q, p: two_y * q - p, degree, steps, 2)
    theta = where(inside, y, 0.0).acos()
    sign = where(n_f.fmod(2) == 0, 1.0, -1.0)
    if kind == "t":
        trig_value = (n_f * theta).cos()
        ends = [(high, 1.0), (low, sign)]
    elif kind == "u":
        s = theta.sin()
        at_pole = (n_f + 1) * ((n_f + 1) * theta).cos() / where(y == 0, 1.0, y)
        trig_value = where(s != 0, ((n_f + 1) * theta).sin() / where(s != 0, s, 1.0), at_pole)
        ends = [(high, n_f + 1), (low, sign * (n_f + 1))]
    elif kind == "v":
        half = theta / 2
        trig_value = where(half.sin() != 1, ((n_f + 0.5) * theta).cos() / half.cos(), sign * (n_f + n_f + 1))
        ends = [(high, 1.0), (low, sign * (n_f + n_f + 1))]
    else:
        half = theta / 2
        fallback = sign if shifted else where(x > 0, n_f + n_f + 1, sign)
        trig_value = where(half.cos() != 1, ((n_f + 0.5) * theta).sin() / where(half.sin() != 0, half.sin(), 1.0),
                           fallback)  # fmt: skip
        ends = [(high, n_f + n_f + 1), (low, sign)]
    cases = [(n_f < 0, 0.0)] + ends + [(trig, trig_value), (n_f == 0, 1.0), (n_f == 1, second)]
    return _out(_select(x, cases, recurrence), out)


def _select(x, cases, default):
    """``cases`` (condition, value) pairs in priority order, then ``default``, as one ``where`` chain."""
    result = default
    for condition, value in reversed(cases):
        result = where(condition, value, result)
    shape = broadcast_shapes(tuple(result.shape), tuple(x.shape), op="polynomial")
    return result if tuple(result.shape) == shape else result.expand(shape).clone()  # x * 0 would be NaN at inf


def chebyshev_polynomial_t(input, n, *, out=None):
    """Chebyshev polynomial of the first kind ``T_n(input)``."""
    return _chebyshev("chebyshev_polynomial_t", input, n, kind="t", shifted=False, out=out)


def chebyshev_polynomial_u(input, n, *, out=None):
    """Chebyshev polynomial of the second kind ``U_n(input)``."""
    return _chebyshev("chebyshev_polynomial_u", input, n, kind="u", shifted=False, out=out)


def chebyshev_polynomial_v(input, n, *, out=None):
    """Chebyshev polynomial of the third kind ``V_n(input)``."""
    return _chebyshev("chebyshev_polynomial_v", input, n, kind="v", shifted=False, out=out)


def chebyshev_polynomial_w(input, n, *, out=None):
    """Chebyshev polynomial of the fourth kind ``W_n(input)``."""
    return _chebyshev("chebyshev_polynomial_w", input, n, kind="w", shifted=False, out=out)


def shifted_chebyshev_polynomial_t(input, n, *, out=None):
    """``T_n(2 input - 1)``, the first kind on [0, 1]."""
    return _chebyshev("shifted_chebyshev_polynomial_t", input, n, kind="t", shifted=True, out=out)


def shifted_chebyshev_polynomial_u(input, n, *, out=None):
    """``U_n(2 input - 1)``, the second kind on [0, 1]."""
    return _chebyshev("shifted_chebyshev_polynomial_u", input, n, kind="u", shifted=True, out=out)


def shifted_chebyshev_polynomial_v(input, n, *, out=None):
    """``V_n(2 input - 1)``, the third kind on [0, 1]."""
    return _chebyshev("shifted_chebyshev_polynomial_v", input, n, kind="v", shifted=True, out=out)


def shifted_chebyshev_polynomial_w(input, n, *, out=None):
    """``W_n(2 input - 1)``, the fourth kind on [0, 1]."""
    return _chebyshev("shifted_chebyshev_polynomial_w", input, n, kind="w", shifted=True, out=out)


def _hermite_limit(dtype) -> int:
    """PyTorch returns NaN above this degree (float32: 128, float64: 512)."""
    return 128 if dtype is D.float32 else 512 if dtype is D.float64 else 1024


def hermite_polynomial_h(input, n, *, out=None):
    """Physicists' Hermite polynomial ``H_n(input)``; NaN above degree 128 (float32) or 512 (float64)."""
    x, degree, n_max = _operands("hermite_polynomial_h", input, n)
    n_f = _as_tensor(degree, x)
    limit = _hermite_limit(x.dtype)
    two_x = x + x
    steps = min(_steps_needed(degree, n_max, n_f <= limit), limit)
    # PyTorch's loop runs k = 2, 4, ..., 2n - 2: H_{j+1} = 2x H_j - 2j H_{j-1}
    recurrence = _recurrence(_as_tensor(1.0, x), two_x, lambda k, q, p: two_x * q - (2 * k - 2) * p, degree, steps, 2)
    cases = [(n_f < 0, 0.0), (n_f == 0, 1.0), (n_f == 1, two_x), (n_f > limit, math.nan)]
    return _out(_select(x, cases, recurrence), out)


def hermite_polynomial_he(input, n, *, out=None):
    """Probabilists' Hermite polynomial ``He_n(input)``; NaN above degree 128 (float32) or 512 (float64)."""
    x, degree, n_max = _operands("hermite_polynomial_he", input, n)
    n_f = _as_tensor(degree, x)
    limit = _hermite_limit(x.dtype)
    steps = min(_steps_needed(degree, n_max, n_f <= limit), limit)
    recurrence = _recurrence(_as_tensor(1.0, x), x, lambda k, q, p: x * q - (k - 1) * p, degree, steps, 2)
    cases = [(n_f < 0, 0.0), (n_f == 0, 1.0), (n_f == 1, x), (n_f > limit, math.nan)]
    return _out(_select(x, cases, recurrence), out)


def laguerre_polynomial_l(input, n, *, out=None):
    """Laguerre polynomial ``L_n(input)`` (1 at 0)."""
    x, degree, n_max = _operands("laguerre_polynomial_l", input, n)
    n_f = _as_tensor(degree, x)
    one_minus_x = 1 - x
    steps = _steps_needed(degree, n_max, x != 0)

    def step(k, q, p):
        j = k - 1
        return ((j + j + one_minus_x) * q - j * p) / (j + 1)

    recurrence = _recurrence(_as_tensor(1.0, x), one_minus_x, step, degree, steps, 2)
    cases = [(n_f < 0, 0.0), (x == 0, 1.0), (n_f == 0, 1.0), (n_f == 1, one_minus_x)]
    return _out(_select(x, cases, recurrence), out)


def legendre_polynomial_p(input, n, *, out=None):
    """Legendre polynomial ``P_n(input)``."""
    x, degree, n_max = _operands("legendre_polynomial_p", input, n)
    n_f = _as_tensor(degree, x)
    ends = x.abs() == 1
    steps = _steps_needed(degree, n_max, ~ends)

    def step(k, q, p):
        j = k - 1
        return ((j + j + 1) * x * q - j * p) / (j + 1)

    recurrence = _recurrence(_as_tensor(1.0, x), x, step, degree, steps, 2)
    sign = where((x > 0) | (n_f.fmod(2) == 0), 1.0, -1.0)
    cases = [(n_f < 0, 0.0), (ends, sign), (n_f == 0, 1.0), (n_f == 1, x)]
    return _out(_select(x, cases, recurrence), out)
