"""select_scatter, slice_scatter and diagonal_scatter (munet/ops/scatter_views.py) against PyTorch."""

import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn


@pytest.mark.parametrize("dim,index", [(0, 1), (1, -1), (2, 0), (-1, 3)])
def test_select_scatter(dim, index):
    x = randn(3, 4, 5, dtype="float64")
    shape = list(x.shape)
    del shape[dim]
    src = randn(*shape, dtype="float64", seed=2)
    check(
        lambda x, s: munet.select_scatter(x, s, dim, index), lambda x, s: torch.select_scatter(x, s, dim, index), x, src
    )
    check(
        lambda x, s: x.select_scatter(s, dim, index),
        lambda x, s: x.select_scatter(s, dim, index),
        noncontiguous(x),
        src,
    )


@pytest.mark.parametrize(
    "dim,start,end,step",
    [(0, None, None, 1), (1, 1, 3, 1), (2, 0, None, 2), (-1, -3, None, 1), (1, 2, 2, 1), (0, 5, 9, 1)],
)
def test_slice_scatter(dim, start, end, step):
    x = randn(3, 4, 5)
    n = len(range(*slice(start, end, step).indices(x.shape[dim])))
    shape = list(x.shape)
    shape[dim] = n
    src = randn(*shape, seed=2)
    check(
        lambda x, s: munet.slice_scatter(x, s, dim, start, end, step),
        lambda x, s: torch.slice_scatter(x, s, dim, start, end, step),
        noncontiguous(x),
        src,
    )


@pytest.mark.parametrize("offset,dim1,dim2", [(0, 0, 1), (1, 0, 1), (-2, 1, 0), (0, 0, 2), (2, -1, 1), (9, 0, 1)])
def test_diagonal_scatter(offset, dim1, dim2):
    x = randn(4, 5, 3)
    n = torch.zeros(4, 5, 3).diagonal(offset, dim1, dim2).shape
    src = randn(*n, seed=2)
    check(
        lambda x, s: munet.diagonal_scatter(x, s, offset, dim1, dim2),
        lambda x, s: torch.diagonal_scatter(x, s, offset, dim1, dim2),
        x,
        src,
    )
    check(
        lambda x, s: x.diagonal_scatter(s, offset, dim1, dim2),
        lambda x, s: x.diagonal_scatter(s, offset, dim1, dim2),
        noncontiguous(x),
        src,
    )


def test_scatter_errors():
    x = munet.zeros(3, 4)
    with pytest.raises(RuntimeError, match="select_scatter: expected src to have a size equal to the slice"):
        munet.select_scatter(x, munet.ones(3), 0, 0)
    with pytest.raises(IndexError, match="select_scatter: index 3 out of range"):
        munet.select_scatter(x, munet.ones(4), 0, 3)
    with pytest.raises(RuntimeError, match="slice_scatter: slice step must be positive"):
        munet.slice_scatter(x, x, 0, None, None, 0)
    with pytest.raises(RuntimeError, match="diagonal_scatter: diagonal dimensions cannot be identical"):
        munet.diagonal_scatter(x, munet.ones(3), 0, 1, 1)
