"""poisson, binomial, cauchy_ and geometric_ (munet/ops/random_draws.py): distributions by their
moments and quantiles (no bit-for-bit comparison with torch's generator), determinism under a seed."""

import math

import numpy as np
import pytest

import munet

N = 40_000


def test_poisson_moments():
    munet.manual_seed(0)
    rates = munet.tensor([0.5, 3.0, 40.0]).repeat(N, 1)
    draws = munet.poisson(rates)
    assert draws.dtype is munet.float32 and not draws.requires_grad
    np.testing.assert_allclose(draws.mean(0).numpy(), [0.5, 3.0, 40.0], rtol=0.03)
    np.testing.assert_allclose(draws.var(0).numpy(), [0.5, 3.0, 40.0], rtol=0.06)
    assert bool((draws == draws.round()).all())
    with pytest.raises(RuntimeError, match="poisson: invalid Poisson rate"):
        munet.poisson(munet.tensor([-1.0]))
    with pytest.raises(ValueError, match="poisson: generator= is not supported"):
        munet.poisson(munet.ones(2), generator=munet.Generator())


def test_binomial_moments():
    munet.manual_seed(1)
    count = munet.tensor([10.0, 4.0]).repeat(N, 1)
    prob = munet.tensor([0.3, 0.9]).repeat(N, 1)
    draws = munet.binomial(count, prob)
    np.testing.assert_allclose(draws.mean(0).numpy(), [3.0, 3.6], rtol=0.02)
    np.testing.assert_allclose(draws.var(0).numpy(), [2.1, 0.36], rtol=0.06)
    assert float(draws.max()) <= 10


def test_cauchy_quantiles_and_generator():
    x = munet.empty(N)
    assert x.cauchy_(1.0, 2.0) is x
    quartiles = np.quantile(x.numpy(), [0.25, 0.5, 0.75])
    np.testing.assert_allclose(quartiles, [1.0 - 2.0, 1.0, 1.0 + 2.0], atol=0.1)  # median +- sigma
    g = munet.Generator()
    g.manual_seed(7)
    a = munet.empty(5).cauchy_(generator=g)
    g.manual_seed(7)
    np.testing.assert_array_equal(a.numpy(), munet.empty(5).cauchy_(generator=g).numpy())
    with pytest.raises(RuntimeError, match="cauchy_: expects sigma > 0.0"):
        munet.empty(2).cauchy_(sigma=0.0)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_geometric(p):
    x = munet.empty(N)
    assert x.geometric_(p) is x
    values = x.numpy()
    assert values.min() >= 1 and np.all(values == np.round(values))
    np.testing.assert_allclose(values.mean(), 1 / p, rtol=0.03)
    np.testing.assert_allclose(np.mean(values == 1), p, atol=0.01)
    ints = munet.zeros(10, dtype=munet.int64).geometric_(p)
    assert ints.dtype is munet.int64 and int(ints.min()) >= 1
    with pytest.raises(RuntimeError, match="geometric_: p must be > 0 and < 1"):
        munet.empty(2).geometric_(1.0)
    assert math.isfinite(float(munet.empty(1000).geometric_(0.999).max()))
