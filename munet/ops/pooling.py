"""Pooling: max, average, adaptive and power-average pooling over 1-3 spatial dims.

Max pooling (``max_pool``, ``adaptive_max_pool``) is a composite with two outputs (values, and
indices flat per plane as in PyTorch): its decomposition takes the windows as a strided view (or
an index, for adaptive windows) and applies PyTorch's choice rule, written once in
``_select_in_windows``; cpu and vulkan keep one-pass kernels for it, and the cpu compile target
a generated window kernel, each tested against the decomposition. Its gradient is the composite
``max_pool_backward``, which scatters into the input planes at those indices (``scatter_add``,
its decomposition), so it is differentiable again and a compile target may run it as one kernel
of its own (cpu: a gather where the windows tile the input, ``compiler/codegen/primitives.py``). Average pooling is a depthwise convolution with a ones kernel
divided by PyTorch's window counts; adaptive average pooling multiplies by per-dim averaging
matrices. No op here loops over pixels, batch or channels.
"""

from __future__ import annotations

import math

import numpy as np

from munet.ops._registry import Meta, apply, define

__all__ = [
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_pool1d_with_indices",
    "avg_pool1d",
    "adaptive_avg_pool1d",
]
# torch.adaptive_max_pool1d returns (values, indices) while F.adaptive_max_pool1d returns values:
# one name cannot be both, so only the functional form is exported.
__functional__ = [
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
    "lp_pool1d",
    "lp_pool2d",
]
__tensor_methods__: list[str] = []

_LAYOUT = {1: "(N, C, L)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}


# shared helpers ------------------------------------------------------------------------------------


def _tuple(value, n: int, what: str, op: str) -> tuple:
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            value = tuple(value) * n
        if len(value) != n:
            raise RuntimeError(f"{op}: {what} must either be a single int, or a tuple of {n} ints, got {list(value)}")
        return tuple(int(v) for v in value)
    return (int(value),) * n


def pooling_output_size(size: int, kernel: int, pad: int, stride: int, dilation: int, ceil_mode: bool) -> int:
    """PyTorch's ``pooling_output_shape``: with ``ceil_mode`` the last window must start inside."""
    numer = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = numer // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _batched(input, n: int, op: str):
    from munet.ops._utils import is_tensor

    if not is_tensor(input):
        raise TypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"{op}: expected input of rank {n + 1} or {n + 2} {_LAYOUT[n]}, got shape {tuple(input.shape)}"
        )
    if input.ndim == n + 2 and input.shape[1] == 0:
        raise RuntimeError(f"{op}: expected input with non-zero channels, got shape {tuple(input.shape)}")
    if any(s == 0 for s in input.shape[-n:]):
        raise RuntimeError(f"{op}: expected input with non-zero spatial sizes, got shape {tuple(input.shape)}")
    return (input, False) if input.ndim == n + 2 else (input.unsqueeze(0), True)


def _window_args(op: str, n: int, input, kernel_size, stride, padding, dilation, ceil_mode):
    kernel = _tuple(kernel_size, n, "kernel_size", op)
    stride = (
        kernel
        if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)
        else _tuple(stride, n, "stride", op)
    )
    pad = _tuple(padding, n, "padding", op)
    dil = _tuple(dilation, n, "dilation", op)
    if any(k <= 0 for k in kernel) or any(s <= 0 for s in stride) or any(d <= 0 for d in dil):
        raise RuntimeError(
            f"{op}: kernel_size, stride and dilation must be greater than zero, got kernel_size={list(kernel)}, "
            f"stride={list(stride)}, dilation={list(dil)}"
        )
    if any(p < 0 or p > k // 2 for p, k in zip(pad, kernel)):
        raise RuntimeError(
            f"{op}: pad should be at most half of effective kernel size, but got pad={list(pad)}, "
            f"kernel_size={list(kernel)} and dilation={list(dil)}"
        )
    spatial = tuple(input.shape[-n:])
    out = tuple(
        pooling_output_size(s, k, p, st, d, ceil_mode) for s, k, p, st, d in zip(spatial, kernel, pad, stride, dil)
    )
    if any(o <= 0 for o in out):
        raise RuntimeError(f"{op}: given input size {list(spatial)}, calculated output size {list(out)} is too small")
    return kernel, stride, pad, dil, out


def _max_pool_backward(ctx, grad, _grad_indices=None):
    """Each output's gradient goes to the input element it selected (summed where windows overlap)."""
    windows = {k: ctx.attrs.get(k) for k in ("kernel_size", "stride", "padding", "dilation")}
    indices = ctx.saved_tensor("indices")
    return apply(max_pool_backward_op, grad, indices, input_shape=tuple(ctx.input_shapes[0]), **windows)


def _max_pool_backward_meta(grad, indices, *, input_shape, kernel_size, stride, padding, dilation):
    return Meta(tuple(input_shape), grad.dtype)


def _max_pool_backward_decomposition(grad, indices, *, input_shape, kernel_size, stride, padding, dilation):
    """``grad`` added into zero input planes at ``indices``: a cell chosen by several windows gets
    their sum, an unchosen one +0.0. The window attributes (None for adaptive pooling) do not enter:
    they only tell a fast kernel whether the windows tile the input."""
    from munet.ops.creation import zeros

    n, c = input_shape[:2]
    planes = zeros((n, c, math.prod(input_shape[2:])), dtype=grad.dtype, device=grad.device)
    return planes.scatter_add(2, indices.reshape(n, c, -1), grad.reshape(n, c, -1)).reshape(tuple(input_shape))


def _max_pool_backward_backward(ctx, gg):
    """Linear in ``grad``: its gradient is ``gg`` read back at the chosen cells."""
    indices = ctx.saved_tensor("indices")
    n, c = indices.shape[:2]
    return gg.reshape(n, c, -1).gather(2, indices.reshape(n, c, -1)).reshape(tuple(indices.shape)), None


max_pool_backward_op = define(
    "max_pool_backward",
    inputs=("grad", "indices"),
    meta=_max_pool_backward_meta,
    backward=_max_pool_backward_backward,
    saves=("indices",),
    decomposition=_max_pool_backward_decomposition,
)


def _select_in_windows(windows, cells, nd: int):
    """Max pooling's rule, written once: per window (the trailing ``nd`` dims of ``windows``), the
    last NaN if the window holds one, else the first cell holding the maximum; ``cells`` (broadcast
    to ``windows``) is each cell's flat index in the input plane, -1 for padding, which is never
    chosen (a window of -inf reports its first input cell). PyTorch's loop: start from -inf,
    replace where ``v > best or isnan(v)``. Returns the chosen (values, indices); a chosen -0.0
    stays -0.0."""
    from munet.ops.creation import arange
    from munet.ops.elementwise import where

    window = tuple(windows.shape[-nd:])
    dims = tuple(range(windows.ndim - nd, windows.ndim))
    size = math.prod(window)
    position = arange(size, device=windows.device).reshape(window)  # the cell's place in its window
    best = windows.amax(dims, keepdim=True)
    first = where((cells >= 0) & (windows == best), position, size).amin(dims, keepdim=True)
    last_nan = where(windows.isnan(), position, -1).amax(dims, keepdim=True)
    at = position == where(best.isnan(), last_nan, first)
    values = where(at, windows, -math.inf).amax(dims)
    return values, where(at, cells, -1).amax(dims)


def _windows(t, *, kernel_size, stride, dilation, output_size):
    """The pooling windows of ``t`` (N, C, *spatial) as a strided view (N, C, *output_size, *kernel_size)."""
    from munet.ops.view import as_strided

    nd = len(kernel_size)
    st = t.stride()
    shape = tuple(t.shape[:2]) + tuple(output_size) + tuple(kernel_size)
    strides = (
        st[:2] + tuple(st[2 + i] * stride[i] for i in range(nd)) + tuple(st[2 + i] * dilation[i] for i in range(nd))
    )
    return as_strided(t, shape, strides, t.storage_offset())


def _max_pool_decomposition(x, *, kernel_size, stride, padding, dilation, output_size):
    """Unpadded: the windows as a strided view of the input, the cells' flat indices as the same
    view of an ``arange`` plane, and ``_select_in_windows``. With ``padding`` (or ``ceil_mode``'s
    last windows reaching past the input): ``_padded_max_pool``."""
    from munet.ops.creation import arange

    spatial = tuple(x.shape[2:])
    after = tuple(
        max(0, (o - 1) * s + d * (k - 1) + 1 - size - p)
        for o, s, d, k, size, p in zip(output_size, stride, dilation, kernel_size, spatial, padding)
    )
    window = dict(kernel_size=kernel_size, stride=stride, dilation=dilation, output_size=output_size)
    if any(padding) or any(after):
        return _padded_max_pool(x, ((0, 0), (0, 0)) + tuple(zip(padding, after)), window)
    plane = arange(math.prod(spatial), device=x.device).reshape((1, 1) + spatial)
    return _select_in_windows(_windows(x.contiguous(), **window), _windows(plane, **window), len(kernel_size))


def _padded_max_pool(x, pads, window):
    """An unpadded ``max_pool`` of the input padded with -inf (``pads`` before and after each dim):
    the same values, and its indices mapped from the padded plane back to the input's (gathered
    from an ``arange`` plane of the input padded with -1). Padding is never chosen over an input
    cell, except where every input cell of a window is -inf: that window reports its first input
    cell (the least non-negative cell of that plane in the window, which depends on the shapes
    alone). A compile target generating unpadded max pooling (cpu) then runs one window kernel."""
    from munet.ops.creation import arange
    from munet.ops.elementwise import where
    from munet.ops.movement import constant_pad_op

    nd = len(window["kernel_size"])
    spatial = tuple(x.shape[2:])
    padded = apply(constant_pad_op, x, pad=pads, value=-math.inf)
    values, flat = apply(max_pool_op, padded, padding=(0,) * nd, **window)
    plane = apply(
        constant_pad_op, arange(math.prod(spatial), device=x.device).reshape((1, 1) + spatial), pad=pads, value=-1
    )
    index = plane.reshape(-1)[flat]  # each padded-plane cell's input cell (-1: padding)
    dims = tuple(range(2 + nd, 2 + 2 * nd))
    cells = _windows(plane, **window)
    first = where(cells >= 0, cells, math.prod(spatial)).amin(dims)
    return values, where(values == -math.inf, first, index)


def _adaptive_positions(size: int, out: int, device):
    """(out, width) input positions of PyTorch's adaptive windows along one dim
    ([floor(i*size/out), ceil((i+1)*size/out))), each padded to the widest (``width``, from the
    sizes alone) by repeating its last cell. The bounds are counts (``start = #{j >= 1: j*out <=
    i*size}``, ``end = #{j: j*out < (i+1)*size}``), which every device computes exactly."""
    from munet.ops.creation import arange

    start, end = adaptive_bounds(size, out)
    width = int((end - start).max()) if out else 1
    i = arange(out, device=device).reshape(out, 1)
    j = arange(size, device=device)
    first = (j[1:] * out <= i * size).sum(1, keepdim=True)
    stop = (j * out < (i + 1) * size).sum(1, keepdim=True)
    return (first + arange(width, device=device)).minimum(stop - 1)


def _adaptive_max_pool_decomposition(x, *, output_size):
    """The adaptive windows (``_adaptive_positions``) gathered by index, and
    ``_select_in_windows``: a window's repeated last cell changes neither its first maximum nor
    the index of its last NaN."""
    from munet.ops.creation import arange

    nd = len(output_size)
    spatial = tuple(x.shape[2:])
    plane = arange(math.prod(spatial), device=x.device).reshape(spatial)
    positions = []
    for i, (size, out) in enumerate(zip(spatial, output_size)):
        pos = _adaptive_positions(size, out, x.device)
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = pos.shape
        positions.append(pos.reshape(shape))
    windows = x[(slice(None), slice(None)) + tuple(positions)]
    return _select_in_windows(windows, plane[tuple(positions)], nd)


def _max_pool_meta(x, *, kernel_size, stride, padding, dilation, output_size):
    from munet import _dtype as D

    shape = tuple(x.shape[:2]) + tuple(output_size)
    return Meta(shape, x.dtype), Meta(shape, D.int64)


def _adaptive_max_meta(x, *, output_size):
    from munet import _dtype as D

    shape = tuple(x.shape[:2]) + tuple(output_size)
    return Meta(shape, x.dtype), Meta(shape, D.int64)


max_pool_op = define(
    "max_pool",
    meta=_max_pool_meta,
    outputs=("result", "indices"),
    nondiff_outputs=(1,),
    backward=_max_pool_backward,
    saves=("indices",),
    backward_name="MaxPoolWithIndicesBackward0",
    decomposition=_max_pool_decomposition,
)

adaptive_max_pool_op = define(
    "adaptive_max_pool",
    meta=_adaptive_max_meta,
    outputs=("result", "indices"),
    nondiff_outputs=(1,),
    backward=_max_pool_backward,
    saves=("indices",),
    backward_name="AdaptiveMaxPoolBackward0",
    decomposition=_adaptive_max_pool_decomposition,
)


# max pooling ----------------------------------------------------------------------------------------


def _max_pool_nd(n, op, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x, unbatched = _batched(input, n, op)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    kernel, stride, pad, dil, out = _window_args(op, n, x, kernel_size, stride, padding, dilation, ceil_mode)
    values, indices = apply(
        max_pool_op, x, kernel_size=kernel, stride=stride, padding=pad, dilation=dil, output_size=out
    )
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool_nd(1, "max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over (kH, kW) windows; ``stride`` defaults to ``kernel_size``; padding counts as -inf.

    With ``return_indices`` also returns, per output, the flat index ``h * W + w`` of the chosen
    element in its (H, W) input plane (PyTorch's convention).
    """
    return _max_pool_nd(2, "max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool_nd(3, "max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool1d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=True
):
    return _max_pool_nd(1, "max_pool1d_with_indices", input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=True
):
    return _max_pool_nd(2, "max_pool2d_with_indices", input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=True
):
    return _max_pool_nd(3, "max_pool3d_with_indices", input, kernel_size, stride, padding, dilation, ceil_mode, True)


# average pooling ------------------------------------------------------------------------------------


def _window_counts(size: int, kernel: int, stride: int, pad: int, out: int, count_include_pad: bool) -> np.ndarray:
    """PyTorch's per-output divisor along one dim (window clipped to input, or to input+padding)."""
    start = np.arange(out) * stride - pad
    end = np.minimum(start + kernel, size + pad)
    if count_include_pad:
        return (end - start).astype(np.float64)
    return (np.minimum(end, size) - np.maximum(start, 0)).astype(np.float64)


def _avg_pool_nd(n, op, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    from munet.ops.conv import convolution_op
    from munet.ops.creation import ones, tensor

    x, unbatched = _batched(input, n, op)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    kernel, stride, pad, _, out = _window_args(op, n, x, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError(f"{op}: divisor must be not zero")
    spatial = tuple(x.shape[2:])
    nb, c = x.shape[:2]
    # Pad the far side enough for ceil_mode's last window; those cells are zeros and never counted.
    pads = tuple((p, max(p, (o - 1) * s + k - size - p)) for size, k, s, p, o in zip(spatial, kernel, stride, pad, out))
    planes = x.reshape((nb * c, 1) + spatial)
    window = ones((1, 1) + kernel, dtype=x.dtype, device=x.device)
    sums = apply(
        convolution_op,
        planes,
        window,
        stride=stride,
        padding=pads,
        dilation=(1,) * n,
        groups=1,
        transposed=False,
        output_padding=(0,) * n,
    )
    for i, o in enumerate(out):
        if sums.shape[2 + i] != o:
            sums = sums.narrow(2 + i, 0, o)
    sums = sums.reshape((nb, c) + out)
    if divisor_override is not None:
        result = sums / divisor_override
    else:
        counts = np.ones((), dtype=np.float64)
        for size, k, s, p, o in zip(spatial, kernel, stride, pad, out):
            counts = np.multiply.outer(counts, _window_counts(size, k, s, p, o, count_include_pad))
        result = sums / tensor(counts, dtype=x.dtype, device=x.device)
    return result.squeeze(0) if unbatched else result


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _avg_pool_nd(1, "avg_pool1d", input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(
    input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    """Mean over (kH, kW) windows, divided by the window size (``count_include_pad``), by the
    number of input elements in it (``count_include_pad=False``), or by ``divisor_override``."""
    return _avg_pool_nd(
        2, "avg_pool2d", input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def avg_pool3d(
    input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    return _avg_pool_nd(
        3, "avg_pool3d", input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


# adaptive pooling ----------------------------------------------------------------------------------


def _adaptive_output_size(op: str, n: int, x, output_size) -> tuple:
    if isinstance(output_size, (list, tuple)):
        sizes = tuple(output_size)
        if len(sizes) == 1:
            sizes = sizes * n
    else:
        sizes = (output_size,) * n
    if len(sizes) != n:
        raise RuntimeError(f"{op}: output_size must be a single int or a tuple of {n} ints, got {list(sizes)}")
    spatial = tuple(x.shape[-n:])
    sizes = tuple(s if o is None else int(o) for o, s in zip(sizes, spatial))
    if any(o < 0 for o in sizes):
        raise RuntimeError(f"{op}: elements of output_size must be greater than or equal to 0, got {list(sizes)}")
    return sizes


def adaptive_bounds(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's adaptive windows along one dim: [floor(i*size/out), ceil((i+1)*size/out))."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _averaging_matrix(size: int, out: int) -> np.ndarray:
    start, end = adaptive_bounds(size, out)
    cols = np.arange(size)
    inside = (cols[None, :] >= start[:, None]) & (cols[None, :] < end[:, None])
    return inside / (end - start)[:, None]


def _adaptive_avg_pool_nd(n, op, input, output_size):
    from munet.ops.creation import tensor

    x, unbatched = _batched(input, n, op)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    sizes = _adaptive_output_size(op, n, x, output_size)
    if sizes == tuple(x.shape[2:]):
        x = x.clone()
    for i, o in enumerate(sizes):
        dim = x.ndim - n + i
        size = x.shape[dim]
        if o == size:
            continue
        m = tensor(_averaging_matrix(size, o).T, dtype=x.dtype, device=x.device)
        x = (x.transpose(dim, -1) @ m).transpose(dim, -1)
    return x.squeeze(0) if unbatched else x


def adaptive_avg_pool1d(input, output_size):
    return _adaptive_avg_pool_nd(1, "adaptive_avg_pool1d", input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """Average over PyTorch's adaptive windows so the output is ``output_size`` (None keeps a dim)."""
    return _adaptive_avg_pool_nd(2, "adaptive_avg_pool2d", input, output_size)


def adaptive_avg_pool3d(input, output_size):
    return _adaptive_avg_pool_nd(3, "adaptive_avg_pool3d", input, output_size)


def _adaptive_max_pool_nd(n, op, input, output_size, return_indices):
    x, unbatched = _batched(input, n, op)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point input, got {x.dtype.name}")
    sizes = _adaptive_output_size(op, n, x, output_size)
    values, indices = apply(adaptive_max_pool_op, x, output_size=sizes)
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max_pool_nd(1, "adaptive_max_pool1d", input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max_pool_nd(2, "adaptive_max_pool2d", input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _adaptive_max_pool_nd(3, "adaptive_max_pool3d", input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    return _adaptive_max_pool_nd(1, "adaptive_max_pool1d_with_indices", input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    return _adaptive_max_pool_nd(2, "adaptive_max_pool2d_with_indices", input, output_size, True)


# power-average pooling --------------------------------------------------------------------------------


def _lp_pool(n, op, input, norm_type, kernel_size, stride, ceil_mode):
    kernel = _tuple(kernel_size, n, "kernel_size", op)
    pool = avg_pool1d if n == 1 else avg_pool2d
    out = pool(input.pow(norm_type), kernel, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(math.prod(kernel)).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(1, "lp_pool1d", input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``(sum over window of x**p) ** (1/p)``, PyTorch's formula (via avg_pool)."""
    return _lp_pool(2, "lp_pool2d", input, norm_type, kernel_size, stride, ceil_mode)
