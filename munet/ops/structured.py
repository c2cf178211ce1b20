"""Tensors assembled from others by a fixed pattern: ``block_diag``, ``diagflat``, ``vander``,
``cartesian_prod``, ``combinations`` and ``Tensor.fill_diagonal_``.

Each is a composite of public ops (padding, concatenation, cumulative products, gathers with
indices computed from the shapes alone), so gradients and devices come from those ops."""

from __future__ import annotations

import itertools

import numpy as np

from munet import _dtype as D
from munet.ops.movement import cat, diag, meshgrid, pad, stack

__all__ = ["block_diag", "diagflat", "vander", "cartesian_prod", "combinations"]
__tensor_methods__ = ["diagflat", "fill_diagonal_"]


def block_diag(*tensors):
    """The block-diagonal matrix of ``tensors`` (0-d is 1x1, 1-d is one row), in their promoted dtype."""
    import munet

    if not tensors:
        return munet.empty(1, 0)
    blocks = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.ndim} dimensions")  # fmt: skip
        blocks.append(t.reshape(1, -1) if t.ndim < 2 else t)
    dtype = blocks[0].dtype
    for b in blocks[1:]:
        dtype = D.promote_types(dtype, b.dtype)
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        right = width - left - b.shape[1]
        rows.append(pad(b.to(dtype), (left, right)))
        left += b.shape[1]
    return cat(rows, 0)


def diagflat(input, offset: int = 0):
    """The flattened ``input`` on diagonal ``offset`` of a square matrix."""
    return diag(input.flatten(), offset)


def vander(x, N: int | None = None, increasing: bool = False):  # noqa: N803 - PyTorch's name
    """The Vandermonde matrix of a vector: columns ``x**(N-1), ..., x, 1`` (reversed when
    ``increasing``), as cumulative products (an integer ``x`` gives int64)."""
    if x.ndim != 1:
        raise RuntimeError(f"vander: x must be a one-dimensional tensor, got shape {list(x.shape)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError(f"vander: N must be non-negative, got {n}")
    import munet

    dtype = x.dtype if x.dtype.is_floating_point else D.int64
    columns = munet.ones(x.shape[0], n, dtype=dtype, device=x.device)
    if n > 1:
        powers = x.to(dtype).unsqueeze(1).expand(x.shape[0], n - 1)
        columns = cat([columns[:, :1], powers], 1).cumprod(1)
    return columns if increasing else columns.flip(1)


def cartesian_prod(*tensors):
    """All tuples of one element from each 1-D tensor, as rows (one tensor: itself)."""
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"cartesian_prod: expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.flatten() for g in grids], 1)


def combinations(input, r: int = 2, with_replacement: bool = False):
    """The length-``r`` combinations of the elements of a 1-D ``input``, as rows (itertools' order)."""
    import munet

    if input.ndim != 1:
        raise RuntimeError(f"combinations: Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"combinations: Expect a non-negative number, but got {r}")
    if r == 0:
        return munet.empty(0, dtype=input.dtype, device=input.device)
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(choose(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    index = munet.tensor(rows.reshape(-1), device=input.device)
    return input.index_select(0, index).reshape(-1, r)


def fill_diagonal_(self, fill_value, wrap: bool = False):
    """Fill the main diagonal in place (all dims equal for more than 2 dims); for a tall matrix
    ``wrap=True`` restarts the diagonal every ``cols + 1`` rows."""
    import munet

    if self.ndim < 2:
        raise RuntimeError(f"fill_diagonal_: dimensions must larger than 1, got {self.ndim}")
    shape = tuple(self.shape)
    if self.ndim > 2 and len(set(shape)) != 1:
        raise RuntimeError(f"fill_diagonal_: all dimensions of input must be of equal length, got {list(shape)}")
    step = sum(int(np.prod(shape[i + 1 :])) for i in range(self.ndim))
    if self.ndim == 2 and wrap:
        positions = np.arange(0, self.numel(), step)
    else:
        positions = np.arange(min(shape)) * step
    index = munet.tensor(positions.astype(np.int64), device=self.device)
    return self.copy_(self.flatten().index_fill(0, index, fill_value).reshape(shape))
