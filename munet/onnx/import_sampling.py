"""``GridSample`` (each output element samples the input at a position read from the grid) and
``DeformConv`` (a convolution whose kernel taps sample the input at offset positions).

2-d linear and nearest sampling run as ``F.grid_sample``. Cubic sampling and 3-d (volumetric) grids
run as the separable tap sum onnx's reference defines: along each spatial axis the position gives
1 (nearest), 2 (linear) or 4 (cubic, Keys' kernel with a = -0.75) taps and their weights; every
combination of taps is one gather from the flattened input, weighted by the product of its weights.
Positions outside the input are first clamped (``border``) or reflected (``reflection``); a tap
outside reads zero (``zeros``), its clamped index (``border``) or its reflected index.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

import munet
import munet.nn.functional as F
from munet.onnx.import_ops import rule

_MODES = {"linear": "bilinear", "bilinear": "bilinear", "nearest": "nearest", "cubic": "bicubic", "bicubic": "bicubic"}


@rule("GridSample")
def _grid_sample(call):
    x, grid = call.input(0), call.input(1)
    mode = _MODES.get(call.attr("mode", "linear" if call.opset >= 20 else "bilinear"))
    if mode is None:
        raise call.unsupported(f"mode={call.attr('mode')!r}")
    padding = call.attr("padding_mode", "zeros")
    if padding not in ("zeros", "border", "reflection"):
        raise call.unsupported(f"padding_mode={padding!r}")
    align_corners = bool(call.attr("align_corners", 0))
    if x.ndim == 4 and mode != "bicubic":
        return F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align_corners)
    if x.ndim < 3:
        raise call.unsupported(f"a {x.ndim}-d input")
    return sample_grid(x, grid, mode, padding, align_corners)


def sample_grid(x, grid, mode: str, padding: str, align_corners: bool):
    """GridSample of ``x`` (N, C, *spatial) at ``grid`` (N, *out, len(spatial)) as onnx's reference:
    ``mode`` is "nearest", "bilinear" or "bicubic", ``padding`` "zeros", "border" or "reflection"."""
    spatial = list(x.shape[2:])
    n = len(spatial)
    batch, channels = x.shape[0], x.shape[1]
    out_shape = list(grid.shape[1:-1])
    per_axis = []  # for each axis: [(index, weight, valid)] per tap
    for d, size in enumerate(spatial):
        g = grid[..., n - 1 - d].to(x.dtype)  # the grid lists x (the last axis) first
        position = (g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2
        low, high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
        if mode == "nearest":
            position = munet.round(position)
        if padding == "border":  # only positions past the border move (the reference's order for cubic taps)
            outside = (position < low) | (position > high)
            position = munet.where(outside, munet.clamp(position, 0, size - 1), position)
        elif padding == "reflection":
            position = _reflect(position, low, high)
        per_axis.append([_tap(i, w, size, padding, low, high) for i, w in _taps(position, mode)])
    flat = x.reshape(batch, channels, -1)
    strides = [math.prod(spatial[d + 1 :]) for d in range(n)]
    out = None
    for combo in itertools.product(*per_axis):
        index = sum(i * s for (i, _, _), s in zip(combo, strides))
        weight = combo[0][1]
        valid = combo[0][2]
        for _, w, v in combo[1:]:
            weight, valid = weight * w, valid & v
        weight = munet.where(valid, weight, munet.zeros_like(weight))
        picked = flat.gather(2, index.reshape(batch, 1, -1).expand(batch, channels, index[0].numel()))
        term = picked * weight.reshape(batch, 1, -1)
        out = term if out is None else out + term
    return out.reshape(batch, channels, *out_shape)


def _taps(position, mode: str) -> list:
    """``[(index, weight)]`` of the taps at ``position`` (float indices and weights)."""
    if mode == "nearest":
        return [(position, munet.ones_like(position))]
    base = munet.floor(position)
    t = position - base
    if mode == "bilinear":
        return [(base, 1 - t), (base + 1, t)]
    a = -0.75
    return [
        (base - 1, ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a),
        (base, ((a + 2) * t - (a + 3)) * t * t + 1),
        (base + 1, ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1),
        (base + 2, ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a),
    ]


def _tap(index, weight, size: int, padding: str, low: float, high: float) -> tuple:
    """``(int64 index inside the input, weight, valid)`` of one tap under ``padding``."""
    if padding == "zeros":
        valid = (index >= 0) & (index <= size - 1)
    else:
        valid = munet.ones_like(index, dtype=munet.bool)
        index = _reflect(index, low, high) if padding == "reflection" else index
    index = munet.clamp(munet.trunc(index), 0, size - 1).to(munet.int64)
    return index, weight, valid


def _reflect(x, low: float, high: float):
    """``x`` reflected at the borders ``low`` and ``high`` until inside (onnx's reference)."""
    span = high - low
    if span <= 0:
        return munet.full_like(x, low)
    below, above = low - x, x - high
    out = x
    for distance, near, far, outside in ((below, low, high, x < low), (above, high, low, x > high)):
        turns = munet.trunc(distance / span)
        rest = distance - turns * span
        even = munet.remainder(turns, 2) == 0
        sign = 1.0 if near == low else -1.0
        reflected = munet.where(even, near + sign * rest, far - sign * rest)
        out = munet.where(outside, reflected, out)
    return out


@rule("DeformConv")
def _deform_conv(call):
    """A 2-d convolution whose every kernel tap samples the input (bilinearly, zero outside) at its
    regular position plus a learned offset, times the mask when given; then the weights as a grouped
    matmul over the sampled columns."""
    x, w, offset, bias, mask = (call.input(i) for i in range(5))
    if x.ndim != 4:
        raise call.unsupported(f"a {x.ndim - 2}-d deformable convolution")
    batch, channels, height, width = x.shape
    out_channels, group_channels, kh, kw = w.shape
    group, offset_group = call.attr("group", 1), call.attr("offset_group", 1)
    sh, sw = call.attr("strides", [1, 1])
    dh, dw = call.attr("dilations", [1, 1])
    top, left = call.attr("pads", [0, 0, 0, 0])[:2]
    oh, ow = offset.shape[2:]
    offset = offset.reshape(batch, offset_group, kh, kw, 2, oh, ow)
    base_y = (np.arange(kh) * dh)[:, None, None, None] + (np.arange(oh) * sh - top)[None, None, :, None]
    base_x = (np.arange(kw) * dw)[None, :, None, None] + (np.arange(ow) * sw - left)[None, None, None, :]
    y = offset[:, :, :, :, 0] + munet.from_numpy(base_y.astype(np.float64)).to(x.dtype).to(x.device)
    xs = offset[:, :, :, :, 1] + munet.from_numpy(base_x.astype(np.float64)).to(x.dtype).to(x.device)
    weight_mask = None if mask is None else mask.reshape(batch, offset_group, kh, kw, oh, ow)
    grouped = x.reshape(batch, offset_group, channels // offset_group, height * width)
    taps = kh * kw * oh * ow
    columns = None
    for iy, wy in _taps(y, "bilinear"):
        for ix, wx in _taps(xs, "bilinear"):
            iy_, wy_, vy = _tap(iy, wy, height, "zeros", 0.0, height - 1.0)
            ix_, wx_, vx = _tap(ix, wx, width, "zeros", 0.0, width - 1.0)
            weight = munet.where(vy & vx, wy_ * wx_, munet.zeros_like(wy_))
            if weight_mask is not None:
                weight = weight * weight_mask
            index = (iy_ * width + ix_).reshape(batch, offset_group, 1, taps)
            picked = grouped.gather(3, index.expand(batch, offset_group, channels // offset_group, taps))
            term = picked * weight.reshape(batch, offset_group, 1, taps)
            columns = term if columns is None else columns + term
    columns = columns.reshape(batch, group, group_channels * kh * kw, oh * ow)
    out = munet.matmul(w.reshape(1, group, out_channels // group, group_channels * kh * kw), columns)
    out = out.reshape(batch, out_channels, oh, ow)
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)
