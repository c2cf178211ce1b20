"""logcumsumexp (munet/ops/log_cumulative.py) against PyTorch: forward and gradients."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,dim", [((4, 7), 1), ((4, 7), 0), ((3, 1, 5), -1), ((9,), 0), ((2, 0), 1), ((), 0)])
def test_logcumsumexp(shape, dim, dtype):
    x = np.asarray(randn(*shape, dtype=dtype) * 10, dtype=dtype)
    check(lambda x: munet.logcumsumexp(x, dim), lambda x: torch.logcumsumexp(x, dim), x)
    check(lambda x: x.logcumsumexp(dim), lambda x: x.logcumsumexp(dim), noncontiguous(x) if shape else x)


def test_logcumsumexp_far_below_the_maximum_and_infinities():
    x = np.array([-1000.0, 0.0, -1e30, 50.0, -np.inf, 1.0], dtype=np.float32)
    finite = x[:4]  # with gradients; float32 sums of terms far apart in size: bounds from a float64 run
    check(lambda x: munet.logcumsumexp(x, 0), lambda x: torch.logcumsumexp(x, 0), finite, float64_reference=True)
    got = munet.logcumsumexp(munet.tensor(x), 0).numpy()
    np.testing.assert_allclose(got, torch.logcumsumexp(torch.tensor(x), 0).numpy(), rtol=1e-6)
    edge = np.array([-np.inf, -np.inf, 2.0, np.inf, 1.0], dtype=np.float32)
    want = torch.logcumsumexp(torch.tensor(edge), 0).numpy()
    np.testing.assert_array_equal(munet.logcumsumexp(munet.tensor(edge), 0).numpy(), want)
    ints = munet.logcumsumexp(munet.tensor([1, 2, 3]), 0)
    np.testing.assert_allclose(ints.numpy(), torch.logcumsumexp(torch.tensor([1.0, 2.0, 3.0]), 0).numpy(), rtol=1e-6)
