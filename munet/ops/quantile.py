"""Quantiles: ``quantile`` and ``nanquantile``, composites of ``sort``, ``gather`` and ``lerp``.

As in PyTorch, the slice is sorted (NaN last), the rank ``q * (n - 1)`` is taken among all values
(``quantile``: a slice with a NaN gives NaN) or among the non-NaN ones (``nanquantile``: an all-NaN
slice gives NaN), and the value at the rank is interpolated between its neighbours. Gradients flow
through the sort and the interpolation.
"""

from __future__ import annotations

from munet import _dtype as D
from munet.ops._utils import is_tensor, wrap_dim
from munet.ops.linalg_factor import outs

__all__ = ["nanquantile", "quantile"]
__functional__: list[str] = []
__tensor_methods__ = ["nanquantile", "quantile"]

INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _q_tensor(input, q):
    from munet.ops.creation import tensor

    if is_tensor(q):
        if q.dtype is not input.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        if q.ndim > 1:
            raise RuntimeError(f"quantile() q must be a scalar or 1D tensor, got {q.ndim}D")
        values = q.detach().flatten().tolist()
        q = q.to(input.device)
    else:
        values = [float(q)]
        q = tensor(float(q), dtype=input.dtype, device=input.device)
    for v in values:
        if not 0 <= v <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {v}")
    return q


def _quantile(input, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool):
    if not is_tensor(input):
        raise TypeError(f"quantile(): expected a tensor input, got {type(input).__name__}")
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if interpolation not in INTERPOLATIONS:
        raise RuntimeError(
            f"quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, but got {interpolation}"
        )
    q = _q_tensor(input, q)
    if dim is None:
        x, out_shape = input.flatten(), [1] * input.ndim if keepdim else []
    else:
        d = wrap_dim(dim, max(input.ndim, 1), "quantile")
        x = input.reshape(-1) if input.ndim == 0 else input.movedim(d, -1)
        out_shape = list(input.shape)
        if keepdim and input.ndim:
            out_shape[d] = 1
        elif input.ndim:
            del out_shape[d]
    ordered = x.sort(dim=-1).values
    n = x.shape[-1]
    nan = x.detach().isnan()
    if ignore_nan:
        last = (n - nan.sum(dim=-1)).to(input.dtype) - 1  # index of the last non-NaN value
    else:
        last = nan.any(dim=-1).logical_not().to(input.dtype) * (n - 1)
    qs = q.reshape(q.shape + (1,) * last.ndim)
    ranks = qs * last.clamp(min=0)
    # A slice that must answer NaN (quantile with a NaN, nanquantile with only NaN) reads the end.
    must_nan = nan.all(dim=-1) if ignore_nan else nan.any(dim=-1)
    ranks = ranks.masked_fill(must_nan, float(n - 1))
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.floor().long()
    above = ranks.ceil().long()
    expanded = ordered.expand(tuple(ranks.shape) + (n,))
    low = expanded.gather(-1, below.unsqueeze(-1)).squeeze(-1)
    high = expanded.gather(-1, above.unsqueeze(-1)).squeeze(-1)
    weights = 0.5 if interpolation == "midpoint" else (ranks - below.to(input.dtype))
    result = low.lerp(high, weights)
    return result.reshape(tuple(q.shape) + tuple(out_shape))


def quantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear", out=None):
    """The ``q``-th quantiles (a float, or a 1-d tensor of them in ``[0, 1]``) of ``input`` along
    ``dim`` (all of it by default). A 1-d ``q`` adds a leading dim of its length. A slice holding a
    NaN gives NaN. ``interpolation``: 'linear', 'lower', 'higher', 'midpoint' or 'nearest'."""
    return outs(_quantile(input, q, dim, keepdim, interpolation, ignore_nan=False), out)


def nanquantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear", out=None):
    """:func:`quantile` ignoring NaN values; a slice of only NaN gives NaN."""
    return outs(_quantile(input, q, dim, keepdim, interpolation, ignore_nan=True), out)
