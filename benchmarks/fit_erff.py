"""Derive the coefficients of the generated C's float32 erf (``munet_erff`` in munet/compiler/codegen/c.py).

The function is evaluated in float32 arithmetic from three polynomials fitted here by minimax
(Lawson's iteratively reweighted least squares on a dense grid of Chebyshev nodes, in float64; the
reference values come from Python's ``math.erf``/``math.erfc``, glibc's double functions, accurate to
an ulp of double):

- ``|x| < SPLIT``: ``erf(x) = x + x * h(x^2)``, ``h(t) = erf(sqrt t) / sqrt t - 1``, weighted by the
  relative error of ``erf``;
- ``SPLIT <= |x| <= CLAMP``: ``erf(x) = 1 - exp(y)``, ``y = log(erfc(x))`` a polynomial in
  ``|x| - SPLIT``, weighted by ``erfc(x)`` (an error ``d`` in ``y`` moves ``erf`` by ``erfc(x) d``);
- ``exp(r) = 1 + r q(r)`` on ``|r| <= ln2 / 2`` (what is left of ``y`` after taking out the nearest
  multiple of ln2), relative.

Coefficients are rounded to float32 one at a time, lowest degree first, each rounding followed by a
refit of the coefficients not yet rounded, which compensates the rounding where it can. The split,
the degrees and the evaluation order were chosen with the exhaustive test (a lower split makes the
exp part's rounding errors, which scale with ``erfc(SPLIT)``, count more; a higher one the odd
polynomial's). It prints the tuples that c.py holds (``ERF_SMALL``, ``ERF_LARGE``, ``ERF_EXP``) and
each piece's fitted error; the accuracy test of the result is tests/compiler/test_erff_accuracy.py.
Usage:

    .venv/bin/python benchmarks/fit_erff.py
"""

from __future__ import annotations

import math

import numpy as np

SPLIT = 0.8125  # below: the odd polynomial; from here on: 1 - exp(y)
CLAMP = 3.9375  # erfc(3.9375) < 2^-25: erf rounds to 1 from here on
DEG_SMALL, DEG_LARGE, DEG_EXP = 6, 7, 6
GRID = 8001


def _chebyshev_nodes(lo: float, hi: float, n: int) -> np.ndarray:
    k = np.arange(n)
    return (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n)


def minimax(x: np.ndarray, f: np.ndarray, weight: np.ndarray, degree: int, fixed: dict) -> np.ndarray:
    """Monomial coefficients (lowest first) minimizing max |weight * (p(x) - f)|; ``fixed`` maps degrees to
    coefficients already chosen (rounded), which the fit keeps."""
    free = [d for d in range(degree + 1) if d not in fixed]
    target = f - sum(c * x**d for d, c in fixed.items())
    scale = max(abs(x.min()), abs(x.max()))
    basis = np.stack([(x / scale) ** d for d in free], axis=1)  # scaled monomials: well enough conditioned here
    lawson = np.ones_like(x)
    for _ in range(60):
        w = weight * np.sqrt(lawson)
        sol, *_ = np.linalg.lstsq(basis * w[:, None], target * w, rcond=None)
        err = np.abs(weight * (basis @ sol - target))
        lawson *= err / err.max()
        lawson /= lawson.sum()
    coeffs = dict(fixed)
    coeffs.update({d: s / scale**d for d, s in zip(free, sol)})
    return np.array([coeffs[d] for d in range(degree + 1)])


def fit_rounded(x: np.ndarray, f: np.ndarray, weight: np.ndarray, degree: int) -> np.ndarray:
    """Float32 coefficients, rounded one at a time (lowest degree first) with the others refitted."""
    fixed: dict = {}
    for d in range(degree + 1):
        coeffs = minimax(x, f, weight, degree, fixed)
        fixed[d] = float(np.float32(coeffs[d]))
    return np.array([fixed[d] for d in range(degree + 1)])


def max_weighted_error(x, f, weight, coeffs) -> float:
    p = np.zeros_like(x)
    for c in coeffs[::-1]:
        p = p * x + c
    return float(np.max(np.abs(weight * (p - f))))


def pieces() -> dict:
    """``{name: (coefficients lowest degree first, max weighted error of the float64 evaluation)}``."""
    out = {}
    t = _chebyshev_nodes(0.0, SPLIT**2, GRID)
    t[t < 1e-300] = 1e-300
    g = np.array([math.erf(math.sqrt(v)) / math.sqrt(v) for v in t])
    coeffs = fit_rounded(t, g - 1.0, 1.0 / g, DEG_SMALL)
    out["ERF_SMALL"] = (coeffs, max_weighted_error(t, g - 1.0, 1.0 / g, coeffs))
    a = _chebyshev_nodes(SPLIT, CLAMP, GRID)
    erfc = np.array([math.erfc(v) for v in a])
    y = np.log(erfc)
    coeffs = fit_rounded(a - SPLIT, y, erfc, DEG_LARGE)
    out["ERF_LARGE"] = (coeffs, max_weighted_error(a - SPLIT, y, erfc, coeffs))
    r = _chebyshev_nodes(-math.log(2.0) / 2, math.log(2.0) / 2, GRID)
    q = np.expm1(r) / r
    coeffs = fit_rounded(r, q, r / np.exp(r), DEG_EXP - 1)
    out["ERF_EXP"] = (coeffs, max_weighted_error(r, q, r / np.exp(r), coeffs))
    return out


def main() -> None:
    print(f"SPLIT = {SPLIT}, CLAMP = {CLAMP}; erfc(CLAMP) = {math.erfc(CLAMP):.3e} (2^-25 = {2**-25:.3e})")
    for name, (coeffs, err) in pieces().items():
        print(f"# max weighted error {err:.3e} ({err / 2**-24:.3f} ulp of 1)")
        print(f"{name} = ({', '.join(repr(float(c)) for c in coeffs)})")


if __name__ == "__main__":
    main()
