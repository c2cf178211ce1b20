"""put and index_reduce (munet/ops/index_writes.py) against PyTorch: forward and gradients."""

import warnings

import numpy as np
import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn


@pytest.mark.parametrize("accumulate", [False, True])
def test_put(accumulate):
    x, src = randn(4, 5), randn(2, 3, seed=2)
    index = np.array([[0, -1, 7], [19, 3, 8]])
    check(
        lambda x, s: munet.put(x, munet.tensor(index), s, accumulate),
        lambda x, s: torch.put(x, torch.tensor(index), s, accumulate),
        noncontiguous(x),
        src,
    )
    repeated = np.array([3, 3, 0])
    if accumulate:  # duplicates sum (without accumulate, which write wins is unspecified)
        check(
            lambda x, s: x.put(munet.tensor(repeated), s, True),
            lambda x, s: x.put(torch.tensor(repeated), s, True),
            x,
            randn(3, seed=3),
        )

    def inplace(x, s):
        y = x * 1
        y.put_(munet.tensor(index) if isinstance(y, munet.Tensor) else torch.tensor(index), s, accumulate)
        return y

    check(inplace, inplace, x, src)


def test_put_errors():
    with pytest.raises(IndexError, match="put: index out of range for a tensor of 4 elements"):
        munet.put(munet.zeros(2, 2), munet.tensor([4]), munet.ones(1))
    with pytest.raises(RuntimeError, match="put: Expected source and index to have the same number of elements"):
        munet.put(munet.zeros(2, 2), munet.tensor([0, 1]), munet.ones(1))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_reduce(reduce, include_self, dim):
    x = randn(4, 5, 3)
    shape = list(x.shape)
    shape[dim] = 4
    source = randn(*shape, seed=2)
    index = np.array([0, 2, 0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: index_reduce() is in beta
        check(
            lambda x, s: x.index_reduce(dim, munet.tensor(index), s, reduce, include_self=include_self),
            lambda x, s: x.index_reduce(dim, torch.tensor(index), s, reduce, include_self=include_self),
            noncontiguous(x),
            source,
        )

        def inplace(x, s):
            y = x * 1
            lib_index = munet.tensor(index) if isinstance(y, munet.Tensor) else torch.tensor(index)
            y.index_reduce_(dim, lib_index, s, reduce, include_self=include_self)
            return y

        check(inplace, inplace, x, source)


def test_index_reduce_errors():
    with pytest.raises(RuntimeError, match="index_reduce: reduce argument must be one of"):
        munet.ones(2, 2).index_reduce(0, munet.tensor([0]), munet.ones(1, 2), "sum")
    with pytest.raises(RuntimeError, match="index_reduce: expected source of shape"):
        munet.ones(2, 2).index_reduce(0, munet.tensor([0]), munet.ones(2, 2), "prod")
