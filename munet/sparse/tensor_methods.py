"""The sparse methods of strided tensors (``to_sparse``, ``sparse_mask``, ``to_dense``, and PyTorch's
errors for ``indices()``, ``values()``, ``coalesce()``, ...), bound onto ``munet.Tensor``; a
:class:`~munet.sparse.coo.SparseCOOTensor` overrides each with its own."""

from __future__ import annotations

from munet._tensor import Tensor
from munet.sparse import coo

_SPARSE_ONLY = ("indices", "values", "_indices", "_values", "coalesce", "is_coalesced", "_nnz")


def _sparse_dim(self: Tensor) -> int:
    """0: a strided tensor has no sparse dimensions (as PyTorch answers)."""
    return 0


def _dense_dim(self: Tensor) -> int:
    """All its dimensions are dense (as PyTorch answers for a strided tensor)."""
    return self.ndim


def bind() -> None:
    for name in _SPARSE_ONLY:
        setattr(Tensor, name, coo.sparse_only(name))
    Tensor.to_sparse = coo.dense_to_sparse
    Tensor.to_sparse_coo = coo.dense_to_sparse_coo
    Tensor.to_dense = coo.dense_to_dense
    Tensor.sparse_mask = coo.sparse_mask
    Tensor.sparse_dim = _sparse_dim
    Tensor.dense_dim = _dense_dim
