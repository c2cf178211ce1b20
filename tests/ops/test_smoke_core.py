"""The core ops the other families build on: add/sub/mul/div/neg/exp, sum/mean, matmul."""

import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn


@pytest.mark.parametrize(
    "shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (2, 3)), ((0, 3), (1, 3)), ((5,), (2, 1, 5))]
)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_binary_broadcast(name, shapes):
    a, b = randn(*shapes[0], seed=1), randn(*shapes[1], seed=2)
    if name == "div":
        b = b + 3
    check(getattr(munet, name), getattr(torch, name), a, b)


def test_binary_noncontiguous_and_scalar():
    a = noncontiguous(randn(3, 4, seed=1))
    check(lambda x: x * 2.5 - 1, lambda x: x * 2.5 - 1, a)
    check(lambda x: 3 / (x + 5), lambda x: 3 / (x + 5), a)


def test_exp_neg_sum_mean_matmul():
    a = randn(2, 3, 4)
    check(lambda x: (-x).exp().sum(dim=(0, 2)), lambda x: (-x).exp().sum(dim=(0, 2)), a)
    check(lambda x: x.mean(1, keepdim=True), lambda x: x.mean(1, keepdim=True), a)
    check(munet.matmul, torch.matmul, randn(2, 3, 4), randn(4, 5, seed=3))
    check(munet.matmul, torch.matmul, randn(4), randn(3, 4, 5, seed=3))
    check(munet.matmul, torch.matmul, randn(3, 4), randn(4, seed=3))
