"""Writes at integer positions that PyTorch spells differently from ``scatter``: ``put`` (at flat
positions) and ``index_reduce`` (a reduction of ``source`` slices into the slices of ``index``).
Both are ``index_put``/``scatter_reduce`` with the indices rearranged, so gradients and devices
come from those ops."""

from __future__ import annotations

from munet import _dtype as D
from munet.ops._utils import is_tensor, wrap_dim
from munet.ops.elementwise import where

__all__ = ["put", "index_reduce"]
__tensor_methods__ = ["put", "put_", "index_reduce", "index_reduce_"]

_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _check_index(name: str, index, *, vector: bool):
    if not is_tensor(index) or index.dtype not in (D.int64, D.int32):
        got = index.dtype.name if is_tensor(index) else type(index).__name__
        raise IndexError(f"{name}: expected index of dtype int64 or int32, got {got}")
    if vector and index.ndim > 1:
        raise IndexError(f"{name}: Index is supposed to be a vector, got shape {list(index.shape)}")


def put(input, index, source, accumulate: bool = False):
    """A copy of ``input`` with ``source`` written at the flat (row-major) positions ``index``
    (negative ones count from the end); ``accumulate`` adds instead, duplicates summing."""
    _check_index("put", index, vector=False)
    if index.numel() != source.numel():
        raise RuntimeError(f"put: Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")  # fmt: skip
    if source.dtype is not input.dtype:
        raise RuntimeError(f"put: Expected self.dtype to be equal to source.dtype, got {input.dtype.name} and "
                           f"{source.dtype.name}")  # fmt: skip
    n = input.numel()
    flat_index = index.reshape(-1).to(D.int64)
    if flat_index.numel() and bool(((flat_index < -n) | (flat_index >= n)).any()):
        raise IndexError(f"put: index out of range for a tensor of {n} elements")
    flat_index = where(flat_index < 0, flat_index + n, flat_index)
    flat = input.reshape(-1).index_put((flat_index,), source.reshape(-1), accumulate)
    return flat.reshape(input.shape)


def put_(self, index, source, accumulate: bool = False):
    return self.copy_(put(self.clone(), index, source, accumulate))  # the graph keeps the old values, not self


def index_reduce(input, dim: int, index, source, reduce: str, *, include_self: bool = True):
    """``input`` with slice ``index[i]`` along ``dim`` reduced (``'prod'``, ``'mean'``, ``'amax'``,
    ``'amin'``) with ``source``'s slice ``i``; ``include_self=False`` leaves ``input``'s values out of
    the reduction of the slices ``index`` names."""
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"index_reduce: reduce argument must be one of {', '.join(_REDUCTIONS)}, got {reduce!r}")
    _check_index("index_reduce", index, vector=True)
    d = wrap_dim(dim, max(input.ndim, 1), "index_reduce")
    idx = index.reshape(-1).to(D.int64)
    expected = list(input.shape) or [1]
    expected[d] = idx.shape[0]
    if list(source.shape if source.ndim else [1]) != expected:
        raise RuntimeError(f"index_reduce: expected source of shape {expected}, got {list(source.shape)}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_reduce: self ({input.dtype.name}) and source ({source.dtype.name}) must have "
                           f"the same scalar type")  # fmt: skip
    shape = [1] * len(expected)
    shape[d] = idx.shape[0]
    positions = idx.reshape(shape).expand(expected).reshape(source.shape)
    return input.scatter_reduce(d, positions, source, reduce, include_self=include_self)


def index_reduce_(self, dim: int, index, source, reduce: str, *, include_self: bool = True):
    result = index_reduce(self.clone(), dim, index, source, reduce, include_self=include_self)  # saves the copy
    return self.copy_(result)
