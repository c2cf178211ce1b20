"""CPU kernels of the composite grid_sample (2-D, bilinear/nearest, zeros/border/reflection
padding; its decomposition in ``munet/ops/sampling.py`` is the meaning): the four corners of every
sample are gathered at once with flat indices, and the backward scatters with one ``bincount``."""

from __future__ import annotations

import numpy as np

from munet.backends.cpu.kernels_reduce import acc_dtype
from munet.backends.cpu.registry import kernel


def _reflect(coord, twice_low: int, twice_high: int):
    """PyTorch's reflect_coordinates_set_grad: reflected coordinate and d(out)/d(in)."""
    if twice_low == twice_high:
        return np.zeros_like(coord), np.zeros_like(coord)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    shifted = coord - low
    sign = np.where(shifted < 0, -1.0, 1.0)
    shifted = np.abs(shifted)
    extra = np.fmod(shifted, span)
    flips = np.floor(shifted / span)
    even = flips % 2 == 0
    return np.where(even, extra + low, span - extra + low), np.where(even, sign, -sign)


def _clip(coord, size: int):
    grad = ((coord > 0) & (coord < size - 1)).astype(coord.dtype)
    return np.clip(np.where(np.isnan(coord), 0, coord), 0, size - 1), grad


def _source(coord, size: int, padding_mode: str, align_corners: bool):
    """Unnormalized, padded source coordinate along one axis and its derivative w.r.t. ``coord``."""
    if align_corners:
        src, grad = (coord + 1) / 2 * (size - 1), np.full_like(coord, (size - 1) / 2)
    else:
        src, grad = ((coord + 1) * size - 1) / 2, np.full_like(coord, size / 2)
    if padding_mode == "border":
        src, g = _clip(src, size)
        grad = grad * g
    elif padding_mode == "reflection":
        src, g1 = _reflect(src, 0, 2 * (size - 1)) if align_corners else _reflect(src, -1, 2 * size - 1)
        src, g2 = _clip(src, size)
        grad = grad * g1 * g2
    return src, grad


def _corners(x, grid, mode, padding_mode, align_corners):
    """Per corner: (flat index, in-bounds mask, weight, d weight/d ix, d weight/d iy)."""
    n, c, h, w = x.shape
    ix, gx = _source(grid[..., 0], w, padding_mode, align_corners)
    iy, gy = _source(grid[..., 1], h, padding_mode, align_corners)
    if mode == "nearest":
        xi, yi = np.rint(ix).astype(np.int64), np.rint(iy).astype(np.int64)
        one, zero = np.ones_like(ix), np.zeros_like(ix)
        return [(xi, yi, one, zero, zero)], gx, gy
    x0, y0 = np.floor(ix), np.floor(iy)
    wx1, wy1 = ix - x0, iy - y0
    wx0, wy0 = 1 - wx1, 1 - wy1
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    corners = [
        (x0, y0, wx0 * wy0, -wy0, -wx0),
        (x0 + 1, y0, wx1 * wy0, wy0, -wx1),
        (x0, y0 + 1, wx0 * wy1, -wy1, wx0),
        (x0 + 1, y0 + 1, wx1 * wy1, wy1, wx1),
    ]
    return corners, gx, gy


def _flat(xi, yi, h, w):
    inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
    index = np.where(inside, yi * w + xi, 0)
    return index.reshape(index.shape[0], 1, -1), inside.reshape(inside.shape[0], 1, -1)


@kernel("grid_sampler_2d")
def grid_sampler_2d(x, grid, *, mode, padding_mode, align_corners):
    dtype = x.dtype
    acc = acc_dtype(x)
    if acc is not None:
        x, grid = x.astype(acc), grid.astype(acc)
    n, c, h, w = x.shape
    planes = x.reshape(n, c, h * w)
    corners, _, _ = _corners(x, grid, mode, padding_mode, align_corners)
    out = None
    for xi, yi, weight, _, _ in corners:  # summed corner by corner from the first (a -0.0 term stays -0.0)
        index, inside = _flat(xi, yi, h, w)
        values = np.take_along_axis(planes, np.broadcast_to(index, (n, c, index.shape[-1])), axis=2)
        term = np.where(inside, values, 0) * weight.reshape(n, 1, -1)
        out = term if out is None else out + term
    return out.reshape(n, c, grid.shape[1], grid.shape[2]).astype(dtype, copy=False)


@kernel("grid_sampler_2d_backward")
def grid_sampler_2d_backward(g, x, grid, *, mode, padding_mode, align_corners):
    dtype, gdtype = x.dtype, grid.dtype
    acc = acc_dtype(x)
    if acc is not None:
        g, x, grid = g.astype(acc), x.astype(acc), grid.astype(acc)
    n, c, h, w = x.shape
    p = grid.shape[1] * grid.shape[2]
    planes = x.reshape(n, c, h * w)
    gout = g.reshape(n, c, p)
    corners, gx, gy = _corners(x, grid, mode, padding_mode, align_corners)
    plane_ids = (np.arange(n)[:, None, None] * c + np.arange(c)[None, :, None]) * (h * w)
    grad_x = np.zeros(n * c * h * w, dtype=np.float64)
    gix = np.zeros((n, p), dtype=x.dtype)
    giy = np.zeros((n, p), dtype=x.dtype)
    for xi, yi, weight, dwx, dwy in corners:
        index, inside = _flat(xi, yi, h, w)
        contrib = np.where(inside, gout * weight.reshape(n, 1, -1), 0)
        target = np.broadcast_to(plane_ids + index, contrib.shape)
        grad_x += np.bincount(target.reshape(-1), weights=contrib.reshape(-1).astype(np.float64), minlength=grad_x.size)
        values = np.where(inside, np.take_along_axis(planes, np.broadcast_to(index, (n, c, p)), axis=2), 0)
        weighted = (values * gout).sum(axis=1)
        gix += weighted * dwx.reshape(n, -1)
        giy += weighted * dwy.reshape(n, -1)
    grad_grid = np.stack([gix * gx.reshape(n, -1), giy * gy.reshape(n, -1)], axis=-1).reshape(grid.shape)
    if mode == "nearest":  # piecewise constant in the grid: zero, even where a value is infinite
        grad_grid = np.zeros_like(grad_grid)
    return grad_x.reshape(x.shape).astype(dtype), grad_grid.astype(gdtype)
