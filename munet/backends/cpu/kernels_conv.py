"""CPU kernel of ``convolution``: strided windows (im2col as a view) + BLAS matmuls, in chunks.

Every path works on a block of images (or, for the weight gradient, of input channels) at a
time, sized so that its columns stay in cache between the copy that gathers them and the GEMM
that reads them (``CHUNK_BYTES``). Within a block there is no Python loop over pixels, batch or
channels: the forward copies the block's receptive fields out of an ``as_strided`` view and
multiplies them by the weight straight into the result; a convolution whose output is smaller
than its kernel (the weight gradient, as ``ops/conv.py`` expresses it) contracts each block of
channels and sums the blocks; the transposed direction multiplies first and scatters the
columns back (col2im) with one strided add per kernel position. float16/bfloat16 compute in
float32, as PyTorch does on CPU.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from munet.backends.cpu.kernels_reduce import acc_dtype
from munet.backends.cpu.registry import kernel

# Bytes of columns per block: about half a core's L2 plus a share of L3 on the machines we
# measured (docs/perf/cpu.md); below ~256 KiB the per-block Python overhead shows.
CHUNK_BYTES = 1 << 21


def _blocks(total: int, bytes_per_item: int) -> list[tuple[int, int]]:
    """``[(lo, hi), ...]`` covering ``range(total)`` with about ``CHUNK_BYTES`` per block."""
    step = max(1, CHUNK_BYTES // max(bytes_per_item, 1))
    return [(lo, min(lo + step, total)) for lo in range(0, total, step)]


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


def _pitches(shape) -> tuple[int, ...]:
    """Element strides of a C-contiguous array of ``shape``."""
    return tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))


def _conv_forward(x, w, stride, padding, dilation, groups):
    kernel_size = w.shape[2:]
    windows, out = _windows(x, kernel_size, stride, padding, dilation, groups)
    if math.prod(out) >= math.prod(kernel_size):
        if all(s == 1 for s in stride):
            return _conv_wide_rows(np.ascontiguousarray(_pad(x, padding)), w, groups, dilation, out)
        return _conv_wide(windows, w, groups, out)
    if all(d == 1 for d in dilation):
        return _conv_narrow_rows(np.ascontiguousarray(_pad(x, padding)), w, groups, stride, out)
    return _conv_narrow(windows, w, groups, out)


def _conv_wide(windows, w, groups, out):
    """Output at least as large as the kernel (the usual case), one block of images at a time:
    columns (B, G, CgK, P) @ weight (G, Og, CgK) -> (B, G, Og, P), already the (N, C, *out) layout."""
    n = windows.shape[0]
    o = w.shape[0]
    cgk = w[0].size
    p = math.prod(out)
    wm = w.reshape(groups, o // groups, cgk)
    result = np.empty((n, groups, o // groups, p), dtype=windows.dtype)
    blocks = _blocks(n, groups * cgk * p * windows.itemsize)
    cols = np.empty((blocks[0][1] if blocks else 0, groups, cgk, p), dtype=windows.dtype)
    for lo, hi in blocks:
        block = cols[: hi - lo]
        np.copyto(block.reshape(windows[lo:hi].shape), windows[lo:hi])
        np.matmul(wm, block, out=result[lo:hi])
    return result.reshape((n, o) + out)


def _conv_wide_rows(xp, w, groups, dilation, out):
    """Stride-1 ``_conv_wide`` over whole input rows: output position ``o`` is computed at flat
    offset ``sum(o_i * pitch_i)`` of the (padded) input plane, so every kernel position's
    columns are one contiguous run of that plane (a long copy instead of one per output row).
    The positions past each row's valid width are computed too and dropped by a strided view."""
    n = xp.shape[0]
    o = w.shape[0]
    og = o // groups
    cg = w.shape[1]
    kernel_size = w.shape[2:]
    pitch = _pitches(xp.shape[2:])
    length = sum((m - 1) * pl for m, pl in zip(out, pitch)) + 1
    item = xp.itemsize
    st = xp.strides
    runs = as_strided(
        xp,
        (n, groups, cg) + tuple(kernel_size) + (length,),
        (st[0], st[1] * cg, st[1]) + tuple(pl * d * item for pl, d in zip(pitch, dilation)) + (item,),
        writeable=False,
    )
    wm = w.reshape(groups, og, cg * math.prod(kernel_size))
    result = np.empty((n, o) + tuple(out), dtype=xp.dtype)
    blocks = _blocks(n, groups * wm.shape[2] * length * item)
    size = blocks[0][1] if blocks else 0
    cols = np.empty((size, groups, wm.shape[2], length), dtype=xp.dtype)
    rows = np.empty((size, groups, og, length), dtype=xp.dtype)
    valid_strides = rows.strides[:1] + (length * item,) + tuple(pl * item for pl in pitch)
    for lo, hi in blocks:
        b = hi - lo
        np.copyto(cols[:b].reshape(runs[lo:hi].shape), runs[lo:hi])
        np.matmul(wm, cols[:b], out=rows[:b])
        np.copyto(result[lo:hi], as_strided(rows, (b, o) + tuple(out), valid_strides, writeable=False))
    return result


def _conv_narrow(windows, w, groups, out):
    """Output smaller than the kernel (the weight gradient: x by the output gradient)."""
    n = windows.shape[0]
    nd = len(out)
    # (G, Cg, N, *out, *K): rows are output positions, columns kernel positions
    order = (1, 2, 0) + tuple(range(3 + nd, 3 + 2 * nd)) + tuple(range(3, 3 + nd))
    kp = math.prod(w.shape[2:])
    wm = np.ascontiguousarray(w).reshape(w.shape[:2] + (kp,))
    return _contract_narrow(windows.transpose(order), wm, groups, n, out)


def _conv_narrow_rows(xp, w, groups, stride, out):
    """Dilation-1 ``_conv_narrow`` over whole input rows: the kernel is spread to the input's
    row pitch (zeros between its rows), so each output position reads one contiguous run."""
    n, c = xp.shape[:2]
    cg = c // groups
    spatial = xp.shape[2:]
    kernel_size = w.shape[2:]
    pitch = _pitches(spatial)
    length = sum((k - 1) * pl for k, pl in zip(kernel_size, pitch)) + 1
    item = xp.itemsize
    spread = np.zeros(w.shape[:2] + (length,), dtype=w.dtype)
    st = spread.strides
    np.copyto(as_strided(spread, w.shape, st[:2] + tuple(pl * item for pl in pitch)), w)
    st = xp.strides
    runs = as_strided(
        xp,
        (groups, cg, n) + tuple(out) + (length,),
        (st[1] * cg, st[1], st[0]) + tuple(pl * s * item for pl, s in zip(pitch, stride)) + (item,),
        writeable=False,
    )
    return _contract_narrow(runs, spread, groups, n, out)


def _contract_narrow(win, w, groups, n, out):
    """``result[n, g*Og + o, p] = sum_{c, k} win[g, c, n, *p, *k] * w[g*Og + o, c, k]`` (``w`` is
    C-contiguous (O, Cg, K), k flattened), one GEMM with the contraction over a block of channels:
    (G, Og, Bc*K) @ (G, Bc*K, N*P), accumulated over the blocks."""
    cg = win.shape[1]
    kp = w.shape[2]
    nd = len(out)
    rows = n * math.prod(out)
    og = w.shape[0] // groups
    wg = w.reshape(groups, og, cg * kp)
    acc = np.zeros((groups, og, rows), dtype=win.dtype)
    blocks = _blocks(cg, groups * rows * kp * win.itemsize)
    cols = np.empty((groups, rows, (blocks[0][1] if blocks else 0) * kp), dtype=win.dtype)
    # (G, Bc, N, *out, *K) -> (G, N, *out, Bc, *K): a block's columns follow its channels
    order = (0,) + tuple(range(2, 3 + nd)) + (1,) + tuple(range(3 + nd, win.ndim))
    for lo, hi in blocks:
        block = cols[:, :, : (hi - lo) * kp]
        part = win[:, lo:hi].transpose(order)
        np.copyto(block.reshape(part.shape), part)
        acc += np.matmul(wg[:, :, lo * kp : hi * kp], block.transpose(0, 2, 1))
    return np.ascontiguousarray(acc.reshape((groups * og, n) + tuple(out)).swapaxes(0, 1))


def _transpose_geometry(spatial_in, kernel_size, stride, padding, dilation, output_padding):
    """(output size, size of the uncropped buffer the columns are added into) per spatial dim."""
    out = tuple(
        (size - 1) * s - p[0] - p[1] + d * (k - 1) + 1 + op
        for size, k, s, p, d, op in zip(spatial_in, kernel_size, stride, padding, dilation, output_padding)
    )
    full = tuple(
        max((size - 1) * s + d * (k - 1) + 1, p[0] + o)
        for size, k, s, p, d, o in zip(spatial_in, kernel_size, stride, padding, dilation, out)
    )
    return out, full


def _crop(buf, padding, out):
    if buf.shape[2:] == tuple(out) and not any(p[0] for p in padding):
        return buf
    crop = tuple(slice(p[0], p[0] + o) for p, o in zip(padding, out))
    return np.ascontiguousarray(buf[(slice(None), slice(None)) + crop])


def _conv_transpose(x, w, stride, padding, dilation, groups, output_padding):
    """GEMM first, then col2im, one block of images at a time:
    columns[n, g, (og, k), p] = sum_c w[g, c, og, k] * x[n, g, c, p], added back per kernel position."""
    n, cin = x.shape[:2]
    spatial_in = x.shape[2:]
    kernel_size = w.shape[2:]
    og = w.shape[1]
    cg = cin // groups
    kp = math.prod(kernel_size)
    pin = math.prod(spatial_in)
    wm = w.reshape(groups, cg, og * kp).transpose(0, 2, 1)
    xm = x.reshape(n, groups, cg, pin)
    out, full = _transpose_geometry(spatial_in, kernel_size, stride, padding, dilation, output_padding)
    buf = np.zeros((n, groups * og) + full, dtype=np.result_type(x, w))
    blocks = _blocks(n, groups * og * kp * pin * buf.itemsize)
    cols = np.empty((blocks[0][1] if blocks else 0, groups, og * kp, pin), dtype=buf.dtype)
    positions = list(itertools.product(*(range(k) for k in kernel_size)))
    targets = [
        tuple(slice(k * d, k * d + s * (size - 1) + 1, s) for k, d, s, size in zip(pos, dilation, stride, spatial_in))
        for pos in positions
    ]
    for lo, hi in blocks:
        block = np.matmul(wm, xm[lo:hi], out=cols[: hi - lo])
        block = block.reshape((hi - lo, groups * og) + tuple(kernel_size) + tuple(spatial_in))
        target_block = buf[lo:hi]
        for pos, target in zip(positions, targets):
            target_block[(slice(None), slice(None)) + target] += block[(slice(None), slice(None)) + pos]
    return _crop(buf, padding, out)


def _conv_transpose_rows(x, w, padding, dilation, groups, output_padding):
    """Stride-1 ``_conv_transpose`` with the input spread to the output's row pitch (zeros past
    each input row), so each kernel position's columns add to one contiguous run of the output."""
    n, cin = x.shape[:2]
    spatial_in = x.shape[2:]
    kernel_size = w.shape[2:]
    nd = len(kernel_size)
    og = w.shape[1]
    cg = cin // groups
    kp = math.prod(kernel_size)
    out, full = _transpose_geometry(spatial_in, kernel_size, (1,) * nd, padding, dilation, output_padding)
    pitch = _pitches(full)
    total = math.prod(full)
    pin = spatial_in[0] * pitch[0]
    offsets = [
        sum(k * d * pl for k, d, pl in zip(pos, dilation, pitch))
        for pos in itertools.product(*(range(k) for k in kernel_size))
    ]
    wm = w.reshape(groups, cg, og * kp).transpose(0, 2, 1)
    dtype = np.result_type(x, w)
    buf = np.zeros((n, groups * og, total), dtype=dtype)
    blocks = _blocks(n, groups * og * kp * pin * buf.itemsize)
    size = blocks[0][1] if blocks else 0
    spread = np.zeros((size, cin, spatial_in[0]) + full[1:], dtype=dtype)  # zeros past each row stay
    inner = (slice(None), slice(None)) + tuple(slice(0, m) for m in spatial_in)
    cols = np.empty((size, groups, og * kp, pin), dtype=dtype)
    for lo, hi in blocks:
        b = hi - lo
        spread[:b][inner] = x[lo:hi]
        block = np.matmul(wm, spread[:b].reshape(b, groups, cg, pin), out=cols[:b])
        block = block.reshape(b, groups * og, kp, pin)
        target = buf[lo:hi]
        for k, off in enumerate(offsets):
            m = min(pin, total - off)
            target[:, :, off : off + m] += block[:, :, k, :m]
    return _crop(buf.reshape((n, groups * og) + full), padding, out)


@kernel("convolution")
def convolution(x, w, *, stride, padding, dilation, groups, transposed, output_padding):
    dtype = x.dtype
    acc = acc_dtype(x)
    if acc is not None:
        x, w = x.astype(acc), w.astype(acc)
    if transposed and all(s == 1 for s in stride):
        out = _conv_transpose_rows(x, w, padding, dilation, groups, output_padding)
    elif transposed:
        out = _conv_transpose(x, w, stride, padding, dilation, groups, output_padding)
    else:
        out = _conv_forward(x, w, stride, padding, dilation, groups)
    return out.astype(dtype, copy=False)
