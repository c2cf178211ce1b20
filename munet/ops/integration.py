"""Numerical integration and differentiation of sampled functions: ``trapezoid`` (and its old
name ``trapz``), ``cumulative_trapezoid`` and ``gradient``, as PyTorch computes them, in public
ops (slices, sums, cumulative sums), so they are differentiable and run on every device."""

from __future__ import annotations

import numbers

from munet.ops._utils import is_tensor, wrap_dim
from munet.ops.elementwise import _float_input

__all__ = ["trapezoid", "trapz", "cumulative_trapezoid", "gradient"]
__tensor_methods__: list[str] = []


def _spacing_along(name: str, y, x, d: int):
    """The differences of the sample points ``x`` along ``d``, shaped to broadcast with ``y``'s slices."""
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point, got {x.shape[0]} "
                               f"x values and {y.shape[d]} samples along dim {d}")  # fmt: skip
        dx = x.diff()
        return dx.reshape([-1] + [1] * (y.ndim - 1 - d))
    return x.diff(dim=d - y.ndim + x.ndim if x.ndim < y.ndim else d)


def _pair_sums(y, d: int):
    n = y.shape[d]
    return y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)


def trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The trapezoidal rule along ``dim``: sample points ``x`` (a tensor), or spacing ``dx`` (default 1)."""
    if x is not None and dx is not None:
        raise TypeError("trapezoid: received both x and dx; give one of them")
    y = _float_input(y)
    d = wrap_dim(dim, y.ndim, "trapezoid")
    if y.shape[d] == 0:
        return y.sum(d)
    if x is None or not is_tensor(x):
        step = 1.0 if x is None and dx is None else (x if dx is None else dx)
        return (y.sum(d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * step
    return (_pair_sums(y, d) * _spacing_along("trapezoid", y, _float_input(x), d)).sum(d) / 2


def trapz(y, x=None, *, dx=None, dim: int = -1):
    """``trapezoid`` under its older name."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The running trapezoidal integral along ``dim`` (one element fewer than ``y`` there)."""
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid: received both x and dx; give one of them")
    y = _float_input(y)
    d = wrap_dim(dim, y.ndim, "cumulative_trapezoid")
    if y.shape[d] == 0:
        return y
    if x is None or not is_tensor(x):
        step = 1.0 if x is None and dx is None else (x if dx is None else dx)
        return (_pair_sums(y, d) * (step / 2)).cumsum(d)
    return (_pair_sums(y, d) * _spacing_along("cumulative_trapezoid", y, _float_input(x), d) / 2).cumsum(d)


def _uniform_derivative(f, d: int, h, edge_order: int):
    n = f.shape[d]
    interior = (f.narrow(d, 2, n - 2) - f.narrow(d, 0, n - 2)) / (2 * h)
    if edge_order == 1:
        first = (f.narrow(d, 1, 1) - f.narrow(d, 0, 1)) / h
        last = (f.narrow(d, n - 1, 1) - f.narrow(d, n - 2, 1)) / h
    else:
        first = (-1.5 * f.narrow(d, 0, 1) + 2 * f.narrow(d, 1, 1) - 0.5 * f.narrow(d, 2, 1)) / h
        last = (0.5 * f.narrow(d, n - 3, 1) - 2 * f.narrow(d, n - 2, 1) + 1.5 * f.narrow(d, n - 1, 1)) / h
    return first, interior, last


def _coordinate_derivative(f, d: int, x, edge_order: int):
    """NumPy's second-order differences for unevenly spaced coordinates ``x`` (1-D) along ``d``."""
    n = f.shape[d]
    shape = [-1] + [1] * (f.ndim - 1 - d)
    h = x.diff()
    h1, h2 = h[:-1].reshape(shape), h[1:].reshape(shape)
    a = -h2 / (h1 * (h1 + h2))
    b = (h2 - h1) / (h1 * h2)
    c = h1 / (h2 * (h1 + h2))
    interior = a * f.narrow(d, 0, n - 2) + b * f.narrow(d, 1, n - 2) + c * f.narrow(d, 2, n - 2)
    if edge_order == 1:
        first = (f.narrow(d, 1, 1) - f.narrow(d, 0, 1)) / h[0]
        last = (f.narrow(d, n - 1, 1) - f.narrow(d, n - 2, 1)) / h[-1]
        return first, interior, last
    g1, g2 = h[0], h[1]
    a0, b0, c0 = -(2 * g1 + g2) / (g1 * (g1 + g2)), (g1 + g2) / (g1 * g2), -g1 / (g2 * (g1 + g2))
    first = a0 * f.narrow(d, 0, 1) + b0 * f.narrow(d, 1, 1) + c0 * f.narrow(d, 2, 1)
    g1, g2 = h[-2], h[-1]
    a1, b1, c1 = g2 / (g1 * (g1 + g2)), -(g2 + g1) / (g1 * g2), (2 * g2 + g1) / (g2 * (g1 + g2))
    last = a1 * f.narrow(d, n - 3, 1) + b1 * f.narrow(d, n - 2, 1) + c1 * f.narrow(d, n - 1, 1)
    return first, interior, last


def gradient(input, *, spacing=1, dim=None, edge_order: int = 1):
    """The derivative of ``input`` along each of ``dim`` (default all) by central differences, one-sided
    of order ``edge_order`` (1 or 2) at the edges. ``spacing`` is a number, one number per dim, or one
    1-D tensor of coordinates per dim. Returns a tuple with one tensor per dim."""
    from munet.ops.movement import cat

    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order}")
    f = _float_input(input)
    if dim is None:
        dims = list(range(f.ndim))
    elif isinstance(dim, numbers.Integral):
        dims = [wrap_dim(dim, f.ndim, "gradient")]
    else:
        dims = [wrap_dim(d, f.ndim, "gradient") for d in dim]
    spacings = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(spacings) == 1 and len(dims) > 1:
        spacings = spacings * len(dims)
    if len(spacings) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                           f"arguments to have the same length, but got a spacing argument of length "
                           f"{len(spacings)} and a dim argument of length {len(dims)}.")  # fmt: skip
    results = []
    for d, h in zip(dims, spacings):
        if f.shape[d] < edge_order + 1:
            raise RuntimeError(f"torch.gradient expected each dimension size to be at least edge_order+1, got "
                               f"size {f.shape[d]} along dim {d} with edge_order={edge_order}")  # fmt: skip
        if is_tensor(h) and h.ndim == 1:
            parts = _coordinate_derivative(f, d, _float_input(h).to(f.dtype), edge_order)
        else:
            parts = _uniform_derivative(f, d, h.item() if is_tensor(h) else h, edge_order)
        results.append(cat(list(parts), d))
    return tuple(results)
