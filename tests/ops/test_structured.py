"""block_diag, diagflat, vander, cartesian_prod, combinations and fill_diagonal_
(munet/ops/structured.py) against PyTorch: forward and gradients."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close, check, noncontiguous, randn


def test_block_diag():
    a, b, c = randn(2, 3), randn(4, seed=2), randn(1, 1, seed=3)
    check(lambda a, b, c: munet.block_diag(a, b, c), lambda a, b, c: torch.block_diag(a, b, c), noncontiguous(a), b, c)
    check(lambda a: munet.block_diag(a), lambda a: torch.block_diag(a), a)
    check(
        lambda a: munet.block_diag(a, munet.tensor(5), munet.zeros(0, 2), munet.ones(2, 1, dtype=munet.int32)),
        lambda a: torch.block_diag(a, torch.tensor(5), torch.zeros(0, 2), torch.ones(2, 1, dtype=torch.int32)),
        randn(2, 2, dtype="float64"),
    )
    assert tuple(munet.block_diag().shape) == tuple(torch.block_diag().shape)
    with pytest.raises(RuntimeError, match="block_diag: Input tensors must have 2 or fewer dimensions"):
        munet.block_diag(munet.ones(1, 1, 1))


@pytest.mark.parametrize("offset", [0, 2, -1])
def test_diagflat(offset):
    check(lambda x: munet.diagflat(x, offset), lambda x: torch.diagflat(x, offset), randn(2, 3))
    check(lambda x: x.diagflat(offset), lambda x: x.diagflat(offset), noncontiguous(randn(4)))
    check(lambda x: munet.diagflat(x, offset), lambda x: torch.diagflat(x, offset), randn(0))


@pytest.mark.parametrize("columns,increasing", [(None, False), (4, True), (1, False), (0, False), (5, False)])
def test_vander(columns, increasing):
    x = randn(4, dtype="float64")
    check(lambda x: munet.vander(x, columns, increasing), lambda x: torch.vander(x, columns, increasing), x, grad=False)

    def powers(x):  # torch.vander's own backward fails (an in-place cumprod); the same matrix by pow
        n = x.shape[0] if columns is None else columns
        p = torch.arange(n, dtype=x.dtype)
        return x.unsqueeze(1) ** (p if increasing else p.flip(0))

    check(lambda x: munet.vander(x, columns, increasing), powers, x, grad=columns is None or columns > 1)
    ints = np.array([1, -2, 3])
    assert_close(
        munet.vander(munet.tensor(ints), columns, increasing), torch.vander(torch.tensor(ints), columns, increasing)
    )
    with pytest.raises(RuntimeError, match="vander: x must be a one-dimensional tensor"):
        munet.vander(munet.ones(2, 2))


def test_cartesian_prod_and_combinations():
    a, b, c = randn(3), randn(2, seed=2), randn(1, seed=3)
    check(lambda a, b, c: munet.cartesian_prod(a, b, c), lambda a, b, c: torch.cartesian_prod(a, b, c), a, b, c)
    check(lambda a: munet.cartesian_prod(a), lambda a: torch.cartesian_prod(a), a)
    x = randn(4)
    for r in (0, 1, 2, 3, 5):
        for replacement in (False, True):
            check(
                lambda x: munet.combinations(x, r, replacement),
                lambda x: torch.combinations(x, r, replacement),
                noncontiguous(x),
                grad=r > 0,
            )
    assert_close(munet.combinations(munet.tensor([1, 2]), 3), torch.combinations(torch.tensor([1, 2]), 3))
    with pytest.raises(RuntimeError, match="combinations: Expect a 1D vector"):
        munet.combinations(munet.ones(2, 2))


@pytest.mark.parametrize(
    "shape,wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False), ((3, 7), True), ((3, 3, 3), False)]
)
def test_fill_diagonal_(shape, wrap):
    def fill(x):
        y = x * 1
        y.fill_diagonal_(2.5, wrap)
        return y

    check(fill, fill, randn(*shape))
    x = munet.zeros(*shape, dtype=munet.int64)
    assert x.fill_diagonal_(3, wrap) is x
    assert_close(x, torch.zeros(*shape, dtype=torch.int64).fill_diagonal_(3, wrap))
    with pytest.raises(RuntimeError, match="fill_diagonal_: all dimensions of input must be of equal length"):
        munet.zeros(2, 3, 3).fill_diagonal_(1)
