"""ONNX operators that place values by computed positions: ``TensorScatter``, ``Col2Im``,
``MaxUnpool``; and ``BitCast``.

Positions that depend only on shapes and attributes are computed on the host (NumPy) and the values
move with one MuNet scatter on the program's device. ``BitCast`` reinterprets bits, which MuNet has no
op for: it reads its input on the host (under ``munet.compile`` that ends the graph) and views the
bytes as the target type, as NumPy's ``view`` does (little endian, same width).
"""

from __future__ import annotations

import math

import numpy as np

import munet
from munet.onnx import values as held
from munet.onnx.import_ops import rule


@rule("BitCast")
def _bit_cast(call):
    kind, target = call.input_kind(0), call.dtype_attr("to")
    array = np.array(held.to_numpy(call.host(0), kind), order="C")
    if array.dtype.itemsize != target.np.itemsize:
        raise call.unsupported(f"a bit cast from {array.dtype} to {target.np} (different widths)")
    return held.as_held(array.view(target.np), target)


@rule("TensorScatter")
def _tensor_scatter(call):
    """``update`` written into a copy of ``past_cache`` along ``axis`` from each batch entry's
    ``write_indices`` (0 when absent), wrapping around the axis in ``circular`` mode."""
    past, update = call.input(0), call.input(1)
    axis = call.attr("axis", -2) % past.ndim
    if axis == 0:
        raise call.unsupported("axis=0 (the batch axis)")
    batch, length, size = past.shape[0], update.shape[axis], past.shape[axis]
    start = call.input(2).to(munet.int64) if call.has(2) else munet.zeros(batch, dtype=munet.int64, device=past.device)
    positions = start.reshape(batch, 1) + munet.arange(length, device=past.device).reshape(1, length)
    mode = call.attr("mode", "linear")
    if mode == "circular":
        positions = munet.remainder(positions, size)
    elif mode != "linear":
        raise call.unsupported(f"mode={mode!r}")
    shape = [1] * past.ndim
    shape[0], shape[axis] = batch, length
    return past.scatter(axis, positions.reshape(shape).expand(*update.shape), update)


@rule("Col2Im")
def _col2im(call):
    """Columns ``(N, C * prod(block), L)`` summed back into an image: each column entry lands at its
    block location's position plus its offset in the block (positions computed on the host)."""
    x = call.input(0)
    image = [int(v) for v in np.asarray(call.host(1)).reshape(-1)]
    block = [int(v) for v in np.asarray(call.host(2)).reshape(-1)]
    n = len(image)
    dilations = list(call.attr("dilations", [1] * n))
    strides = list(call.attr("strides", [1] * n))
    pads = list(call.attr("pads", [0] * (2 * n)))
    padded = [size + pads[d] + pads[d + n] for d, size in enumerate(image)]
    counts = [(p - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1 for d, p in enumerate(padded)]
    offsets = np.stack(np.meshgrid(*(np.arange(k) for k in block), indexing="ij"), -1).reshape(-1, n)
    places = np.stack(np.meshgrid(*(np.arange(c) for c in counts), indexing="ij"), -1).reshape(-1, n)
    where = places[None, :, :] * np.asarray(strides) + offsets[:, None, :] * np.asarray(dilations)
    flat = np.ravel_multi_index(tuple(where[..., d] for d in range(n)), padded).reshape(-1)
    batch, k, length = x.shape[0], math.prod(block), math.prod(counts)
    if x.shape[1] % k or x.shape[2] != length:
        raise ValueError(
            f"munet.onnx: node {call.node.name!r}: Col2Im input of shape {tuple(x.shape)} does not match "
            f"blocks {block} over image {image} ({length} block locations)"
        )
    channels = x.shape[1] // k
    index = munet.from_numpy(flat).to(x.device).reshape(1, 1, -1).expand(batch, channels, k * length)
    columns = x.reshape(batch, channels, k * length)
    zeros = munet.zeros(batch, channels, math.prod(padded), dtype=x.dtype, device=x.device)
    out = zeros.scatter_add(2, index, columns).reshape(batch, channels, *padded)
    return out[(slice(None), slice(None), *(slice(pads[d], pads[d] + image[d]) for d in range(n)))]


@rule("MaxUnpool")
def _max_unpool(call):
    """Each value of ``X`` written at its index ``I`` (counted over the whole output, as MaxPool's
    Indices output) of a zero output whose shape is ``output_shape`` or the pooling's inverse."""
    x, indices = call.input(0), call.input(1).to(munet.int64)
    kernel = list(call.attr("kernel_shape"))
    n = len(kernel)
    strides = list(call.attr("strides", [1] * n))
    pads = list(call.attr("pads", [0] * (2 * n)))
    if call.has(2):
        shape = [int(v) for v in np.asarray(call.host(2)).reshape(-1)]
    else:
        spatial = [
            (s - 1) * st + k - pads[d] - pads[d + n] for d, (s, st, k) in enumerate(zip(x.shape[2:], strides, kernel))
        ]
        shape = [*x.shape[:2], *spatial]
    out = munet.zeros(math.prod(shape), dtype=x.dtype, device=x.device)
    return out.scatter(0, indices.reshape(-1), x.reshape(-1)).reshape(shape)
