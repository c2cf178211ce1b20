"""Counting values into bins: ``bincount``, ``histc``, ``histogram`` and ``histogramdd``.

All three are composites: a bin index per element (integer values, a linear map of the value, or a
search in the bin edges), then ``scatter_add`` of ones or weights into zeros. Their output length
depends on the data (``bincount``) or their range does (``histc``/``histogram`` without a range), so
eager code reads it on the host, as PyTorch does. The counts have no gradient with respect to the
input; a weighted count is differentiable in the weights.
"""

from __future__ import annotations

import builtins
from collections import namedtuple

from munet import _dtype as D
from munet.ops._utils import is_tensor
from munet.ops.linalg_factor import outs

__all__ = ["bincount", "histc", "histogram", "histogramdd"]
__functional__: list[str] = []
__tensor_methods__ = ["bincount", "histc", "histogram"]

HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])
HistogramddResult = namedtuple("histogramdd", ["hist", "bin_edges"])
builtins_range = builtins.range  # histogramdd's range= parameter shadows the builtin


def bincount(input, weights=None, minlength: int = 0):
    """Count of each value ``0..max(input)`` in the 1-d non-negative integer ``input`` (length at
    least ``minlength``); with ``weights``, the sum of the weights of each value (float64 unless the
    weights are float32)."""
    from munet.ops.creation import zeros

    if not is_tensor(input) or input.ndim != 1 or input.dtype.category != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError(f"bincount: minlength should be >= 0, got {minlength}")
    if input.numel() and input.min().item() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    length = max(int(minlength), input.max().item() + 1 if input.numel() else 0)
    if weights is None:
        counts = zeros(length, dtype=D.int64, device=input.device)
        return counts.scatter_add(0, input.long(), counts.new_ones(input.shape))
    if tuple(weights.shape) != tuple(input.shape):
        raise RuntimeError(
            f"bincount: weights should be 1-d and have the same length as input, got weights of shape "
            f"{list(weights.shape)} for input of shape {list(input.shape)}"
        )
    dtype = D.float32 if weights.dtype is D.float32 else D.float64
    sums = zeros(length, dtype=dtype, device=input.device)
    return sums.scatter_add(0, input.long(), weights.to(dtype))


def _check_float(x, op: str) -> None:
    if not is_tensor(x):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f'"{op}" not implemented for {x.dtype.name!r}: expected a floating-point input')


def _bin_range(x, low, high, op: str) -> tuple[float, float]:
    """PyTorch's range rules: ``None`` is the data's range (``[0, 1]`` for no data); an empty range
    widens by 0.5 on each side."""
    if low is None:
        low, high = (x.min().item(), x.max().item()) if x.numel() else (0.0, 1.0)
    if low > high:
        raise RuntimeError(f"{op}: min should not exceed max, but got min {low} max {high}")
    if low == high:
        low, high = low - 0.5, high + 0.5
    return float(low), float(high)


def _count(bin_index, keep, weight, bins: int, dtype, device):
    """Sum of ``weight`` (or ones) over the kept elements of each bin."""
    from munet.ops.creation import zeros

    ones = keep.to(dtype) if weight is None else keep.to(dtype) * weight.to(dtype)
    index = bin_index.clamp(0, bins - 1).long().flatten()
    return zeros(bins, dtype=dtype, device=device).scatter_add(0, index, ones.flatten())


def histc(input, bins: int = 100, min: float = 0, max: float = 0, *, out=None):  # noqa: A002 - PyTorch's names
    """Histogram of ``input`` in ``bins`` equal bins over ``[min, max]`` (the data's range when
    they are equal); values outside are ignored, values equal to ``max`` count in the last bin."""
    _check_float(input, "histc")
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("torch.histc: max must be larger than min")
    x = input.detach()
    low, high = _bin_range(x, *((None, None) if min == max else (min, max)), "torch.histc")
    keep = (x >= low) & (x <= high)
    bin_index = ((x - low) * bins / (high - low)).floor()
    return outs(_count(bin_index, keep, None, bins, input.dtype, input.device), out)


def _edges(x, bins, range, op: str):  # noqa: A002 - PyTorch's name
    """The bin edges along one dim: ``bins`` itself (an increasing 1-d tensor), or ``bins + 1`` equally
    spaced edges over ``range`` (default the data's range)."""
    from munet.ops.creation import linspace

    if is_tensor(bins):
        if bins.ndim != 1 or bins.numel() < 2:
            raise RuntimeError(
                f"{op}: bins tensor should have one dimension and at least 2 elements, got {list(bins.shape)}"
            )
        return bins.to(x.dtype)
    if bins <= 0:
        raise RuntimeError(f"{op}: bins must be > 0, but got {bins}")
    low, high = _bin_range(x, *(range or (None, None)), "torch.histogramdd")
    return linspace(low, high, bins + 1, dtype=x.dtype, device=x.device)


def histogram(input, bins=100, *, range=None, weight=None, density: bool = False, out=None):  # noqa: A002
    """``(hist, bin_edges)`` of ``input``: ``bins`` equal bins over ``range`` (default the data's
    range) or the given increasing 1-d tensor of edges. The last bin includes its right edge;
    ``weight`` weighs each element; ``density`` divides by the total and the bin widths."""
    from munet.ops.sort import searchsorted

    _check_float(input, "histogram")
    x = input.detach()
    edges = _edges(x, bins, range, "histogram")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError(
            f"histogram: weight should have the same shape as input, got {list(weight.shape)} and {list(input.shape)}"
        )
    nbins = edges.numel() - 1
    keep = (x >= edges[0]) & (x <= edges[-1])
    bin_index = searchsorted(edges, x.flatten(), right=True).reshape(x.shape) - 1
    hist = _count(bin_index, keep, weight, nbins, input.dtype, input.device)
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return outs(HistogramResult(hist, edges), out)


def histogramdd(input, bins, *, range=None, weight=None, density: bool = False):  # noqa: A002
    """``(hist, bin_edges)`` of the points in the rows of ``input`` (shape ``(..., D)``): a D-dim
    histogram whose bins along dim ``d`` are ``bins[d]`` equal bins (an int for all dims) over
    ``range[2d], range[2d + 1]`` (default the data's range), or the edges ``bins[d]`` (tensors).
    The last bin of each dim includes its right edge; ``weight`` (shape ``(...)``) weighs each point;
    ``density`` divides by the total and the bin volumes."""
    from munet.ops.sort import searchsorted

    _check_float(input, "histogramdd")
    if input.ndim < 1:
        raise RuntimeError(f"histogramdd: input tensor should have at least 1 dimension, got {input.ndim}")
    dims = input.shape[-1]
    x = input.detach().reshape(-1, dims)
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * dims
    if len(per_dim) != dims:
        raise RuntimeError(
            f"histogramdd: expected {dims} sequences of bin edges for each dimension, got {len(per_dim)}"
        )
    if range is not None and len(range) != 2 * dims:
        raise RuntimeError(f"histogramdd: expected {2 * dims} values for range, got {len(range)}")
    if weight is not None and tuple(weight.shape) != tuple(input.shape[:-1]):
        raise RuntimeError(f"histogramdd: weight should have shape {list(input.shape[:-1])}, got {list(weight.shape)}")
    edges, flat, keep, sizes = [], None, None, []
    for d in builtins_range(dims):
        column = x[:, d].contiguous()
        bounds = None if range is None else (range[2 * d], range[2 * d + 1])
        e = _edges(column, per_dim[d], bounds, "histogramdd")
        n = e.numel() - 1
        inside = (column >= e[0]) & (column <= e[-1])
        index = (searchsorted(e, column, right=True) - 1).clamp(0, n - 1)
        flat = index if flat is None else flat * n + index
        keep = inside if keep is None else keep & inside
        edges.append(e)
        sizes.append(n)
    total = 1
    for n in sizes:
        total *= n
    flat_weight = None if weight is None else weight.reshape(-1)
    hist = _count(flat, keep, flat_weight, total, input.dtype, input.device).reshape(sizes)
    if density:
        volume = None
        for d, e in enumerate(edges):
            width = (e[1:] - e[:-1]).reshape([-1 if i == d else 1 for i in builtins_range(dims)])
            volume = width if volume is None else volume * width
        hist = hist / (hist.sum() * volume)
    return HistogramddResult(hist, edges)
