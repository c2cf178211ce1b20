"""trapezoid, trapz, cumulative_trapezoid and gradient (munet/ops/integration.py) against PyTorch."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import check, noncontiguous, randn


def _points(n, seed=3):
    return np.sort(np.random.default_rng(seed).uniform(0, 5, n))


@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_family(name):
    m, t = getattr(munet, name), getattr(torch, name)
    y = randn(4, 6, dtype="float64")
    check(lambda y: m(y), lambda y: t(y), y)
    check(lambda y: m(y, dx=0.3, dim=0), lambda y: t(y, dx=0.3, dim=0), noncontiguous(y))
    check(lambda y, x: m(y, x), lambda y, x: t(y, x), y, _points(6))
    check(lambda y, x: m(y, x), lambda y, x: t(y, x), y, np.sort(randn(4, 6, dtype="float64", seed=5), 1))
    check(lambda y, x: m(y, x, dim=0), lambda y, x: t(y, x, dim=0), y, _points(4))
    check(lambda y: m(y), lambda y: t(y), randn(3, 0))
    check(lambda y: m(y), lambda y: t(y), randn(3, 1))


def test_trapz_and_integers():
    y = randn(3, 5)
    check(lambda y: munet.trapz(y, dx=2.0), lambda y: torch.trapz(y, dx=2.0), y)
    check(lambda y, x: munet.trapz(y, x), lambda y, x: torch.trapz(y, x), y, _points(5).astype(np.float32))
    ints = munet.tensor([[1, 2, 4]])
    np.testing.assert_allclose(munet.trapezoid(ints).numpy(), torch.trapezoid(torch.tensor([[1, 2, 4]])).numpy())
    with pytest.raises(RuntimeError, match="There must be one `x` value for each sample point"):
        munet.trapezoid(munet.ones(3, 4), munet.ones(3))


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient(edge_order):
    f = randn(4, 5, dtype="float64")
    check(lambda f: munet.gradient(f, edge_order=edge_order), lambda f: torch.gradient(f, edge_order=edge_order), f)
    check(
        lambda f: munet.gradient(f, spacing=[2.0, 0.5], edge_order=edge_order),
        lambda f: torch.gradient(f, spacing=[2.0, 0.5], edge_order=edge_order),
        noncontiguous(f),
    )
    check(
        lambda f: munet.gradient(f, spacing=3.0, dim=1, edge_order=edge_order),
        lambda f: torch.gradient(f, spacing=3.0, dim=1, edge_order=edge_order),
        f,
    )
    xs, ys = _points(4), _points(5, seed=4)
    check(
        lambda f: munet.gradient(f, spacing=(munet.tensor(xs), munet.tensor(ys)), edge_order=edge_order),
        lambda f: torch.gradient(f, spacing=(torch.tensor(xs), torch.tensor(ys)), edge_order=edge_order),
        f,
    )
    check(
        lambda f: munet.gradient(f, spacing=(munet.tensor(ys),), dim=-1, edge_order=edge_order),
        lambda f: torch.gradient(f, spacing=(torch.tensor(ys),), dim=-1, edge_order=edge_order),
        f,
    )


def test_gradient_errors():
    with pytest.raises(RuntimeError, match="each dimension size to be at least edge_order\\+1"):
        munet.gradient(munet.ones(2, 5), edge_order=2)
    with pytest.raises(RuntimeError, match="only supports edge_order=1 and edge_order=2"):
        munet.gradient(munet.ones(4), edge_order=3)
