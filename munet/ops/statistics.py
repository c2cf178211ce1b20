"""Covariance and correlation of variables observed together: ``cov``, ``corrcoef``, and the
distance ``dist``, as composites of reductions and matrix products (PyTorch's formulas)."""

from __future__ import annotations

import warnings

from munet import _dtype as D
from munet.ops.elementwise import _float_input

__all__ = ["cov", "corrcoef", "dist"]
__tensor_methods__ = ["cov", "corrcoef", "dist"]


def _check_weights(name: str, weights, observations: int, *, integral: bool):
    if weights.ndim > 1:
        raise RuntimeError(f"cov: expected {name} to have one or fewer dimensions, got shape {list(weights.shape)}")
    if weights.numel() != observations:
        raise RuntimeError(
            f"cov: expected {name} to have the same numel as there are observations in the input, "
            f"but got {weights.numel()} != {observations}"
        )
    if integral and weights.dtype.is_floating_point:
        raise RuntimeError(f"cov: expected {name} to have integral dtype, got {weights.dtype.name}")
    if not integral and not weights.dtype.is_floating_point:
        raise RuntimeError(f"cov: expected {name} to have floating point dtype, got {weights.dtype.name}")
    if weights.numel() and bool((weights < 0).any()):
        raise RuntimeError(f"cov: {name} cannot have negative values")


def cov(input, *, correction: int = 1, fweights=None, aweights=None):
    """Covariance of the variables in the rows of ``input`` (a vector is one variable) over its
    columns (the observations), weighted by integer frequencies ``fweights`` and float
    ``aweights``; ``correction=1`` is Bessel's correction. Returns a (rows, rows) matrix, or a
    scalar for one variable."""
    if input.ndim > 2:
        raise RuntimeError(f"cov: expected input to have two or fewer dimensions, got shape {list(input.shape)}")
    x = _float_input(input)
    if x.ndim < 2:
        x = x.reshape(1, -1)
    observations = x.shape[1]
    weights = None
    if fweights is not None:
        _check_weights("fweights", fweights, observations, integral=True)
        weights = fweights.to(x.dtype)
    if aweights is not None:
        _check_weights("aweights", aweights, observations, integral=False)
        x = x.to(D.promote_types(x.dtype, aweights.dtype))  # as PyTorch: float64 weights give float64
        weights = None if weights is None else weights.to(x.dtype)
        aw = aweights.to(x.dtype)
        weights = aw if weights is None else weights * aw
    if weights is None:
        average = x.mean(1, keepdim=True)
        norm = observations - correction
        weighted = centered = x - average
    else:
        total = weights.sum()
        average = (x * weights).sum(1, keepdim=True) / total
        if correction == 0:
            norm = total
        elif aweights is None:
            norm = total - correction
        else:
            norm = total - correction * (weights * aweights.to(x.dtype)).sum() / total
        centered = x - average
        weighted = centered * weights
    if not hasattr(norm, "shape"):
        if norm <= 0:
            warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the "
                          "number of observations.", UserWarning, stacklevel=2)  # fmt: skip
        norm = max(norm, 0)
    else:
        norm = norm.clamp_min(0)
    return (centered @ weighted.transpose(0, 1) / norm).squeeze()


def corrcoef(input):
    """Pearson correlation coefficients of the rows of ``input``: ``cov`` scaled by the standard
    deviations, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    stddev = c.diagonal().sqrt()
    c = c / stddev.unsqueeze(1) / stddev.unsqueeze(0)
    return c.clamp(-1, 1)


def dist(input, other, p: float = 2):
    """The ``p``-norm of ``input - other`` (broadcast) over all elements."""
    return (input - other).norm(p)
