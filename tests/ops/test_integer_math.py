"""gcd and lcm (munet/ops/integer_math.py) against PyTorch."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8"])
@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_lcm(name, dtype):
    rng = np.random.default_rng(0)
    low = 0 if dtype == "uint8" else -300
    high = 16 if dtype in ("uint8", "int16") else 1000
    a = rng.integers(low, high, (5, 7)).astype(dtype)
    b = rng.integers(low, high, (7,)).astype(dtype)
    a[0, :2], b[0] = 0, 0
    got = getattr(munet, name)(munet.tensor(a), munet.tensor(b))
    assert_close(got, getattr(torch, name)(torch.tensor(a), torch.tensor(b)))
    assert_close(
        getattr(munet.tensor(a).t(), name)(munet.tensor(a).t()), getattr(torch.tensor(a).t(), name)(torch.tensor(a).t())
    )
    x = munet.tensor(a)
    assert getattr(x, name + "_")(munet.tensor(b)) is x
    assert_close(x, getattr(torch, name)(torch.tensor(a), torch.tensor(b)))
    empty = getattr(munet, name)(munet.zeros(0, 3, dtype=munet.int64), munet.ones(3, dtype=munet.int64))
    assert tuple(empty.shape) == (0, 3)


def test_gcd_of_large_fibonacci_pair_and_errors():
    a, b = munet.tensor([7540113804746346429]), munet.tensor([4660046610375530309])  # F92, F91: Euclid's worst case
    assert munet.gcd(a, b).item() == 1
    assert munet.gcd(munet.tensor([12]), 18).item() == 6
    with pytest.raises(RuntimeError, match="gcd: expected integer tensors, got float32"):
        munet.gcd(munet.ones(2), munet.ones(2))
