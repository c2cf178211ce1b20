"""torch.special's Bessel and Airy functions (munet/ops/special_bessel.py) against PyTorch.

float64 results match PyTorch's to a few ulps of the function's scale (the same algorithm; the
trigonometric and exponential functions of the two math libraries differ by an ulp). float32
results are held to the float64 reference by :func:`assert_close_to_reference`: near the zeros
of the oscillating functions the relative error of any float32 evaluation is unbounded, so the
bound is PyTorch's own float32 error. Like PyTorch, the functions have no gradient."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close_to_reference, noncontiguous

NAMES = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
         "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
         "spherical_bessel_j0"]  # fmt: skip
EDGE = [
    0.0,
    -0.0,
    1e-6,
    2.0,
    2.09,
    -2.09,
    5.0,
    -5.0,
    8.0,
    8.3203353,
    30.0,
    103.9,
    700.0,
    -50.0,
    np.inf,
    -np.inf,
    np.nan,
]


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.uniform(-30, 30, 300), rng.uniform(-3, 3, 100), rng.uniform(0, 1e-3, 20), EDGE])


@pytest.mark.parametrize("name", NAMES)
def test_float64_matches_torch(name):
    x = _inputs()
    want = getattr(torch.special, name)(torch.tensor(x)).numpy()
    got = getattr(munet.special, name)(munet.tensor(x)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    finite = np.isfinite(want)
    scale = np.maximum(np.abs(want[finite]), 1e-3)  # absolute near the zeros of J and Y
    assert np.max(np.abs(got[finite] - want[finite]) / scale) < 1e-12


@pytest.mark.parametrize("name", NAMES)
def test_float32_as_close_as_torch(name):
    x = _inputs(1).astype(np.float32)
    finite = np.isfinite(x) & (np.abs(x) < 80)  # exp(|x|) of i0, i1 overflows float32 beyond 88
    x = x[finite]
    expected = getattr(torch.special, name)(torch.tensor(x))
    reference = getattr(torch.special, name)(torch.tensor(x).double())
    actual = getattr(munet.special, name)(munet.tensor(x))
    keep = np.isfinite(reference.numpy())
    assert_close_to_reference(actual.numpy()[keep], expected.numpy()[keep], reference.numpy()[keep])


@pytest.mark.parametrize("name", NAMES)
def test_views_empty_integers_out_and_no_gradient(name):
    fn, want_fn = getattr(munet.special, name), getattr(torch.special, name)
    a = np.random.default_rng(2).uniform(0.1, 6, (4, 6))
    got = fn(munet.tensor(noncontiguous(a)).t())
    np.testing.assert_allclose(got.numpy(), want_fn(torch.tensor(a).t()).numpy(), rtol=1e-12, atol=1e-300)
    empty = fn(munet.zeros(0, 3))
    assert tuple(empty.shape) == (0, 3) and empty.dtype is munet.float32
    ints = fn(munet.tensor([1, 2, 3]))
    assert ints.dtype is munet.float32
    np.testing.assert_allclose(ints.numpy(), want_fn(torch.tensor([1, 2, 3])).numpy(), rtol=1e-6)
    out = munet.empty(3)
    assert fn(munet.tensor([1.0, 2.0, 3.0]), out=out) is out
    x = munet.tensor([1.0, 2.0], requires_grad=True)
    assert not fn(x).requires_grad  # as PyTorch: these functions have no derivative formula


def test_compiles_quickly():
    f = munet.compile(
        lambda x: munet.special.bessel_y1(x) + munet.special.airy_ai(x) * munet.special.modified_bessel_k0(x)
    )
    x = munet.tensor(np.random.default_rng(3).uniform(0.1, 10, 64).astype(np.float32))
    want = munet.special.bessel_y1(x) + munet.special.airy_ai(x) * munet.special.modified_bessel_k0(x)
    np.testing.assert_allclose(f(x).numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_on_vulkan_as_on_cpu(vulkan):
    """The composites run on every device; in float32 the vulkan results match the cpu ones."""
    x = munet.tensor(np.random.default_rng(4).uniform(0.1, 12, 64).astype(np.float32))
    for name in NAMES + ["erfcx"]:
        fn = getattr(munet.special, name)
        want = fn(x).numpy()
        got = fn(x.to(vulkan)).cpu().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max(), err_msg=name)
    got = munet.special.legendre_polynomial_p(x.to(vulkan) / 12, 7).cpu().numpy()
    np.testing.assert_allclose(got, munet.special.legendre_polynomial_p(x / 12, 7).numpy(), rtol=1e-5, atol=1e-6)
    got = munet.igamma(x.to(vulkan), x.to(vulkan) * 1.1).cpu().numpy()
    np.testing.assert_allclose(got, munet.igamma(x, x * 1.1).numpy(), rtol=1e-5, atol=1e-6)
