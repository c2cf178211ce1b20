"""igamma/igammac (special.gammainc/gammaincc) and special.erfcx (munet/ops/special_gamma.py)
against PyTorch: every branch of PyTorch's method choice (series, continued fraction, Temme's
expansion), the edges of the domain, the gradient in ``x`` and the refused one in ``a``."""

import math

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close_to_reference, check, noncontiguous

EDGE_A = [0.0, 0.0, 1.0, np.inf, np.inf, 2.0, -1.0, 1.0, np.nan, 3.0, 1.0, 1e-3, 300.0, 250.0]
EDGE_X = [0.0, 1.0, 0.0, 1.0, np.inf, np.inf, 1.0, -1.0, 1.0, 1e-30, np.nan, 0.2, 301.0, 100.0]
REGIONS = [(0.01, 3, 0, 5), (0.1, 20, 0, 40), (20, 150, 10, 200), (0.5, 2, 0.4, 1.2), (200, 2000, 150, 2500)]


def _inputs(seed, dtype):
    rng = np.random.default_rng(seed)
    a = np.concatenate([rng.uniform(lo, hi, 120) for lo, hi, _, _ in REGIONS] + [EDGE_A])
    x = np.concatenate([rng.uniform(lo, hi, 120) for _, _, lo, hi in REGIONS] + [EDGE_X])
    return a.astype(dtype), x.astype(dtype)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_float64_matches_torch(name):
    a, x = _inputs(0, "float64")
    want = getattr(torch, name)(torch.tensor(a), torch.tensor(x)).numpy()
    got = getattr(munet, name)(munet.tensor(a), munet.tensor(x)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-11, atol=1e-13)
    special = getattr(munet.special, "gammainc" if name == "igamma" else "gammaincc")
    np.testing.assert_array_equal(special(munet.tensor(a), munet.tensor(x)).numpy(), got)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_float32_as_close_as_torch(name):
    a, x = _inputs(1, "float32")
    keep = np.isfinite(a) & np.isfinite(x) & (a > 0) & (x >= 0)
    a, x = a[keep], x[keep]
    reference = getattr(torch, name)(torch.tensor(a).double(), torch.tensor(x).double()).numpy()
    expected = getattr(torch, name)(torch.tensor(a), torch.tensor(x)).numpy()
    actual = getattr(munet, name)(munet.tensor(a), munet.tensor(x)).numpy()
    assert_close_to_reference(actual, expected, reference)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_gradient_in_x_methods_inplace_and_broadcasting(name):
    a = np.random.default_rng(2).uniform(0.5, 8, (3, 1))
    x = np.random.default_rng(3).uniform(0.1, 12, (4,))
    check(lambda x: getattr(munet, name)(munet.tensor(a), x), lambda x: getattr(torch, name)(torch.tensor(a), x), x)
    check(lambda x: getattr(munet.tensor(a), name)(x), lambda x: getattr(torch.tensor(a), name)(x), noncontiguous(x))

    def inplace(a_t, lib):
        y = lib.tensor(a.copy()).expand(3, 4).contiguous()
        getattr(y, name + "_")(lib.tensor(x))
        return y

    np.testing.assert_allclose(inplace(a, munet).numpy(), inplace(a, torch).numpy(), rtol=1e-12)
    mx = munet.tensor(x, requires_grad=True)
    (g,) = munet.autograd.grad(getattr(munet, name)(2.5, mx).sum(), mx, create_graph=True)
    tx = torch.tensor(x, requires_grad=True)
    (tg,) = torch.autograd.grad(
        getattr(torch, name)(torch.tensor(2.5, dtype=torch.float64), tx).sum(), tx, create_graph=True
    )
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-10)
    g.sum().backward()
    tg.sum().backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-9)


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_gradient_in_a_is_refused_as_torch(name):
    a = munet.tensor([1.5, 2.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match=f"the derivative for '{name}: input' is not implemented"):
        getattr(munet, name)(a, munet.tensor([1.0, 3.0])).sum().backward()
    ta = torch.tensor([1.5, 2.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match=f"the derivative for '{name}: input' is not implemented"):
        getattr(torch, name)(ta, torch.tensor([1.0, 3.0])).sum().backward()


def test_erfcx():
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(-9, 30, 400), [0.0, 2.4999, 2.5, 1e5, -np.inf, np.inf, np.nan, -30.0]])
    want = torch.special.erfcx(torch.tensor(x)).numpy()
    got = munet.special.erfcx(munet.tensor(x)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
    x32 = x[np.isfinite(x) & (x > -9)].astype(np.float32)
    reference = torch.special.erfcx(torch.tensor(x32).double()).numpy()
    expected = torch.special.erfcx(torch.tensor(x32)).numpy()
    assert_close_to_reference(munet.special.erfcx(munet.tensor(x32)).numpy(), expected, reference)
    grads = rng.uniform(-5, 20, (3, 5))
    check(munet.special.erfcx, torch.special.erfcx, grads)
    check(munet.special.erfcx, torch.special.erfcx, noncontiguous(grads.astype(np.float32)), float64_reference=True)
    mx = munet.tensor([0.5, 3.0], dtype=munet.float64, requires_grad=True)
    (g,) = munet.autograd.grad(munet.special.erfcx(mx).sum(), mx, create_graph=True)
    g.sum().backward()
    tx = torch.tensor([0.5, 3.0], dtype=torch.float64, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.special.erfcx(tx).sum(), tx, create_graph=True)
    tg.sum().backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    assert math.isclose(munet.special.erfcx(munet.tensor(1.0)).item(), math.exp(1) * math.erfc(1), rel_tol=1e-6)
