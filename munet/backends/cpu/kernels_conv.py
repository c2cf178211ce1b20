"""CPU kernel of ``convolution``: strided windows (im2col as a view) + BLAS matmuls, in blocks.

Every path works on a block of images (or, for the weight gradient, of input channels) at a
time, sized so that its columns stay in cache between the copy that gathers them and the GEMM
that reads them (``CHUNK_BYTES``). Within a block there is no Python loop over pixels, batch or
channels:

- 2-D, float32, output rows wide enough for its tiles, with a C compiler: the direct
  kernel (``direct_conv.py``: the GEMM without a column array, reading a padded copy of the input
  in place), forward, (with flipped weights) transposed and the weight gradient, before any of the
  paths below;
- forward: the block's receptive fields (the columns) are copied out of an ``as_strided`` view
  of the padded input and multiplied by the weight straight into the result; images with few
  output positions go side by side into one GEMM. The compiler passes a generated C im2col
  instead (``im2col=``), which writes the same columns from the unpadded input with zeros for
  the padding. A 1x1 convolution with stride 1 and no padding needs no columns: one GEMM over the
  input planes. At a thread budget above one the blocks are tasks on the OpenMP team
  (``column_tasks``; without it, ``munet._threads.run_tasks``);
- output smaller than the kernel (the weight gradient, as ``ops/conv.py`` expresses it): one
  GEMM per block of channels with the contraction over (channel, kernel position), accumulated;
- transposed: GEMM first, then col2im, one add per kernel position (with stride 1, one
  contiguous run of the output each).

``convolution_into(out, ...)`` writes the result into a given C-contiguous array (the compiler's
planned buffer); block temporaries come from ``scratch.work`` (kept between calls). float16 and
bfloat16 compute in float32, as PyTorch does on CPU.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from munet._threads import kernel_threads, run_tasks
from munet.backends.cpu import column_tasks
from munet.backends.cpu.direct_conv import direct_conv2d, direct_weight_grad
from munet.backends.cpu.kernels_reduce import acc_dtype
from munet.backends.cpu.registry import kernel
from munet.backends.cpu.scratch import work
from munet.ops.conv import conv_output_spatial

# Bytes of columns per block: below ~256 KiB the per-block Python overhead shows, above a few
# MiB the columns no longer stay in cache between the copy and the GEMM.
CHUNK_BYTES = 1 << 21
# Output positions per image below which ``_conv_columns`` puts a block's images side by side in
# one GEMM: a narrow GEMM (ResNet's last stage: 49 columns) runs well below BLAS's peak.
SIDE_BY_SIDE = 256
# Blocks of images per thread (at least, where the images allow) on the OpenMP team (``_column_tasks``):
# the dynamic schedule then balances a thread that starts late
TASKS_PER_THREAD = 4


def _blocks(total: int, bytes_per_item: int, chunk: int = CHUNK_BYTES) -> list[tuple[int, int]]:
    """``[(lo, hi), ...]`` covering ``range(total)`` with about ``chunk`` bytes per block."""
    step = max(1, chunk // max(bytes_per_item, 1))
    return [(lo, min(lo + step, total)) for lo in range(0, total, step)]


def _result(out, shape, dtype) -> np.ndarray:
    return np.empty(shape, dtype) if out is None else out


def _pitches(shape) -> tuple[int, ...]:
    """Element strides of a C-contiguous array of ``shape``."""
    return tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))


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


def _contiguous_planes(x: np.ndarray) -> np.ndarray:
    """``x`` itself when each (N, C) plane is C-contiguous (batch and channel strides may be
    anything, e.g. the weight gradient's channels-as-batch view), else a contiguous copy."""
    pitch = _pitches(x.shape[2:])
    if all(st == p * x.itemsize or n == 1 for st, p, n in zip(x.strides[2:], pitch, x.shape[2:])):
        return x
    return np.ascontiguousarray(x)


def _windows(xp: np.ndarray, kernel_size, stride, dilation, groups) -> tuple[np.ndarray, tuple]:
    """Every receptive field of the padded ``xp`` as a read-only view (N, G, Cg, *K, *out), and ``out``."""
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


# forward ----------------------------------------------------------------------------------------------


def _conv_forward(x, w, stride, padding, dilation, groups, out=None, im2col=None, weight_pack=None):
    kernel_size = w.shape[2:]
    if all(k == 1 for k in kernel_size) and all(s == 1 for s in stride) and not any(lo or hi for lo, hi in padding):
        return _conv_pointwise(x, w, groups, out)
    size = conv_output_spatial(x.shape[2:], kernel_size, stride, padding, dilation, False, ())
    result = direct_conv2d(x, w, stride, padding, dilation, groups, size, out, weight_pack)
    if result is not None:
        return result
    if math.prod(size) >= math.prod(kernel_size):
        result = _conv_columns(x, w, stride, padding, dilation, groups, size, out, im2col)
        if result is not None:
            return result
        # the same blocks and GEMMs with NumPy's copies of a padded input (the same bits)
        unpadded = tuple((0, 0) for _ in padding)
        return _conv_columns(_pad(x, padding), w, stride, unpadded, dilation, groups, size, out, numpy_im2col)
    result = direct_weight_grad(x, w, stride, padding, dilation, groups, size, out)
    if result is not None:
        return result
    xp = _pad(x, padding)
    windows, size = _windows(xp, kernel_size, stride, dilation, groups)
    if all(d == 1 for d in dilation):
        return _conv_narrow_rows(_contiguous_planes(xp), w, groups, stride, size, out)
    return _conv_narrow(windows, w, groups, size, out)


def numpy_im2col(cols, x, kernel_size, stride, padding, dilation, size, rows=None, threads=None, side=False) -> bool:
    """The im2col that ``_conv_columns`` calls when the compiler gives none, with NumPy's strided
    copies (any rank), of an input padded beforehand (``padding`` must be zeros); the generated
    one's arguments and layouts (``lower_cpu.generated_im2col``)."""
    if any(lo or hi for lo, hi in padding):
        return False
    n, c = x.shape[:2]
    lo, hi = rows if rows is not None else (0, size[0])
    windows, _ = _windows(x, kernel_size, stride, dilation, 1)  # (N, 1, C, *K, *out)
    windows = windows[(slice(None), 0, slice(None)) + (slice(None),) * len(kernel_size) + (slice(lo, hi),)]
    nd = len(kernel_size)
    k = c * math.prod(kernel_size)
    run = math.prod((hi - lo,) + tuple(size[1:]))
    if cols.shape != ((k, n, run) if side else (n, k, run)):
        return False
    if side:  # images side by side: (C, *K, N, *out)
        windows = windows.transpose(tuple(range(1, 2 + nd)) + (0,) + tuple(range(2 + nd, 2 + 2 * nd)))
    np.copyto(cols.reshape(windows.shape), windows)
    return True


def _conv_pointwise(x, w, groups, out):
    """A 1x1 convolution with stride 1 and no padding: the input planes are the columns already,
    one GEMM (G, Og, Cg) @ (N, G, Cg, P) -> (N, G, Og, P) straight into the result."""
    n, c = x.shape[:2]
    o = w.shape[0]
    p = math.prod(x.shape[2:])
    result = _result(out, (n, o) + tuple(x.shape[2:]), np.result_type(x, w))
    og, cg = o // groups, c // groups
    np.matmul(w.reshape(groups, og, cg), x.reshape(n, groups, cg, p), out=result.reshape(n, groups, og, p))
    return result


def _conv_columns(x, w, stride, padding, dilation, groups, size, out, im2col):
    """A forward convolution whose output is at least as large as its kernel: the columns (rows
    (channel, kernel position), one column per output position) written by ``im2col(cols,
    x_block, kernel_size, stride, padding, dilation, size, rows, threads)`` into a kept buffer, then
    a GEMM straight into the result. ``im2col`` is :func:`numpy_im2col` (NumPy's copies of a
    padded input) or the compiler's generated C (``lower_cpu.generated_im2col``: it reads the
    unpadded input and writes zeros for the padding); both copy exactly and the blocks and GEMMs
    are the same, so eager and compiled results are the same bits. Blocks of images, or of output rows
    of one image when an image's columns exceed ``CHUNK_BYTES`` (divided by the thread budget, for
    tasks enough to balance), so the columns are still in cache
    when the GEMM reads them; images with few output positions (below ``SIDE_BY_SIDE``) are laid
    side by side for one wider GEMM, whose (O, B, P) result is then copied into (B, O, P).

    With a thread budget above one the blocks are tasks on the OpenMP team (``column_tasks``: each
    its generated im2col and GEMMs on one thread, claimed as threads come free), whatever ``im2col``
    was given, so eager and compiled calls agree; blocks of images are cut finer there
    (``TASKS_PER_THREAD``), and a single image into bands of output rows. Where ``column_tasks``
    does not serve the call the blocks are tasks of ``run_tasks`` instead (a single block split by
    output channels). None when ``im2col`` is None (the caller pads and passes :func:`numpy_im2col`)
    or declines (returns False: a dtype or rank it does not handle); whatever was written by then is
    overwritten by the caller's other path."""
    n = x.shape[0]
    o = w.shape[0]
    og = o // groups
    kernel_size = w.shape[2:]
    k = groups * math.prod(w.shape[1:])  # rows of columns: (channel, kernel position)
    p = math.prod(size)
    dtype = np.result_type(x, w)
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    result = _result(out, (n, o) + size, dtype)
    if n == 0:
        return result
    x = np.ascontiguousarray(x)  # read once by the im2col: a view costs one copy, as the padding did
    wm = w.reshape(groups, og, k // groups)
    grouped = result.reshape(n, groups, og, p)
    row = k * (p // size[0]) * x.itemsize  # the columns of one output row
    geometry = (kernel_size, stride, padding, dilation, size)
    threads = kernel_threads()
    parallel = threads > 1
    if parallel:
        wm = np.ascontiguousarray(wm)
        if _column_tasks(x, wm, result, geometry, row, threads):
            return result
    if im2col is None:
        return None
    chunk = CHUNK_BYTES // threads  # smaller blocks on more threads: tasks enough to balance

    def fill(cols, images, rows, side) -> bool:
        return im2col(cols, images, *geometry, rows, 1 if parallel else threads, side is not None)

    blocks = []  # (columns' shape, images, output rows, the GEMM's view of the columns, target, side)
    if len(size) == 2 and row * size[0] > chunk:
        step = max(1, chunk // row)
        width = size[1]
        for i in range(n):
            for lo in range(0, size[0], step):
                hi = min(lo + step, size[0])
                shape = (1, k, (hi - lo) * width)
                target = grouped[i, :, :, lo * width : hi * width]
                blocks.append((shape, x[i : i + 1], (lo, hi), (groups, k // groups, -1), target, None))
    elif p < SIDE_BY_SIDE and n > 1:
        step = max(_blocks(n, row * size[0], chunk)[0][1], -(-SIDE_BY_SIDE // p))  # >= SIDE_BY_SIDE columns
        for lo in range(0, n, step):
            hi = min(lo + step, n)
            b = hi - lo
            blocks.append(
                ((k, b, p), x[lo:hi], None, (groups, k // groups, b * p), (groups, og, b * p), grouped[lo:hi])
            )
    else:
        for lo, hi in _blocks(n, row * size[0], chunk):
            blocks.append(((hi - lo, k, p), x[lo:hi], None, (hi - lo, groups, k // groups, p), grouped[lo:hi], None))

    def run(block, out_rows=slice(None), cols=None) -> bool:
        shape, images, rows, view, target, side = block
        if cols is None:
            cols = work("cols", shape, x.dtype)
            if not fill(cols, images, rows, side):
                return False
        a = wm[..., out_rows, :]
        if side is None:
            np.matmul(a, cols.reshape(view), out=target[..., out_rows, :])
            return True
        product = work("rows", target, x.dtype)[..., out_rows, :]
        np.matmul(a, cols.reshape(view), out=product)
        np.copyto(side[:, :, out_rows], product.reshape(groups, -1, images.shape[0], p).transpose(2, 0, 1, 3))
        return True

    if not parallel:
        for block in blocks:
            if not run(block):
                return None  # declined on the first block (what it checks is the same for every block)
        return result
    if len(blocks) == 1:  # one block: its columns here, the GEMM split by output channels
        (block,) = blocks
        cols = work("cols", block[0], x.dtype)
        if not fill(cols, block[1], block[2], block[5]):
            return None
        step = -(-og // threads)
        run_tasks([lambda lo=lo: run(block, slice(lo, lo + step), cols) for lo in range(0, og, step)])
        return result

    def task(block):
        if not run(block):
            raise _DeclinedError

    try:
        run_tasks([lambda block=block: task(block) for block in blocks])
    except _DeclinedError:  # every block declines alike: the caller's other path writes every element
        return None
    return result


def _column_tasks(x, wm, result, geometry, row, threads) -> bool:
    """``_conv_columns``'s blocks on the OpenMP team (``column_tasks.run``): images with few output
    positions side by side (at least ``SIDE_BY_SIDE`` columns a block, blocks of about
    ``CHUNK_BYTES / threads``), else blocks of images, at least ``TASKS_PER_THREAD`` per thread
    where there are images enough, each within ``CHUNK_BYTES / threads`` or cut into bands of output
    rows (a single image: bands enough for the threads). Each image's products have the same shape
    however its block is cut, so only the side-by-side products' bits depend on the thread count."""
    n = x.shape[0]
    size = geometry[4]
    rows = size[0] if len(size) == 2 else 1  # a 1-d convolution: one output row of size[0]
    per_row = row if len(size) == 2 else row * size[0]
    p = result[0, 0].size
    chunk = CHUNK_BYTES // threads
    if p < SIDE_BY_SIDE and n > 1:  # blocks of at least SIDE_BY_SIDE columns, a multiple of threads of them
        least = -(-SIDE_BY_SIDE // p)
        count = threads * max(1, min(TASKS_PER_THREAD, n // (least * threads)))
        step = max(min(_blocks(n, per_row * rows, chunk)[0][1], -(-n // count)), least)
        blocks = [(lo, min(lo + step, n), 0, rows) for lo in range(0, n, step)]
        return column_tasks.run(x, wm, result, blocks, True, geometry, threads)
    tasks = TASKS_PER_THREAD * threads
    step = min(_blocks(n, per_row * rows, chunk)[0][1], max(1, n // tasks))
    band = max(1, min(chunk // per_row, rows))
    if n < tasks:  # bands of rows for tasks enough, none of fewer than SIDE_BY_SIDE positions
        wide = p // SIDE_BY_SIDE
        bands = threads * max(1, min(TASKS_PER_THREAD, wide // threads)) if n == 1 else min(-(-tasks // n), wide)
        band = min(band, -(-rows // max(bands, 1)))
    if band < rows:
        blocks = [(i, i + 1, lo, min(lo + band, rows)) for i in range(n) for lo in range(0, rows, band)]
    else:
        blocks = [(lo, min(lo + step, n), 0, rows) for lo in range(0, n, step)]
    return column_tasks.run(x, wm, result, blocks, False, geometry, threads)


class _DeclinedError(Exception):
    """An im2col declined a block (``_conv_columns`` with tasks)."""


# output smaller than the kernel (the weight gradient) ------------------------------------------------


def _conv_narrow(windows, w, groups, size, out):
    """Output smaller than the kernel (the weight gradient: x by the output gradient)."""
    n = windows.shape[0]
    nd = len(size)
    # (G, Cg, N, *out, *K): rows are output positions, columns kernel positions
    order = (1, 2, 0) + tuple(range(3 + nd, 3 + 2 * nd)) + tuple(range(3, 3 + nd))
    kp = math.prod(w.shape[2:])
    wm = np.ascontiguousarray(w).reshape(w.shape[0], -1)

    def weight_block(lo, hi):
        return wm[:, lo * kp : hi * kp]

    return _contract_narrow(windows.transpose(order), weight_block, kp, w.shape[0], groups, n, size, out)


def _conv_narrow_rows(xp, w, groups, stride, size, out):
    """Dilation-1 ``_conv_narrow`` over whole input rows: the kernel is spread to the input's
    row pitch (zeros between its rows), so each output position reads one contiguous run."""
    n, c = xp.shape[:2]
    cg = c // groups
    kernel_size = w.shape[2:]
    pitch = _pitches(xp.shape[2:])
    length = sum((k - 1) * pl for k, pl in zip(kernel_size, pitch)) + 1
    item = xp.itemsize
    st = xp.strides
    runs = as_strided(
        xp,
        (groups, cg, n) + tuple(size) + (length,),
        (st[1] * cg, st[1], st[0]) + tuple(pl * s * item for pl, s in zip(pitch, stride)) + (item,),
        writeable=False,
    )
    o = w.shape[0]
    spread = []

    def weight_block(lo, hi):
        if not spread:  # the first block is the largest; the cells between kernel rows stay zero
            spread.append(work("spread", (o, hi - lo, length), w.dtype))
            spread[0][...] = 0
        block = spread[0][:, : hi - lo]
        cells = as_strided(block, (o, hi - lo) + kernel_size, block.strides[:2] + tuple(pl * item for pl in pitch))
        np.copyto(cells, w[:, lo:hi])
        return block.reshape(o, -1)  # a view: rows of the spread kernels are contiguous

    return _contract_narrow(runs, weight_block, length, o, groups, n, size, out)


def _contract_narrow(win, weight_block, kp, o, groups, n, size, out):
    """``result[n, g*Og + o, p] = sum_{c, k} win[g, c, n, *p, *k] * w[g*Og + o, c, k]``, where
    ``weight_block(lo, hi)`` gives the (O, Bc*K) weight of channels lo..hi (k flattened to ``kp``):
    one GEMM (G, Og, Bc*K) @ (G, Bc*K, N*P) per block of channels, accumulated."""
    cg = win.shape[1]
    nd = len(size)
    rows = n * math.prod(size)
    og = o // groups
    acc = np.zeros((groups, og, rows), dtype=win.dtype)
    blocks = _blocks(cg, groups * (rows + og) * kp * win.itemsize)
    cols = work("cols", (groups, rows, (blocks[0][1] if blocks else 0) * kp), win.dtype)
    # (G, Bc, N, *out, *K) -> (G, N, *out, Bc, *K): a block's columns follow its channels
    order = (0,) + tuple(range(2, 3 + nd)) + (1,) + tuple(range(3 + nd, win.ndim))
    for lo, hi in blocks:
        block = cols[:, :, : (hi - lo) * kp]
        part = win[:, lo:hi].transpose(order)
        np.copyto(block.reshape(part.shape), part)
        acc += np.matmul(weight_block(lo, hi).reshape(groups, og, -1), block.transpose(0, 2, 1))
    result = _result(out, (n, o) + tuple(size), win.dtype)
    np.copyto(result, acc.reshape((o, n) + tuple(size)).swapaxes(0, 1))
    return result


# transposed -------------------------------------------------------------------------------------------


def _transpose_geometry(spatial_in, kernel_size, stride, padding, dilation, output_padding):
    """(output size, size of the uncropped buffer the columns are added into) per spatial dim."""
    size = tuple(
        (n - 1) * s - p[0] - p[1] + d * (k - 1) + 1 + op
        for n, k, s, p, d, op in zip(spatial_in, kernel_size, stride, padding, dilation, output_padding)
    )
    full = tuple(
        max((n - 1) * s + d * (k - 1) + 1, p[0] + m)
        for n, k, s, p, d, m in zip(spatial_in, kernel_size, stride, padding, dilation, size)
    )
    return size, full


def _accumulator(out, shape, full, padding, dtype):
    """A zeroed (N, C, *full) buffer to add columns into: ``out`` itself when nothing is cropped."""
    if out is not None and full == tuple(shape[2:]) and not any(p[0] for p in padding):
        out[...] = 0
        return out
    return np.zeros(tuple(shape[:2]) + full, dtype=dtype)


def _finish(buf, out, padding, size):
    """Crop the accumulated ``buf`` to the output (into ``out`` when given)."""
    if buf is out:
        return out
    crop = buf[(slice(None), slice(None)) + tuple(slice(p[0], p[0] + m) for p, m in zip(padding, size))]
    if out is None:
        return np.ascontiguousarray(crop)
    np.copyto(out, crop)
    return out


def _conv_transpose(x, w, stride, padding, dilation, groups, output_padding, out=None):
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
    size, full = _transpose_geometry(spatial_in, kernel_size, stride, padding, dilation, output_padding)
    dtype = np.result_type(x, w)
    buf = _accumulator(out, (n, groups * og) + size, full, padding, dtype)
    blocks = _blocks(n, groups * og * kp * pin * buf.itemsize)
    cols = work("cols", (blocks[0][1] if blocks else 0, groups, og * kp, pin), dtype)
    positions = list(itertools.product(*(range(k) for k in kernel_size)))
    targets = [
        tuple(slice(k * d, k * d + s * (m - 1) + 1, s) for k, d, s, m in zip(pos, dilation, stride, spatial_in))
        for pos in positions
    ]
    for lo, hi in blocks:
        block = np.matmul(wm, xm[lo:hi], out=cols[: hi - lo])
        block = block.reshape((hi - lo, groups * og) + tuple(kernel_size) + tuple(spatial_in))
        target_block = buf[lo:hi]
        for pos, target in zip(positions, targets):
            target_block[(slice(None), slice(None)) + target] += block[(slice(None), slice(None)) + pos]
    return _finish(buf, out, padding, size)


def shifted_sum(target: np.ndarray, block: np.ndarray, offsets) -> None:
    """``target[..., q] = sum_k block[..., k, q - offsets[k]]`` over the ``q >= offsets[k]``, in
    order of ``k`` from zero (col2im of whole planes). ``target`` is (..., L), ``block`` (..., K, L).

    For ``_conv_transpose_rows`` the last ``max(offsets)`` elements of every position's run are
    zeros (columns of spread-plane cells past the input), which another implementation may rely
    on: reading ``block[..., k - 1, L + q - offsets[k]]`` for ``q < offsets[k]`` adds a zero."""
    target[...] = 0
    run = target.shape[-1]
    for k, off in enumerate(offsets):
        target[..., off:] += block[..., k, : run - off]


def _conv_transpose_rows(x, w, padding, dilation, groups, output_padding, out=None, col2im=shifted_sum):
    """Stride-1 ``_conv_transpose`` over whole output planes: the input is spread into a zeroed
    plane of the output's size, so the columns of kernel position k are the output plane shifted
    by its flat offset, and col2im (``col2im(target, columns, offsets)``, :func:`shifted_sum`) is
    one long sum per position over all channels of a group (NumPy adds a flat run several times
    faster than the same elements as rows). A shifted column only ever carries zeros past its
    own plane, so spilling into the next is harmless."""
    n, cin = x.shape[:2]
    spatial_in = x.shape[2:]
    kernel_size = w.shape[2:]
    nd = len(kernel_size)
    og = w.shape[1]
    cg = cin // groups
    kp = math.prod(kernel_size)
    size, full = _transpose_geometry(spatial_in, kernel_size, (1,) * nd, padding, dilation, output_padding)
    pitch = _pitches(full)
    total = math.prod(full)
    offsets = [
        sum(k * d * pl for k, d, pl in zip(pos, dilation, pitch))
        for pos in itertools.product(*(range(k) for k in kernel_size))
    ]
    # rows ordered (k, og): the columns of one kernel position are one (og, total) run per group
    wm = np.ascontiguousarray(w.reshape(groups, cg, og, kp).transpose(0, 3, 2, 1)).reshape(groups, kp * og, cg)
    dtype = np.result_type(x, w)
    shape = (n, groups * og) + size
    exact = out is not None and full == tuple(size) and not any(p[0] for p in padding)
    buf = out if exact else np.empty(tuple(shape[:2]) + full, dtype)  # every element is written below
    flat = buf.reshape(n, groups, og * total)
    run = og * total
    blocks = _blocks(n, groups * og * kp * total * buf.itemsize)
    count = blocks[0][1] if blocks else 0
    spread = work("spread", (count, cin) + full, dtype)
    spread[...] = 0  # only the input's own cells are written below: the rest stays zero
    inner = (slice(None), slice(None)) + tuple(slice(0, m) for m in spatial_in)
    cols = work("cols", (count, groups, kp * og, total), dtype)
    for lo, hi in blocks:
        b = hi - lo
        spread[:b][inner] = x[lo:hi]
        block = np.matmul(wm, spread[:b].reshape(b, groups, cg, total), out=cols[:b])
        col2im(flat[lo:hi], block.reshape(b, groups, kp, run), offsets)
    return _finish(buf, out, padding, size)


def _conv_transpose_direct(x, w, padding, dilation, groups, output_padding, out=None):
    """A stride-1 transposed convolution as the forward one it equals, for ``direct_conv2d``: the
    kernel flipped, its in/out channels swapped per group, and padding ``d*(k-1) - p`` (the
    trailing side plus ``output_padding``). None where ``direct_conv2d`` declines."""
    if x.ndim != 4:
        return None
    kernel_size = w.shape[2:]
    cin, og = w.shape[:2]
    cg = cin // groups
    flipped = w[:, :, ::-1, ::-1].reshape(groups, cg, og, *kernel_size).swapaxes(1, 2)
    flipped = flipped.reshape(groups * og, cg, *kernel_size)
    size, _ = _transpose_geometry(x.shape[2:], kernel_size, (1, 1), padding, dilation, output_padding)
    forward = tuple(
        (d * (k - 1) - lo, d * (k - 1) - hi + op)
        for k, d, (lo, hi), op in zip(kernel_size, dilation, padding, output_padding)
    )
    return direct_conv2d(x, flipped, (1, 1), forward, dilation, groups, size, out)


# entry points -----------------------------------------------------------------------------------------


def convolution_into(
    out,
    x,
    w,
    *,
    stride,
    padding,
    dilation,
    groups,
    transposed,
    output_padding,
    col2im=shifted_sum,
    im2col=None,
    weight_pack=None,
):
    """The ``convolution`` kernel writing into ``out`` (C-contiguous, the result's shape and dtype;
    ``None``: allocate). Returns the result. ``col2im`` computes a stride-1 transposed
    convolution's :func:`shifted_sum` and ``im2col`` (see :func:`_conv_columns`; None: NumPy's
    strided copies) a forward convolution's columns (the compiler passes generated kernels);
    ``weight_pack`` (``direct_conv.WeightPack``) keeps the forward direct kernel's packed weight
    between calls (the compiler passes one where the weight is a tensor with a version counter)."""
    if transposed and all(s == 1 for s in stride):
        result = _conv_transpose_direct(x, w, padding, dilation, groups, output_padding, out)
        if result is not None:
            return result
        return _conv_transpose_rows(x, w, padding, dilation, groups, output_padding, out, col2im)
    if transposed:
        return _conv_transpose(x, w, stride, padding, dilation, groups, output_padding, out)
    return _conv_forward(x, w, stride, padding, dilation, groups, out, im2col, weight_pack)


@kernel("convolution")
def convolution(x, w, *, stride, padding, dilation, groups, transposed, output_padding):
    dtype = x.dtype
    acc = acc_dtype(x)
    if acc is not None:
        x, w = x.astype(acc), w.astype(acc)
    out = convolution_into(
        None,
        x,
        w,
        stride=stride,
        padding=padding,
        dilation=dilation,
        groups=groups,
        transposed=transposed,
        output_padding=output_padding,
    )
    return out.astype(dtype, copy=False)
