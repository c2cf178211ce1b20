"""CPU kernels of max pooling with PyTorch's flat-per-plane indices: ``max_pool`` keeps a
running maximum over the kernel positions of strided window views; ``adaptive_max_pool``
gathers its unequal windows and takes one argmax over each; ``max_pool_backward`` (a composite)
routes the gradient.

With a C compiler (and ``MUNET_EAGER_C`` not 0), the windows the compiled plan generates kernels for (unpadded max pooling; a
gradient whose windows tile the input, as ``MaxPool2d(2)``'s do) run those same kernels here
(``codegen/primitives.py``: one multi-threaded pass instead of a NumPy pass per kernel position,
or a scatter), so eager and compiled steps give the same bits; the NumPy code serves the rest."""

from __future__ import annotations

import ctypes
import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from munet._threads import kernel_threads
from munet.backends.cpu import compiled_formula
from munet.backends.cpu.kernels_indexing import scatter
from munet.backends.cpu.kernels_reduce import upcast
from munet.backends.cpu.registry import kernel
from munet.backends.cpu.scratch import work
from munet.compiler.codegen import build
from munet.compiler.codegen.c import render_c
from munet.compiler.codegen.kernel import short_dtype
from munet.compiler.codegen.primitives import max_pool_backward_kernel, max_pool_kernel

# Below this many output elements the NumPy code runs (a C launch costs more there); tests set it to 0
MIN_ELEMENTS = 8192
_generated: dict = {}  # kernel name -> compiled function


def _run_generated(built, inputs, outputs) -> bool:
    """Run the kernel IR kernel ``built`` (None: not this form) on C-contiguous ``inputs`` into
    ``outputs``; False (nothing written) where it does not serve: no kernel, or eager C off (no C
    compiler, or ``MUNET_EAGER_C=0``, as for the formula kernels)."""
    if built is None or not compiled_formula.enabled():
        return False
    fn = _generated.get(built.name)
    if fn is None:
        fn = _generated[built.name] = build.load_kernel(render_c(built), built.name)[0]
    ins = (ctypes.c_void_p * len(inputs))(*(a.ctypes.data for a in inputs))
    outs = (ctypes.c_void_p * len(outputs))(*(a.ctypes.data for a in outputs))
    fn(ctypes.addressof(ins), ctypes.addressof(outs), None, kernel_threads())
    return True


def _select_max(windows: np.ndarray, positions, spatial):
    """Max over the trailing window dims of ``windows`` (N, C, *out, *K).

    ``positions[i]`` (broadcastable to (*out, *K)) is the input coordinate of each window cell
    along spatial dim i; the result's indices are flat in the (unpadded) input plane.
    """
    nd = len(spatial)
    lead = windows.shape[: 2 + nd]
    flat = np.ascontiguousarray(windows).reshape(lead + (-1,))
    arg = np.argmax(flat, axis=-1)  # flat position inside the window, first max (or NaN) wins
    nan = np.isnan(flat)
    if nan.any():  # PyTorch reports a window's last NaN
        last = flat.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
        arg = np.where(nan.any(axis=-1), last, arg)
    arg = arg[..., None]
    values = np.take_along_axis(flat, arg, axis=-1)[..., 0]
    index = np.zeros(lead, dtype=np.int64)
    for size, pos in zip(spatial, positions):
        pos = np.broadcast_to(pos, windows.shape[2:]).reshape(lead[2:] + (-1,))
        coord = np.take_along_axis(np.broadcast_to(pos, flat.shape), arg, axis=-1)[..., 0]
        index = index * size + coord
    return values, index


def _window_starts(out, stride, pad, dilation, spatial):
    """Per dim: each window's first cell, and the first of its cells inside the input (PyTorch
    reports that one when a window holds nothing above -inf)."""
    starts, firsts = [], []
    for o, s, p, d, size in zip(out, stride, pad, dilation, spatial):
        start = np.arange(o) * s - p
        skip = np.where(start < 0, -(start // d), 0)  # ceil(-start / d) cells of padding
        starts.append(start)
        firsts.append(np.minimum(start + skip * d, size - 1))
    return starts, firsts


def _flat(coords, spatial) -> np.ndarray:
    """Flat index in the input plane of the grid ``coords[0] x coords[1] x ...`` (broadcast)."""
    nd = len(spatial)
    index = np.zeros((1,) * nd, dtype=np.int64)
    for i, (c, size) in enumerate(zip(coords, spatial)):
        shape = [1] * nd
        shape[i] = len(c)
        index = index * size + c.reshape(shape)
    return index


@kernel("max_pool")
def max_pool(x, *, kernel_size, stride, padding, dilation, output_size):
    """A running maximum over the kernel positions, one vectorized pass over a strided view each.

    A cell replaces the maximum only when strictly greater (the first maximum wins, as in
    PyTorch); a window holding NaN reports NaN and its last NaN. Indices are flat in the
    unpadded input plane.
    """
    dtype = x.dtype
    x = upcast(x)
    lead = tuple(x.shape[:2]) + tuple(output_size)
    best, index = np.empty(lead, x.dtype), np.empty(lead, np.int64)
    windows = dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)
    if best.size >= MIN_ELEMENTS:
        x = np.ascontiguousarray(x)
        built = max_pool_kernel(x.shape, short_dtype(x.dtype), output_size=output_size, **windows)
        if _run_generated(built, [x], [best, index]):
            return best.astype(dtype, copy=False), index
    max_pool_into(
        (best, index),
        x,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        dilation=dilation,
        output_size=output_size,
    )
    return best.astype(dtype, copy=False), index


def max_pool_into(out, x, *, kernel_size, stride, padding, dilation, output_size):
    """``max_pool`` writing (values, indices) into ``out``, a pair of arrays; values have ``x``'s dtype."""
    best, index = out
    nd = len(kernel_size)
    spatial = x.shape[2:]
    hi = tuple(
        max(0, (o - 1) * s + d * (k - 1) + 1 - size - p)
        for o, s, d, k, size, p in zip(output_size, stride, dilation, kernel_size, spatial, padding)
    )
    xp = x
    if any(padding) or any(hi):
        xp = np.pad(x, ((0, 0), (0, 0)) + tuple(zip(padding, hi)), constant_values=-np.inf)
    lead = tuple(x.shape[:2]) + tuple(output_size)
    st = xp.strides
    windows = as_strided(
        xp,
        lead + tuple(kernel_size),
        st[:2] + tuple(st[2 + i] * stride[i] for i in range(nd)) + tuple(st[2 + i] * dilation[i] for i in range(nd)),
        writeable=False,
    )
    positions = list(itertools.product(*(range(k) for k in kernel_size)))
    # chosen = 1 + the last kernel position that raised the maximum (0: none did), built with
    # branch-free integer multiply/max instead of masked stores
    counter = np.uint8 if len(positions) < 255 else np.int32
    chosen = work("chosen", lead, counter)
    take = work("take", lead, bool)
    raised = work("raised", lead, counter)
    first = 1
    if xp is x:
        # no padding: the first cell starts the maximum (a -inf or NaN there ends the same as
        # when nothing raised it: index of the first cell, or the NaN pass below)
        np.copyto(best, windows[(Ellipsis,) + positions[0]])
        chosen[...] = 1
        first = 2
    else:
        best[...] = -np.inf
        chosen[...] = 0
    for number, pos in enumerate(positions[first - 1 :], start=first):
        cell = windows[(Ellipsis,) + pos]
        np.greater(cell, best, out=take)
        np.multiply(take, counter(number), out=raised)
        np.maximum(chosen, raised, out=chosen)
        np.maximum(best, cell, out=best)  # NaN propagates
    starts, firsts = _window_starts(output_size, stride, padding, dilation, spatial)
    base = _flat(starts, spatial).reshape(-1)
    pitch = [math.prod(spatial[i + 1 :]) for i in range(nd)]
    # offsets[0] is never used as is: windows without a winner get their first valid cell below
    offsets = np.array([0] + [sum(k * d * p for k, d, p in zip(pos, dilation, pitch)) for pos in positions])
    flat_out = (-1, base.size)
    np.take(offsets, chosen, out=index, mode="clip")  # chosen is in range: "clip" skips the bounds check
    np.add(index.reshape(flat_out), base, out=index.reshape(flat_out))
    if not chosen.all():  # windows with nothing above -inf
        np.copyto(index, np.broadcast_to(_flat(firsts, spatial), lead), where=chosen == 0)
    nan = np.isnan(best)
    if nan.any():
        for number, pos in enumerate(positions, start=1):
            last = nan & np.isnan(windows[(Ellipsis,) + pos])
            np.copyto(index, np.broadcast_to((base + offsets[number]).reshape(output_size), lead), where=last)
    # the value is the chosen cell's: where the maximum is zero, the running maximum may hold the
    # other zero of a -0.0/+0.0 tie, so those few are read back at their index
    zero = np.nonzero(best == 0)
    if zero[0].size:
        best[zero] = x.reshape(x.shape[0], x.shape[1], -1)[zero[0], zero[1], index[zero]]


@kernel("max_pool_backward")
def max_pool_backward(grad, indices, *, input_shape, kernel_size, stride, padding, dilation):
    """The composite's value (``ops/pooling.py``: ``grad`` added into zero input planes at
    ``indices``): the generated gather where the windows tile the input, else the decomposition's own
    scatter kernel on the same arrays, so both give the decomposition's bits."""
    n, c = input_shape[:2]
    windows = dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)
    if grad.size >= MIN_ELEMENTS:
        grad, indices = np.ascontiguousarray(grad), np.ascontiguousarray(indices, np.int64)
        built = max_pool_backward_kernel(
            grad.shape, indices.shape, short_dtype(grad.dtype), input_shape=input_shape, **windows
        )
        out = np.empty(tuple(input_shape), grad.dtype)
        if _run_generated(built, [indices, grad], [out]):
            return out
    planes = np.zeros((n, c, math.prod(input_shape[2:])), grad.dtype)
    src = grad.reshape(n, c, -1)
    return scatter(planes, indices.reshape(n, c, -1), src, dim=2, reduce="add").reshape(tuple(input_shape))


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
