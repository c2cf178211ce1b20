"""cov, corrcoef and dist (munet/ops/statistics.py) against PyTorch: forward and gradients."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(3, 7), (7,), (1, 5), (4, 1)])
def test_cov_and_corrcoef(shape, dtype):
    x = randn(*shape, dtype=dtype)
    check(munet.cov, torch.cov, x)
    check(lambda x: munet.cov(x, correction=0), lambda x: torch.cov(x, correction=0), x)
    if shape[-1] > 2:
        check(lambda x: x.cov(correction=2), lambda x: x.cov(correction=2), noncontiguous(x), float64_reference=True)
    if shape[-1] > 1:  # one variable: corrcoef is c / c = 1, its gradient rounding noise around 0
        check(munet.corrcoef, torch.corrcoef, x, float64_reference=True, grad=len(shape) == 2 and shape[0] > 1)


@pytest.mark.parametrize("correction", [0, 1, 3])
def test_cov_weights(correction):
    x = randn(3, 6)
    fw = np.array([1, 2, 0, 3, 1, 4])
    aw = np.random.default_rng(3).uniform(0.1, 2, 6)
    check(
        lambda x, aw: munet.cov(x, correction=correction, fweights=munet.tensor(fw), aweights=aw),
        lambda x, aw: torch.cov(x, correction=correction, fweights=torch.tensor(fw), aweights=aw),
        x,
        aw,
        float64_reference=True,
    )
    check(lambda x: munet.cov(x, fweights=munet.tensor(fw)), lambda x: torch.cov(x, fweights=torch.tensor(fw)), x)


def test_cov_errors_and_integer_input():
    x = munet.tensor([[1, 2, 4], [0, 5, 1]])
    want = torch.cov(torch.tensor([[1, 2, 4], [0, 5, 1]]).float()).numpy()
    np.testing.assert_allclose(munet.cov(x).numpy(), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="cov: expected input to have two or fewer dimensions"):
        munet.cov(munet.ones(2, 2, 2))
    with pytest.raises(RuntimeError, match="fweights to have integral dtype"):
        munet.cov(munet.ones(2, 3), fweights=munet.ones(3))
    with pytest.raises(RuntimeError, match="cov: fweights cannot have negative values"):
        munet.cov(munet.ones(2, 3), fweights=munet.tensor([1, -1, 1]))
    with pytest.raises(RuntimeError, match="same numel as there are observations"):
        munet.cov(munet.ones(2, 3), aweights=munet.ones(2))
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        munet.cov(munet.ones(2, 1))


@pytest.mark.parametrize("p", [2, 1, 3.5, 0, float("inf")])
def test_dist(p):
    a, b = randn(3, 4), randn(4, seed=2)
    grad = p != 0  # torch's backward of dist(p=0) fails on an undefined tensor; its gradient is zero
    check(lambda a, b: munet.dist(a, b, p), lambda a, b: torch.dist(a, b, p), a, b, grad=grad)
    check(lambda a, b: a.dist(b, p), lambda a, b: a.dist(b, p), noncontiguous(randn(4, 3)), randn(3, seed=4), grad=grad)
