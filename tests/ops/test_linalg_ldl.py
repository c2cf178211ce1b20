"""linalg.ldl_factor / ldl_factor_ex / ldl_solve against PyTorch (which calls LAPACK's sytrf/sytrs):
the same packed factors and pivots, the same solutions, and the reconstruction A = P L D L^T P^T."""

import numpy as np
import pytest
import torch

import munet


def _matrices():
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 5, 8, 20):
        for trial in range(6):
            a = rng.normal(size=(n, n))
            a = a + a.T
            if trial % 2:  # zero diagonal: forces 2x2 pivots
                a[np.arange(n), np.arange(n)] = 0.0
            yield n, trial, a


@pytest.mark.parametrize("n,trial,a", list(_matrices()), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_factors_and_solve_match_torch(n, trial, a):
    lt, pt, it = torch.linalg.ldl_factor_ex(torch.tensor(a))
    lm, pm, im = munet.linalg.ldl_factor_ex(munet.tensor(a))
    np.testing.assert_array_equal(pm.numpy(), pt.numpy())
    assert pm.dtype == munet.int32 and im.item() == it.item()
    np.testing.assert_allclose(lm.numpy(), lt.numpy(), rtol=1e-10, atol=1e-12)
    if it.item():
        return
    b = np.random.default_rng(trial).normal(size=(n, 3))
    xm = munet.linalg.ldl_solve(lm, pm, munet.tensor(b))
    np.testing.assert_allclose(
        xm.numpy(), torch.linalg.ldl_solve(lt, pt, torch.tensor(b)).numpy(), rtol=1e-8, atol=1e-10
    )
    np.testing.assert_allclose(a @ xm.numpy(), b, rtol=1e-7, atol=1e-8)


def test_batches_float32_and_upper_triangle_ignored():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(2, 3, 4, 4)).astype(np.float32)
    a = a + np.swapaxes(a, -1, -2)
    junk = a.copy()
    junk[..., 0, 3] = 99.0  # only the lower triangle is read
    lm, pm = munet.linalg.ldl_factor(munet.tensor(junk))
    lt, pt = torch.linalg.ldl_factor(torch.tensor(a))
    np.testing.assert_array_equal(pm.numpy(), pt.numpy())
    np.testing.assert_allclose(lm.numpy(), lt.numpy(), rtol=1e-5, atol=1e-6)
    b = rng.normal(size=(3, 4, 2)).astype(np.float32)  # broadcasts over the leading batch dim
    xm = munet.linalg.ldl_solve(lm, pm, munet.tensor(b))
    xt = torch.linalg.ldl_solve(lt, pt, torch.tensor(b).expand(2, 3, 4, 2))
    np.testing.assert_allclose(xm.numpy(), xt.numpy(), rtol=1e-4, atol=1e-5)


def test_errors():
    with pytest.raises(munet.linalg.LinAlgError, match="singular"):
        munet.linalg.ldl_factor(munet.zeros(2, 2, dtype=munet.float64))
    info = munet.linalg.ldl_factor_ex(munet.zeros(2, 2, dtype=munet.float64)).info
    assert info.item() == torch.linalg.ldl_factor_ex(torch.zeros(2, 2, dtype=torch.float64)).info.item()
    with pytest.raises(RuntimeError, match="square"):
        munet.linalg.ldl_factor(munet.ones(2, 3))
    with pytest.raises(RuntimeError, match="floating point"):
        munet.linalg.ldl_factor(munet.ones(2, 2, dtype=munet.int64))
    ld, piv = munet.linalg.ldl_factor(munet.eye(3, dtype=munet.float64))
    with pytest.raises(RuntimeError, match="integers"):
        munet.linalg.ldl_solve(ld, piv.long(), munet.ones(3, 1, dtype=munet.float64))
