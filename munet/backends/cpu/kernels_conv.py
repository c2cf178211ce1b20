"""CPU kernel of ``convolution``: strided windows (im2col as a view) + one batched BLAS matmul.

The forward gathers every receptive field with ``as_strided`` (no Python loop over pixels,
batch or channels) and contracts it with the weight in a single ``np.matmul``. The transposed
direction multiplies first and scatters the columns back (col2im) with one strided add per
kernel position. float16/bfloat16 compute in float32, as PyTorch does on CPU.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from munet.backends.cpu.kernels_reduce import acc_dtype
from munet.backends.cpu.registry import kernel


def _pad(x: np.ndarray, padding) -> np.ndarray:
    """Zero-pad the spatial dims by ``(lo, hi)`` pairs; a negative amount crops instead."""
    if not any(lo or hi for lo, hi in padding):
        return x
    crop = tuple(slice(max(-lo, 0), size - max(-hi, 0)) for (lo, hi), size in zip(padding, x.shape[2:]))
    x = x[(slice(None), slice(None)) + crop]
    pads = tuple((max(lo, 0), max(hi, 0)) for lo, hi in padding)
    out = np.zeros(x.shape[:2] + tuple(n + lo + hi for n, (lo, hi) in zip(x.shape[2:], pads)), dtype=x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape[2:], pads))] = x
    return out


def _windows(x: np.ndarray, kernel_size, stride, padding, dilation, groups) -> tuple[np.ndarray, tuple]:
    """Every receptive field as a read-only view of shape (N, G, Cg, *K, *out), and ``out``."""
    xp = _pad(x, padding)
    n, c = xp.shape[:2]
    spatial = xp.shape[2:]
    out = tuple((size - d * (k - 1) - 1) // s + 1 for size, k, s, d in zip(spatial, kernel_size, stride, dilation))
    cg = c // groups
    st = xp.strides
    shape = (n, groups, cg) + tuple(kernel_size) + out
    strides = (
        (st[0], st[1] * cg, st[1])
        + tuple(st[2 + i] * d for i, d in enumerate(dilation))
        + tuple(st[2 + i] * s for i, s in enumerate(stride))
    )
    return as_strided(xp, shape, strides, writeable=False), out


def _conv_forward(x, w, stride, padding, dilation, groups):
    n = x.shape[0]
    o = w.shape[0]
    nd = w.ndim - 2
    windows, out = _windows(x, w.shape[2:], stride, padding, dilation, groups)
    cgk = w[0].size
    p = math.prod(out)
    wm = w.reshape(groups, o // groups, cgk)
    if p >= math.prod(w.shape[2:]) and nd > 1 and all(st == 1 for st in stride):
        return _conv_forward_full_width(x, wm, o, padding, dilation, groups, w.shape[2:], out)
    if p >= math.prod(w.shape[2:]):
        # Wide output (the usual case): columns (N, G, CgK, P), copied with long contiguous runs;
        # (G, Og, CgK) @ (N, G, CgK, P) -> (N, G, Og, P) is already the (N, C, *spatial) layout.
        cols = np.ascontiguousarray(windows).reshape(n, groups, cgk, p)
        return np.matmul(wm, cols).reshape((n, o) + out)
    # Small output, large kernel (the weight gradient): one tall GEMM (G, N*P, CgK) @ (G, CgK, Og).
    order = (1, 0) + tuple(range(3 + nd, 3 + 2 * nd)) + (2,) + tuple(range(3, 3 + nd))
    cols = np.ascontiguousarray(windows.transpose(order)).reshape(groups, n * p, cgk)
    res = np.matmul(cols, wm.transpose(0, 2, 1))
    res = res.reshape(groups, n, p, o // groups).transpose(1, 0, 3, 2)
    return np.ascontiguousarray(res).reshape((n, o) + out)


def _conv_forward_full_width(x, wm, o, padding, dilation, groups, kernel_size, out):
    """Stride-1 convolution over the flattened padded input, computing full-width rows.

    Every kernel position then reads one contiguous run of the flattened plane, so the column
    copy moves long runs; the few extra columns past each row's end are dropped afterwards.
    """
    nd = len(kernel_size)
    first_lo, first_hi = padding[0]
    xp = _pad(x, ((first_lo, first_hi + 1),) + tuple(padding[1:]))  # one spare row covers the overrun
    n, c = xp.shape[:2]
    spatial = xp.shape[2:]
    rest = math.prod(spatial[1:])
    length = out[0] * rest
    cg = c // groups
    plane = [math.prod(spatial[i + 1 :]) for i in range(nd)]
    item = xp.itemsize
    st = xp.strides
    shape = (n, groups, cg) + tuple(kernel_size) + (length,)
    strides = (st[0], st[1] * cg, st[1]) + tuple(plane[i] * dilation[i] * item for i in range(nd)) + (item,)
    cols = np.ascontiguousarray(as_strided(xp, shape, strides, writeable=False)).reshape(
        n, groups, cg * math.prod(kernel_size), length
    )
    res = np.matmul(wm, cols).reshape((n, o, out[0]) + tuple(spatial[1:]))
    return np.ascontiguousarray(res[(slice(None),) * 3 + tuple(slice(0, m) for m in out[1:])])


def _conv_transpose(x, w, stride, padding, dilation, groups, output_padding):
    n, cin = x.shape[:2]
    spatial_in = x.shape[2:]
    kernel_size = w.shape[2:]
    og = w.shape[1]
    cg = cin // groups
    kp = math.prod(kernel_size)
    pin = math.prod(spatial_in)
    # columns[n, g, (og, k), p] = sum_c w[g, c, og, k] * x[n, g, c, p]
    wm = np.ascontiguousarray(w.reshape(groups, cg, og * kp).transpose(0, 2, 1))
    cols = np.matmul(wm, x.reshape(n, groups, cg, pin))
    cols = cols.reshape((n, groups * og) + tuple(kernel_size) + tuple(spatial_in))
    out = tuple(
        (size - 1) * s - p[0] - p[1] + d * (k - 1) + 1 + op
        for size, k, s, p, d, op in zip(spatial_in, kernel_size, stride, padding, dilation, output_padding)
    )
    full = tuple(
        max((size - 1) * s + d * (k - 1) + 1, p[0] + o)
        for size, k, s, p, d, o in zip(spatial_in, kernel_size, stride, padding, dilation, out)
    )
    buf = np.zeros((n, groups * og) + full, dtype=cols.dtype)
    nd = len(kernel_size)
    # col2im: one strided accumulation per kernel position (kp iterations, each fully vectorized).
    for pos in itertools.product(*(range(k) for k in kernel_size)):
        target = tuple(
            slice(k * d, k * d + s * (size - 1) + 1, s) for k, d, s, size in zip(pos, dilation, stride, spatial_in)
        )
        buf[(slice(None), slice(None)) + target] += cols[(slice(None), slice(None)) + pos + (slice(None),) * nd]
    crop = tuple(slice(p[0], p[0] + o) for p, o in zip(padding, out))
    return np.ascontiguousarray(buf[(slice(None), slice(None)) + crop])


def _conv_transpose_as_conv(x, w, padding, dilation, groups, output_padding):
    """A stride-1 transposed convolution is a plain one with the kernel flipped and its channel
    axes swapped per group, padded by the rest of the effective kernel: no col2im needed."""
    cin, og = w.shape[:2]
    kernel_size = w.shape[2:]
    nd = len(kernel_size)
    flipped = w.reshape((groups, cin // groups, og) + kernel_size).swapaxes(1, 2)
    flipped = flipped[(slice(None),) * 3 + (slice(None, None, -1),) * nd].reshape(
        (groups * og, cin // groups) + kernel_size
    )
    pads = tuple(
        (d * (k - 1) - lo, d * (k - 1) - hi + op)
        for k, d, (lo, hi), op in zip(kernel_size, dilation, padding, output_padding)
    )
    return _conv_forward(x, np.ascontiguousarray(flipped), (1,) * nd, pads, dilation, groups)


@kernel("convolution")
def convolution(x, w, *, stride, padding, dilation, groups, transposed, output_padding):
    dtype = x.dtype
    acc = acc_dtype(x)
    if acc is not None:
        x, w = x.astype(acc), w.astype(acc)
    if transposed and all(st == 1 for st in stride):
        out = _conv_transpose_as_conv(x, w, padding, dilation, groups, output_padding)
    elif transposed:
        out = _conv_transpose(x, w, stride, padding, dilation, groups, output_padding)
    else:
        out = _conv_forward(x, w, stride, padding, dilation, groups)
    return out.astype(dtype, copy=False)
