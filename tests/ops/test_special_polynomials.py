"""torch.special's orthogonal polynomials (munet/ops/special_polynomials.py) against PyTorch, with
tensor and Python-number degrees, PyTorch's closed forms at the interval ends, its trigonometric
form for large degrees, negative, fractional and NaN degrees. float32 results are held to a
float64 reference by :func:`assert_close_to_reference` (large degrees amplify rounding)."""

import time

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close_to_reference, noncontiguous

NAMES = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
         "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
         "legendre_polynomial_p"]  # fmt: skip
# x = NaN is left out: PyTorch's loops then return an uninitialized value for several of these


def _inputs(dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-1.5, 1.5, 400), [0.0, 1.0, -1.0, 0.5, 2.0, -0.0, np.inf, -np.inf] * 3])
    n = np.concatenate([rng.integers(-2, 14, 400), [0, 1, 2, 3, 7, 9, 12, 5] * 3]).astype(np.float64)
    n[:6] = [3.7, np.nan, 200, -0.5, np.inf, 1.9]
    return x.astype(dtype), n.astype(dtype)


def _compare(got, want, rtol):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    finite = np.isfinite(want)
    assert np.max(np.abs(got[finite] - want[finite]) / (np.abs(want[finite]) + 1)) < rtol


@pytest.mark.parametrize("name", NAMES)
def test_float64_matches_torch(name):
    fn, want_fn = getattr(munet.special, name), getattr(torch.special, name)
    x, n = _inputs("float64")
    _compare(fn(munet.tensor(x), munet.tensor(n)).numpy(), want_fn(torch.tensor(x), torch.tensor(n)).numpy(), 1e-12)
    for degree in (0, 1, 4, 11):
        _compare(fn(munet.tensor(x), degree).numpy(), want_fn(torch.tensor(x), degree).numpy(), 1e-12)
    xs = np.array([0.3, -0.7, 1.2])
    _compare(
        fn(0.25, munet.tensor(xs * 10).round()).numpy(), want_fn(0.25, torch.tensor(xs * 10).round()).numpy(), 1e-12
    )


@pytest.mark.parametrize("name", NAMES)
def test_float32_as_close_as_torch(name):
    fn, want_fn = getattr(munet.special, name), getattr(torch.special, name)
    x, n = _inputs("float32", seed=1)
    # degrees up to 14: over a 200-step recurrence float32 rounding (PyTorch's kernels may fuse the
    # multiply-add) differs element by element beyond a fixed multiple; float64 covers degree 200
    keep = np.isfinite(x) & np.isfinite(n) & (n <= 14)
    x, n = x[keep], n[keep]
    reference = want_fn(torch.tensor(x).double(), torch.tensor(n).double()).numpy()
    expected = want_fn(torch.tensor(x), torch.tensor(n)).numpy()
    actual = fn(munet.tensor(x), munet.tensor(n)).numpy()
    finite = np.isfinite(reference) & np.isfinite(expected)
    assert_close_to_reference(actual[finite], expected[finite], reference[finite])


@pytest.mark.parametrize("name", NAMES)
def test_broadcast_views_empty_out_and_no_gradient(name):
    fn, want_fn = getattr(munet.special, name), getattr(torch.special, name)
    x = np.random.default_rng(2).uniform(-1, 1, (4, 6))
    n = np.array([0.0, 1.0, 2.0, 5.0, 8.0, 10.0])
    got = fn(munet.tensor(noncontiguous(x)), munet.tensor(n))
    _compare(got.numpy(), want_fn(torch.tensor(x), torch.tensor(n)).numpy(), 1e-12)
    assert tuple(fn(munet.zeros(0, 3), munet.ones(3)).shape) == (0, 3)
    out = munet.empty(4, 6, dtype=munet.float64)
    assert fn(munet.tensor(x), 3, out=out) is out
    assert not fn(munet.tensor(x, requires_grad=True), 3).requires_grad


def test_scalar_degree_compiles_in_linear_time():
    """A recurrence shares each value between two later steps; compiling it must not take time
    exponential in the degree (naming kernels by printing the expression DAG as a tree did)."""
    x = munet.tensor(np.random.default_rng(3).uniform(-1, 1, 32).astype(np.float32))
    start = time.perf_counter()
    f = munet.compile(lambda x: munet.special.legendre_polynomial_p(x, 60) + munet.special.hermite_polynomial_h(x, 40))
    got = f(x)
    assert time.perf_counter() - start < 60
    want = munet.special.legendre_polynomial_p(x, 60) + munet.special.hermite_polynomial_h(x, 40)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


def test_errors():
    with pytest.raises(TypeError, match="chebyshev_polynomial_t: expected at least one tensor operand"):
        munet.special.chebyshev_polynomial_t(0.5, 2)
