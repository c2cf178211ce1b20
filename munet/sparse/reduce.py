"""``munet.sparse.mm`` and ``munet.sparse.sum``: the products and sums PyTorch's ``torch.sparse`` gives
a COO tensor, written with dense ops over its indices and values (so a dense operand gets its gradient
through them)."""

from __future__ import annotations

from munet import _dtype as D
from munet._tensor import Tensor
from munet.ops import creation
from munet.sparse.coo import SparseCOOTensor

__all__ = ["mm", "sum"]


def mm(mat1, mat2, reduce: str = "sum") -> Tensor:
    """``mat1 @ mat2`` for a 2-D sparse COO ``mat1`` (two sparse dims) and a dense 2-D ``mat2``: a dense
    ``(n, m)`` result, differentiable in ``mat2`` (PyTorch's ``torch.sparse.mm``; only ``reduce='sum'``).
    Two dense operands give ``munet.mm``."""
    from munet.ops.linalg import mm as dense_mm

    if reduce != "sum":
        raise RuntimeError(f"sparse.mm: MuNet supports only reduce='sum', got {reduce!r}")
    if not mat1.is_sparse and not mat2.is_sparse:
        return dense_mm(mat1, mat2)
    if not mat1.is_sparse or mat2.is_sparse:
        raise RuntimeError(
            "sparse.mm: MuNet multiplies a sparse COO matrix by a dense one only (sparse @ dense), got "
            f"{mat1.layout!r} @ {mat2.layout!r}"
        )
    if mat1.ndim != 2 or mat1.sparse_dim() != 2 or mat2.ndim != 2:
        raise RuntimeError(
            "sparse.mm: expected a 2-D sparse matrix with two sparse dims and a 2-D dense matrix, got shapes "
            f"{list(mat1.shape)} (sparse_dim {mat1.sparse_dim()}) and {list(mat2.shape)}"
        )
    n, k = mat1.shape
    if mat2.shape[0] != k:
        raise RuntimeError(
            f"sparse.mm: mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {mat2.shape[0]}x{mat2.shape[1]})"
        )
    dtype = D.promote_types(mat1.dtype, mat2.dtype)
    rows, cols = mat1._indices().unbind(0)
    products = mat2.to(dtype).index_select(0, cols) * mat1._values().to(dtype).unsqueeze(1)
    out = creation.zeros((n, mat2.shape[1]), dtype=dtype, device=mat2.device)
    return out.index_add(0, rows, products)


def sum(input: SparseCOOTensor, dim=None, dtype=None) -> Tensor:  # noqa: A001 - PyTorch's name
    """The sum over ``dim`` (an int or a list; all dims by default), PyTorch's ``torch.sparse.sum``: a
    dense tensor when every sparse dim is summed (a 0-d one for all dims), else a coalesced sparse one."""
    if not isinstance(input, SparseCOOTensor):
        raise RuntimeError(f"sparse.sum: expected a sparse COO tensor, got layout {input.layout!r}")
    values = input._values()
    if dim is None:
        total = values.sum()
        return total if dtype is None else total.to(dtype)
    ndim, sparse_dim = input.ndim, input.sparse_dim()
    dims = sorted({_wrap(d, ndim) for d in (dim if isinstance(dim, (list, tuple)) else [dim])})
    dense_dims = [d - sparse_dim + 1 for d in dims if d >= sparse_dim]
    if dense_dims:
        values = values.sum(dense_dims)
    if dtype is not None:
        values = values.to(dtype)
    summed_sparse = [d for d in dims if d < sparse_dim]
    if len(summed_sparse) == sparse_dim:
        return values.sum(0)
    keep = [d for d in range(sparse_dim) if d not in summed_sparse]
    indices = input._indices()[keep]
    shape = [n for d, n in enumerate(input.shape) if d not in dims]
    return SparseCOOTensor._build(indices, values, shape, False).coalesce()


def _wrap(d: int, ndim: int) -> int:
    if not -ndim <= d < ndim:
        raise IndexError(
            f"sparse.sum: dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})"
        )
    return d % ndim
