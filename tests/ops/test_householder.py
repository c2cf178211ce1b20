"""geqrf and ormqr (munet/ops/householder.py) against PyTorch: the compact QR, its missing
gradient, and products with Q from either side, transposed or not, with gradients."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 2), (0, 3), (2, 0, 2)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_geqrf(shape, dtype):
    a = randn(*shape, dtype=dtype)
    want_a, want_tau = torch.geqrf(torch.tensor(a))
    got_a, got_tau = munet.geqrf(munet.tensor(a))
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got_a.numpy(), want_a.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(got_tau.numpy(), want_tau.numpy(), rtol=tol, atol=tol)
    assert got_a.dtype.name == dtype and tuple(got_tau.shape) == tuple(want_tau.shape)
    method_a, _ = munet.tensor(noncontiguous(a)).geqrf()
    np.testing.assert_allclose(method_a.numpy(), want_a.numpy(), rtol=tol, atol=tol)


def test_geqrf_has_no_gradient_and_checks_its_input():
    x = munet.tensor(randn(3, 3), requires_grad=True)
    with pytest.raises(NotImplementedError, match="the derivative for 'geqrf' is not implemented"):
        munet.geqrf(x)[0].sum().backward()
    with pytest.raises(RuntimeError, match="geqrf: The input tensor A must have at least 2 dimensions"):
        munet.geqrf(munet.ones(3))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (2, 5, 2)])
def test_ormqr(left, transpose, shape):
    a, tau = torch.geqrf(torch.tensor(randn(*shape, dtype="float64")))
    m = shape[-2]
    other_shape = shape[:-2] + ((m, 3) if left else (3, m))
    check(
        lambda a, tau, c: munet.ormqr(a, tau, c, left, transpose),
        lambda a, tau, c: torch.ormqr(a, tau, c, left, transpose),
        a.numpy(),
        tau.numpy(),
        randn(*other_shape, dtype="float64", seed=2),
    )
    check(
        lambda a, tau, c: a.ormqr(tau, c, left, transpose),
        lambda a, tau, c: a.ormqr(tau, c, left, transpose),
        noncontiguous(a.numpy().astype(np.float32)),
        tau.numpy().astype(np.float32),
        randn(*other_shape, seed=3),
        float64_reference=True,
    )


def test_ormqr_errors():
    a, tau = munet.geqrf(munet.tensor(randn(4, 3)))
    with pytest.raises(RuntimeError, match="ormqr: input.shape\\[-2\\] must be equal to other.shape\\[-2\\]"):
        munet.ormqr(a, tau, munet.ones(5, 2))
