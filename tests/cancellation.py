"""The size of the terms a formula sums, where the terms cancel: the scale of its rounding error.

``gelu`` is ``x / 2 * (1 + erf(x / sqrt 2))``, as PyTorch computes it: in the left tail ``1 + erf``
cancels, so the result's error is a few ulp of ``|x|`` (the size of ``x / 2 * 2``), not of the
result, and two correct implementations (another ``erf``, another vector width) differ there by
far more than a relative tolerance allows. ``gelu_backward`` sums ``Phi(x)`` (as ``(1 + erf) / 2``)
and ``x * phi(x)``, which cancel around ``x = -0.75`` and in the left tail. The tanh approximation
cancels the same way (``1 + tanh``, and ``1 - tanh^2`` in its gradient).

:func:`term_scale` gives, for such a formula, ``sum |term|`` in float64; a comparison then allows
``k * eps * term_scale`` besides its relative tolerance, with ``k`` a few units of the computing
dtype's epsilon (each term is within an ulp or two of its size).
"""

from __future__ import annotations

import math

import numpy as np

# each of two implementations of a cancelling formula is within 2.5 epsilons of its terms' size (measured
# for gelu and gelu_backward, both approximations, on 400,001 points of [-9, 4]): they differ by at most twice that
TERM_ULPS = 8
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


def term_scale(name: str, args, attrs) -> np.ndarray | None:
    """``sum |term|`` of ``name``'s formula at ``args`` (float64), or None where its terms do not cancel."""
    if name not in ("gelu", "gelu_backward"):
        return None
    x = np.asarray(args[-1], np.float64)
    if name == "gelu":
        return np.abs(x)  # x / 2 * (1 + |erf|) <= |x|, likewise with tanh
    grad = np.abs(np.asarray(args[0], np.float64))
    with np.errstate(all="ignore"):
        if attrs.get("approximate", "none") == "none":
            density = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
            return grad * (1.0 + np.abs(x) * density)  # (1 + |erf|) / 2 <= 1 and |x| phi(x)
        t = np.tanh((x + _GELU_A * x**3) * _SQRT_2_OVER_PI)
        slope = (1.0 + t * t) * (1.0 + 3.0 * _GELU_A * x * x) * _SQRT_2_OVER_PI  # 1 - t^2 cancels as well
        return grad * (1.0 + 0.5 * np.abs(x) * slope)
