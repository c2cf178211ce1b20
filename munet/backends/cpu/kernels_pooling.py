"""CPU kernels of max pooling: windows as strided views (or gathered for adaptive windows),
one vectorized argmax over each window, and PyTorch's flat-per-plane indices."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from munet.backends.cpu.kernels_reduce import upcast
from munet.backends.cpu.registry import kernel


def _select_max(windows: np.ndarray, positions, spatial):
    """Max over the trailing window dims of ``windows`` (N, C, *out, *K).

    ``positions[i]`` (broadcastable to (*out, *K)) is the input coordinate of each window cell
    along spatial dim i; the result's indices are flat in the (unpadded) input plane.
    """
    nd = len(spatial)
    lead = windows.shape[: 2 + nd]
    flat = np.ascontiguousarray(windows).reshape(lead + (-1,))
    arg = np.argmax(flat, axis=-1)[..., None]  # flat position inside the window, first max wins
    values = np.take_along_axis(flat, arg, axis=-1)[..., 0]
    index = np.zeros(lead, dtype=np.int64)
    for size, pos in zip(spatial, positions):
        pos = np.broadcast_to(pos, windows.shape[2:]).reshape(lead[2:] + (-1,))
        coord = np.take_along_axis(np.broadcast_to(pos, flat.shape), arg, axis=-1)[..., 0]
        index = index * size + coord
    return values, index


def _positions(out, kernel, stride, pad, dilation, nd):
    """Per dim i: input coordinate o*stride - pad + k*dilation, shaped for (*out, *K) broadcasting."""
    result = []
    for i in range(nd):
        o = np.arange(out[i]) * stride[i] - pad[i]
        k = np.arange(kernel[i]) * dilation[i]
        shape_o = [1] * (2 * nd)
        shape_o[i] = out[i]
        shape_k = [1] * (2 * nd)
        shape_k[nd + i] = kernel[i]
        result.append(o.reshape(shape_o) + k.reshape(shape_k))
    return result


@kernel("max_pool")
def max_pool(x, *, kernel_size, stride, padding, dilation, output_size):
    dtype = x.dtype
    x = upcast(x)
    nd = len(kernel_size)
    spatial = x.shape[2:]
    hi = tuple(
        max(0, (o - 1) * s + d * (k - 1) + 1 - size - p)
        for o, s, d, k, size, p in zip(output_size, stride, dilation, kernel_size, spatial, padding)
    )
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(zip(padding, hi)), constant_values=-np.inf)
    st = xp.strides
    shape = tuple(x.shape[:2]) + tuple(output_size) + tuple(kernel_size)
    strides = (
        st[:2] + tuple(st[2 + i] * stride[i] for i in range(nd)) + tuple(st[2 + i] * dilation[i] for i in range(nd))
    )
    windows = as_strided(xp, shape, strides, writeable=False)
    values, index = _select_max(windows, _positions(output_size, kernel_size, stride, padding, dilation, nd), spatial)
    return values.astype(dtype, copy=False), index


@kernel("adaptive_max_pool")
def adaptive_max_pool(x, *, output_size):
    dtype = x.dtype
    x = upcast(x)
    nd = len(output_size)
    spatial = x.shape[2:]
    positions = []
    for i, (size, out) in enumerate(zip(spatial, output_size)):
        o = np.arange(out)
        start, end = (o * size) // out, -((-(o + 1) * size) // out)
        width = int((end - start).max()) if out else 1
        # Windows have unequal widths: pad each to the widest by repeating its last cell,
        # which changes neither the max nor the first index where it occurs.
        pos = np.minimum(start[:, None] + np.arange(width)[None, :], end[:, None] - 1)
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = out, width
        positions.append(pos.reshape(shape))
    windows = x[(slice(None), slice(None)) + tuple(positions)]
    values, index = _select_max(windows, positions, spatial)
    return values.astype(dtype, copy=False), index
