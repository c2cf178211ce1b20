"""Resampling: interpolate (nearest, nearest-exact, linear, bilinear, bicubic, trilinear, area),
grid_sample and affine_grid, pixel_shuffle/unshuffle, and unfold/fold (im2col/col2im).

``interpolate`` is separable: along each spatial dim the output is a fixed linear map of the
input, built from PyTorch's exact source-index formulas (in the input's precision) and applied
with ``index_select`` (nearest) or a matmul (linear, cubic), so gradients come for free;
``antialias=True`` (bilinear, bicubic) builds PyTorch's antialiased weights instead.
``grid_sample`` is a composite: PyTorch's source-coordinate rules as elementwise ops, then per
corner a ``gather`` from the input planes (forward) or a ``scatter_add`` into them (the gradient,
the composite ``grid_sampler_2d_backward``); cpu and vulkan keep one-pass kernels for both,
tested against the decompositions.
"""

from __future__ import annotations

import math

import numpy as np

from munet import _dtype as D
from munet.ops._registry import Meta, apply, define

__all__ = ["pixel_shuffle", "pixel_unshuffle", "affine_grid_generator", "grid_sampler"]
__functional__ = [
    "interpolate",
    "upsample",
    "upsample_nearest",
    "upsample_bilinear",
    "grid_sample",
    "affine_grid",
    "pixel_shuffle",
    "pixel_unshuffle",
    "unfold",
    "fold",
]
__tensor_methods__: list[str] = []

_LINEAR_MODES = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_CUBIC_A = -0.75


# interpolate -----------------------------------------------------------------------------------------


def _opmath(dtype) -> type:
    return np.float64 if dtype.name == "float64" else np.float32


def _scale_value(scale, in_size: int, out_size: int, ft):
    """PyTorch's compute_scales_value: 1/scale_factor when one was given, else in/out."""
    if scale is not None and scale > 0:
        return ft(1.0 / scale)
    return ft(in_size) / ft(out_size)


def _nearest_index(in_size: int, out_size: int, scale, exact: bool) -> np.ndarray:
    dst = np.arange(out_size)
    if not exact and out_size == in_size:
        return dst
    if not exact and out_size == 2 * in_size:
        return dst >> 1
    s = _scale_value(scale, in_size, out_size, np.float32)
    src = (dst.astype(np.float32) + np.float32(0.5)) * s if exact else dst.astype(np.float32) * s
    return np.minimum(np.floor(src).astype(np.int64), in_size - 1)


def _source_coords(in_size, out_size, scale, align_corners, cubic, ft) -> np.ndarray:
    """PyTorch's area_pixel_compute_source_index for every output position."""
    dst = np.arange(out_size).astype(ft)
    if align_corners:
        s = ft(in_size - 1) / ft(out_size - 1) if out_size > 1 else ft(0)
        return s * dst
    s = _scale_value(scale, in_size, out_size, ft)
    src = s * (dst + ft(0.5)) - ft(0.5)
    return src if cubic else np.maximum(src, ft(0))


def _linear_matrix(in_size, out_size, scale, align_corners, ft) -> np.ndarray:
    src = _source_coords(in_size, out_size, scale, align_corners, False, ft)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    lam1 = np.clip(src - i0.astype(ft), 0, 1).astype(ft)
    lam0 = (ft(1) - lam1).astype(ft)
    i1 = i0 + (i0 < in_size - 1)
    m = np.zeros((out_size, in_size), dtype=np.float64)
    rows = np.arange(out_size)
    np.add.at(m, (rows, i0), lam0)
    np.add.at(m, (rows, i1), lam1)
    return m


def _cubic_matrix(in_size, out_size, scale, align_corners, ft) -> np.ndarray:
    src = _source_coords(in_size, out_size, scale, align_corners, True, ft)
    base = np.floor(src)
    t = (src - base).astype(ft)
    a = ft(_CUBIC_A)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    one = ft(1)
    coeffs = (far(t + one), near(t), near(one - t), far((one - t) + one))
    m = np.zeros((out_size, in_size), dtype=np.float64)
    rows = np.arange(out_size)
    for k, c in enumerate(coeffs):
        idx = np.clip(base.astype(np.int64) - 1 + k, 0, in_size - 1)
        np.add.at(m, (rows, idx), c.astype(ft))
    return m


def _antialias_matrix(in_size, out_size, scale, align_corners, cubic, ft) -> np.ndarray:
    """PyTorch's antialiased weights (``antialias=True``, as PIL): the filter (a triangle, or Keys'
    cubic with a = -0.5) stretched by the downscale factor, so every input pixel under the output
    pixel's footprint contributes, and each row normalized to sum to one."""
    if align_corners:
        step = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    else:
        step = float(_scale_value(scale, in_size, out_size, np.float64))
    half = 2.0 if cubic else 1.0  # the filter's support at scale 1
    support = half * step if step >= 1.0 else half
    inverse = 1.0 / step if step >= 1.0 else 1.0

    def weight(x):
        x = np.abs(x)
        if not cubic:
            return np.maximum(0.0, 1.0 - x)
        a = -0.5
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))

    m = np.zeros((out_size, in_size), dtype=np.float64)
    for i in range(out_size):
        center = step * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)  # int(): C's truncation, as PyTorch's kernel
        hi = min(int(center + support + 0.5), in_size)
        w = weight((np.arange(lo, hi) - center + 0.5) * inverse).astype(ft)
        total = w.sum(dtype=ft)
        m[i, lo:hi] = w / total if total != 0 else w
    return m


def _output_sizes(op, x, n, size, scale_factor, recompute_scale_factor):
    if size is not None and scale_factor is not None:
        raise ValueError(f"{op}: only one of size or scale_factor should be defined")
    spatial = tuple(x.shape[2:])
    if size is not None:
        if recompute_scale_factor:
            raise ValueError(f"{op}: recompute_scale_factor is not meaningful with an explicit size.")
        sizes = tuple(size) if isinstance(size, (list, tuple)) else (size,) * n
        if len(sizes) != n:
            raise ValueError(
                f"{op}: input and output must have the same number of spatial dimensions, but got input with spatial dimensions of {list(spatial)} and output size of {list(sizes)}"
            )
        return tuple(int(s) for s in sizes), (None,) * n
    if scale_factor is None:
        raise ValueError(f"{op}: either size or scale_factor should be defined")
    scales = tuple(scale_factor) if isinstance(scale_factor, (list, tuple)) else (scale_factor,) * n
    if len(scales) != n:
        raise ValueError(
            f"{op}: input and scale_factor must have the same number of spatial dimensions, but got input with spatial dimensions of {list(spatial)} and scale_factor of shape {list(scales)}"
        )
    sizes = tuple(math.floor(float(s) * float(f)) for s, f in zip(spatial, scales))
    return sizes, ((None,) * n if recompute_scale_factor else tuple(float(f) for f in scales))


def _resample_dim(x, dim: int, matrix: np.ndarray):
    from munet.ops.creation import tensor

    m = tensor(matrix.T, dtype=x.dtype, device=x.device)
    return (x.transpose(dim, -1) @ m).transpose(dim, -1)


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode: str = "nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    """Resize the spatial dims of ``input`` (N, C, *spatial) like ``torch.nn.functional.interpolate``."""
    from munet.ops.pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d

    op = "interpolate"
    n = input.ndim - 2
    if n not in (1, 2, 3):
        raise NotImplementedError(
            f"{op}: input of rank 3, 4 or 5 is supported (N, C, *spatial), got shape {tuple(input.shape)}"
        )
    if antialias and (mode not in ("bilinear", "bicubic") or n != 2):
        raise ValueError(
            "Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D tensor as input"
        )
    if mode not in ("nearest", "nearest-exact", "area", *_LINEAR_MODES):
        raise NotImplementedError(
            f"{op}: mode '{mode}' is not supported (nearest, nearest-exact, linear, bilinear, bicubic, trilinear, area)"
        )
    if align_corners is not None and mode not in _LINEAR_MODES:
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear"
        )
    if mode in _LINEAR_MODES and _LINEAR_MODES[mode] != n:
        raise NotImplementedError(
            f"{op}: got {input.ndim}D input, but {mode} mode needs {_LINEAR_MODES[mode] + 2}D input"
        )
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point input, got {input.dtype.name}")
    if mode == "area" and scale_factor is not None and recompute_scale_factor is None:
        recompute_scale_factor = True
    sizes, scales = _output_sizes(op, input, n, size, scale_factor, recompute_scale_factor)
    if any(s <= 0 for s in sizes):
        raise RuntimeError(
            f"{op}: input {list(input.shape[2:])} and output {list(sizes)} sizes should be greater than 0"
        )
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[n - 1](input, sizes)
    align = bool(align_corners)
    ft = _opmath(input.dtype)
    x = input
    changed = False
    for i, (out, scale) in enumerate(zip(sizes, scales)):
        dim = 2 + i
        in_size = x.shape[dim]
        if mode in ("nearest", "nearest-exact"):
            index = _nearest_index(in_size, out, scale, mode == "nearest-exact")
            if np.array_equal(index, np.arange(in_size)):
                continue
            from munet.ops.creation import tensor

            x = x.index_select(dim, tensor(index, device=x.device))
        elif antialias:
            x = _resample_dim(x, dim, _antialias_matrix(in_size, out, scale, align, mode == "bicubic", ft))
        elif mode == "bicubic":
            x = _resample_dim(x, dim, _cubic_matrix(in_size, out, scale, align, ft))
        else:
            x = _resample_dim(x, dim, _linear_matrix(in_size, out, scale, align, ft))
        changed = True
    return x if changed else x.clone()


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# grid_sample ---------------------------------------------------------------------------------------

_MODES = {"bilinear": 0, "nearest": 1}
_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def _grid_sampler_meta(x, grid, *, mode, padding_mode, align_corners):
    return Meta((x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]), x.dtype)


def _reflect(coord, twice_low: int, twice_high: int):
    """PyTorch's reflect_coordinates_set_grad: ``coord`` reflected into [low, high] and d(out)/d(in)."""
    from munet.ops.creation import zeros_like
    from munet.ops.elementwise import where

    if twice_low == twice_high:  # a size-1 axis with align_corners
        return zeros_like(coord), zeros_like(coord)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    shifted = coord - low
    sign = 1.0 - 2.0 * (shifted < 0).to(coord.dtype)
    shifted = shifted.abs()
    extra = shifted.fmod(span)
    even = (shifted / span).floor().fmod(2) == 0
    return where(even, extra + low, span - extra + low), where(even, sign, -sign)


def _clip(coord, size: int):
    """``coord`` clamped to [0, size - 1] (NaN to 0, as PyTorch) and its derivative (1 strictly inside)."""
    from munet.ops.elementwise import where

    inside = ((coord > 0) & (coord < size - 1)).to(coord.dtype)
    return where(coord.isnan(), 0.0, coord).clamp(0, size - 1), inside


def _source(coord, size: int, padding_mode: str, align_corners: bool):
    """The unnormalized, padded source coordinate along one axis and d(source)/d(coord)."""
    if align_corners:
        src, grad = (coord + 1) / 2 * (size - 1), (size - 1) / 2
    else:
        src, grad = ((coord + 1) * size - 1) / 2, size / 2
    if padding_mode == "border":
        src, g = _clip(src, size)
        return src, g * grad
    if padding_mode == "reflection":
        src, g1 = _reflect(src, 0, 2 * (size - 1)) if align_corners else _reflect(src, -1, 2 * size - 1)
        src, g2 = _clip(src, size)
        return src, g1 * g2 * grad
    return src, grad


def _corners(x, grid, mode: str, padding_mode: str, align_corners: bool):
    """The corners each sample reads: per corner (flat index in its input plane, in-bounds mask,
    weight, d weight/d ix, d weight/d iy), each (N, Ho*Wo), and d ix/d gx, d iy/d gy. A corner
    out of the plane (or at a NaN or infinite coordinate) reads index 0 and is masked."""
    from munet.ops.elementwise import where

    n, _, h, w = x.shape
    points = grid.reshape(n, -1, 2)
    ix, gx = _source(points[..., 0], w, padding_mode, align_corners)
    iy, gy = _source(points[..., 1], h, padding_mode, align_corners)
    if mode == "nearest":
        xs, ys = ix.round(), iy.round()
        parts = [(xs, ys, None, None, None)]
    else:
        x0, y0 = ix.floor(), iy.floor()
        wx1, wy1 = ix - x0, iy - y0
        wx0, wy0 = 1 - wx1, 1 - wy1
        parts = [
            (x0, y0, wx0 * wy0, -wy0, -wx0),
            (x0 + 1, y0, wx1 * wy0, wy0, -wx1),
            (x0, y0 + 1, wx0 * wy1, -wy1, wx0),
            (x0 + 1, y0 + 1, wx1 * wy1, wy1, wx1),
        ]
    corners = []
    for cx, cy, weight, dwx, dwy in parts:
        inside = (cx >= 0) & (cx <= w - 1) & (cy >= 0) & (cy <= h - 1)
        index = where(inside, cy * w + cx, 0.0).to(D.int64)
        corners.append((index, inside, weight, dwx, dwy))
    return corners, gx, gy


def _in_sampler_dtype(x, grid):
    """``x`` and ``grid`` in the dtype the sampler computes in: float32 for 16-bit floats."""
    if x.dtype in (D.float16, D.bfloat16):
        return x.to(D.float32), grid.to(D.float32)
    return x, grid


def _gathered(planes, index, inside):
    """The planes' values at each sample's corner, 0 where the corner is masked: (N, C, P)."""
    from munet.ops.elementwise import where

    n, c, _ = planes.shape
    values = planes.gather(2, index.unsqueeze(1).expand(n, c, index.shape[1]))
    return where(inside.unsqueeze(1), values, 0.0)


def _grid_sampler_decomposition(x, grid, *, mode, padding_mode, align_corners):
    """Per sample, its corners' values (masked to 0 outside the input) times their bilinear
    weights, summed corner by corner (nearest: the one corner's value)."""
    n, c, h, w = x.shape
    xs, points = _in_sampler_dtype(x, grid)
    planes = xs.reshape(n, c, h * w)
    corners, _, _ = _corners(xs, points, mode, padding_mode, align_corners)
    out = None
    for index, inside, weight, _, _ in corners:
        term = _gathered(planes, index, inside)
        term = term if weight is None else term * weight.unsqueeze(1)
        out = term if out is None else out + term
    return out.reshape(n, c, grid.shape[1], grid.shape[2]).to(x.dtype)


def _grid_sampler_backward(ctx, g):
    x, grid = ctx.saved_tensor("input"), ctx.saved_tensor("grid")
    grad_x, grad_grid = apply(grid_sampler_backward_op, g, x, grid, **ctx.attrs)
    need = ctx.needs_input_grad
    return (grad_x if need[0] else None), (grad_grid if need[1] else None)


def _grid_sampler_backward_decomposition(g, x, grid, *, mode, padding_mode, align_corners):
    """``grad_input``: each sample's gradient times its corners' weights, added into zero input
    planes at the corners inside the input. ``grad_grid``: per corner the channel sum of the
    corner's value times the gradient, times d weight/d (ix, iy), summed corner by corner, times
    d (ix, iy)/d grid; zero in nearest mode (the output is piecewise constant in the grid)."""
    from munet.ops.creation import zeros
    from munet.ops.elementwise import where
    from munet.ops.movement import stack

    n, c, h, w = x.shape
    xs, points = _in_sampler_dtype(x, grid)
    gs = g.to(xs.dtype).reshape(n, c, -1)
    planes = xs.reshape(n, c, h * w)
    corners, gx, gy = _corners(xs, points, mode, padding_mode, align_corners)
    grad_x = zeros((n, c, h * w), dtype=xs.dtype, device=x.device)
    gix = giy = None
    for index, inside, weight, dwx, dwy in corners:
        spread = gs if weight is None else gs * weight.unsqueeze(1)
        spread = where(inside.unsqueeze(1), spread, 0.0)
        grad_x = grad_x.scatter_add(2, index.unsqueeze(1).expand(n, c, index.shape[1]), spread)
        if weight is None:
            continue
        weighted = (_gathered(planes, index, inside) * gs).sum(1)
        gix = weighted * dwx if gix is None else gix + weighted * dwx
        giy = weighted * dwy if giy is None else giy + weighted * dwy
    if mode == "nearest":
        grad_grid = zeros(tuple(grid.shape), dtype=grid.dtype, device=grid.device)
    else:
        grad_grid = stack([gix * gx, giy * gy], -1).reshape(tuple(grid.shape)).to(grid.dtype)
    return grad_x.reshape(tuple(x.shape)).to(x.dtype), grad_grid


def _no_double_backward(ctx, *grads):
    raise NotImplementedError("grid_sampler_2d_backward: double backward of grid_sample is not supported")


grid_sampler_op = define(
    "grid_sampler_2d",
    inputs=("input", "grid"),
    meta=_grid_sampler_meta,
    backward=_grid_sampler_backward,
    saves=("input", "grid"),
    backward_name="GridSampler2DBackward0",
    decomposition=_grid_sampler_decomposition,
)

grid_sampler_backward_op = define(
    "grid_sampler_2d_backward",
    inputs=("grad_output", "input", "grid"),
    outputs=("grad_input", "grad_grid"),
    meta=lambda g, x, grid, **_: (Meta(tuple(x.shape), x.dtype), Meta(tuple(grid.shape), grid.dtype)),
    backward=_no_double_backward,
    decomposition=_grid_sampler_backward_decomposition,
)


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners=None):
    """Sample ``input`` (N, C, H, W) at ``grid`` (N, Ho, Wo, 2) locations in [-1, 1] (x, y order)."""
    op = "grid_sample"
    if mode not in _MODES:
        raise ValueError(f"{op}: expected mode to be 'bilinear' or 'nearest', but got: '{mode}'")
    if padding_mode not in _PADDING_MODES:
        raise ValueError(
            f"{op}: expected padding_mode to be 'zeros', 'border', or 'reflection', but got: '{padding_mode}'"
        )
    if input.ndim != 4:
        raise NotImplementedError(f"{op}: only 4-D input (N, C, H, W) is supported, got shape {tuple(input.shape)}")
    if grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise RuntimeError(
            f"{op}: expected grid of shape (N, H_out, W_out, 2) with N={input.shape[0]}, got shape {tuple(grid.shape)}"
        )
    if input.dtype is not grid.dtype or not input.dtype.is_floating_point:
        raise RuntimeError(
            f"{op}: expected input and grid to have the same floating dtype, got {input.dtype.name} and {grid.dtype.name}"
        )
    return apply(grid_sampler_op, input, grid, mode=mode, padding_mode=padding_mode, align_corners=bool(align_corners))


def grid_sampler(input, grid, interpolation_mode: int, padding_mode: int, align_corners: bool):
    """``torch.grid_sampler`` (integer mode codes: bilinear 0, nearest 1; zeros 0, border 1, reflection 2)."""
    mode = {v: k for k, v in _MODES.items()}[interpolation_mode]
    pad = {v: k for k, v in _PADDING_MODES.items()}[padding_mode]
    return grid_sample(input, grid, mode, pad, align_corners)


def _base_coords(steps: int, align_corners: bool) -> np.ndarray:
    if steps <= 1:
        return np.zeros(max(steps, 0))
    coords = np.linspace(-1.0, 1.0, steps)
    return coords if align_corners else coords * (steps - 1) / steps


def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) of the affine maps ``theta`` (N, 2, 3) for an output of ``size``."""
    from munet.ops.creation import tensor

    size = tuple(size)
    if not theta.dtype.is_floating_point:
        raise ValueError(f"affine_grid: expected theta to have floating point type, but got {theta.dtype.name}")
    if len(size) != 4:
        raise NotImplementedError(f"affine_grid: only 4-D sizes (N, C, H, W) are supported, got size {list(size)}")
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3) or theta.shape[0] != size[0]:
        raise ValueError(
            f"affine_grid: expected a batch of 2D affine matrices of shape Nx2x3 for size {list(size)}. Got {list(theta.shape)}."
        )
    if min(size) <= 0:
        raise ValueError(f"affine_grid: expected non-zero, positive output size. Got {list(size)}")
    n, _, h, w = size
    align = bool(align_corners)
    xs, ys = _base_coords(w, align), _base_coords(h, align)
    base = np.stack(
        [np.broadcast_to(xs[None, :], (h, w)), np.broadcast_to(ys[:, None], (h, w)), np.ones((h, w))], axis=-1
    )
    base_t = tensor(base.reshape(1, h * w, 3), dtype=theta.dtype, device=theta.device)
    return (base_t @ theta.transpose(1, 2)).reshape(n, h, w, 2)


def affine_grid_generator(theta, size, align_corners: bool):
    return affine_grid(theta, size, align_corners)


# pixel shuffle -------------------------------------------------------------------------------------


def pixel_shuffle(input, upscale_factor: int):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(
            f"pixel_shuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(
            f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, "
            f"but input.size(-3)={c} is not divisible by {r * r}"
        )
    k = len(lead)
    x = input.reshape((*lead, c // (r * r), r, r, h, w))
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape((*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor: int):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(
            f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(
            f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but got height={h}, width={w}, "
            f"downscale_factor={r}"
        )
    k = len(lead)
    x = input.reshape((*lead, c, h // r, r, w // r, r))
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape((*lead, c * r * r, h // r, w // r))


# unfold / fold (im2col / col2im) ----------------------------------------------------------------


def _pair(value, what: str, op: str) -> tuple:
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise RuntimeError(f"{op}: expected {what} to be an int or a pair of ints, got {list(value)}")
        return int(value[0]), int(value[1])
    return int(value), int(value)


def _block_args(op, kernel_size, dilation, padding, stride):
    k, d, p, s = (
        _pair(v, w, op)
        for v, w in ((kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"), (stride, "stride"))
    )
    if min(k) <= 0 or min(d) <= 0 or min(s) <= 0 or min(p) < 0:
        raise RuntimeError(
            f"{op}: expected positive kernel_size, dilation and stride and non-negative padding, got kernel_size={list(k)}, "
            f"dilation={list(d)}, padding={list(p)}, stride={list(s)}"
        )
    return k, d, p, s


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C*kH*kW, L), every sliding block as a column."""
    from munet.ops.movement import pad as pad_fn
    from munet.ops.view import as_strided

    op = "unfold"
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{op}: expected input of rank 3 or 4 (N, C, H, W), got shape {tuple(input.shape)}")
    k, d, p, s = _block_args(op, kernel_size, dilation, padding, stride)
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    n, c, h, w = x.shape
    out = tuple((size + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for size, kk, pp, dd, ss in zip((h, w), k, p, d, s))
    if min(out) <= 0:
        raise RuntimeError(
            f"{op}: given input with spatial size ({h}, {w}), kernel_size={list(k)}, dilation={list(d)}, padding={list(p)}, "
            f"calculated shape of the array of sliding blocks as ({out[0]}, {out[1]}), but its components must be at least one."
        )
    if any(p):
        x = pad_fn(x, (p[1], p[1], p[0], p[0]))
    x = x.contiguous()
    hp, wp = x.shape[2:]
    size = (n, c, k[0], k[1], out[0], out[1])
    stride_ = (c * hp * wp, hp * wp, d[0] * wp, d[1], s[0] * wp, s[1])
    blocks = as_strided(x, size, stride_, x.storage_offset())
    cols = blocks.reshape(n, c * k[0] * k[1], out[0] * out[1])
    return cols.squeeze(0) if unbatched else cols


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im: (N, C*kH*kW, L) -> (N, C, H, W), summing overlapping blocks (inverse layout of unfold)."""
    from munet.ops.view import strided_scatter_add_op

    op = "fold"
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected input of rank 2 or 3 (N, C*kH*kW, L), got shape {tuple(input.shape)}")
    k, d, p, s = _block_args(op, kernel_size, dilation, padding, stride)
    h, w = _pair(output_size, "output_size", op)
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    n, ck, length = x.shape
    if ck % (k[0] * k[1]):
        raise RuntimeError(
            f"{op}: expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
            f"input.size(1)={ck} and kernel_size={list(k)}"
        )
    out = tuple((size + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for size, kk, pp, dd, ss in zip((h, w), k, p, d, s))
    if out[0] * out[1] != length or min(out) <= 0:
        raise RuntimeError(
            f"{op}: given output_size={[h, w]}, kernel_size={list(k)}, dilation={list(d)}, padding={list(p)}, stride={list(s)}, "
            f"expected size of input's dimension 2 to match the calculated number of sliding blocks {out[0]} * {out[1]} = "
            f"{out[0] * out[1]}, but got input.size(2)={length}."
        )
    c = ck // (k[0] * k[1])
    hp, wp = h + 2 * p[0], w + 2 * p[1]
    blocks = x.reshape(n, c, k[0], k[1], out[0], out[1])
    size = (n, c, k[0], k[1], out[0], out[1])
    stride_ = (c * hp * wp, hp * wp, d[0] * wp, d[1], s[0] * wp, s[1])
    padded = apply(strided_scatter_add_op, blocks, shape=(n, c, hp, wp), size=size, stride=stride_, storage_offset=0)
    result = padded.narrow(2, p[0], h).narrow(3, p[1], w) if any(p) else padded
    return result.squeeze(0) if unbatched else result
