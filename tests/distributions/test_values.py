"""log_prob, entropy, moments and cdf of every distribution against torch.distributions, and gradients.

float64 results are compared with PyTorch's float64 at its default tolerances. float32 results are
compared with PyTorch's float64 values, allowing the default float32 tolerance plus four times
PyTorch's own float32 error at that point (the error a float32 evaluation of the same formula has).
"""

import numpy as np
import pytest
import torch
import torch.distributions as TD

import munet
import munet.distributions as D
from tests.distributions.cases import CASES, build

BATCHES = [(), (3,), (2, 3)]
DTYPES = {"float64": (munet.float64, torch.float64), "float32": (munet.float32, torch.float32)}


def _params(case, batch, seed=0):
    return CASES[case][0](np.random.default_rng(seed), batch)


def _numpy(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _close(mine, exact64, torch32=None, dtype="float64"):
    mine, exact64 = _numpy(mine).astype(np.float64), _numpy(exact64).astype(np.float64)
    assert mine.shape == exact64.shape
    if dtype == "float64":
        np.testing.assert_allclose(mine, exact64, rtol=1e-7, atol=1e-7, equal_nan=True)
        return
    slack = 4 * np.abs(_numpy(torch32).astype(np.float64) - exact64)
    finite = np.isfinite(exact64)
    assert np.array_equal(np.isfinite(mine), finite) and np.array_equal(np.isnan(mine), np.isnan(exact64))
    err = np.abs(mine[finite] - exact64[finite])
    bound = (1e-5 + 1.3e-6 * np.abs(exact64) + slack)[finite]
    assert np.all(err <= bound), f"max excess {np.max(err - bound)}"


def _value_and_dists(case, batch, dtype):
    params = _params(case, batch)
    mdt, tdt = DTYPES[dtype]
    t64, _ = build(TD, torch, case, params, torch.float64)
    torch.manual_seed(0)
    value = t64.sample((2,))
    m, _ = build(D, munet, case, params, mdt)
    t, _ = build(TD, torch, case, params, tdt)
    return m, t, t64, value


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_log_prob(case, batch, dtype):
    m, t, t64, value = _value_and_dists(case, batch, dtype)
    mdt, tdt = DTYPES[dtype]
    mine = m.log_prob(munet.tensor(value.numpy(), dtype=mdt))
    _close(mine, t64.log_prob(value), t.log_prob(value.to(tdt)), dtype)


def _has(dist, attr):
    try:
        getattr(dist, attr)() if attr in ("entropy",) else getattr(dist, attr)
    except NotImplementedError:
        return False
    return True


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("attr", ["entropy", "mean", "variance", "stddev", "mode"])
def test_statistics(case, batch, dtype, attr):
    m, t, t64, _ = _value_and_dists(case, batch, dtype)
    if not _has(t64, attr):
        assert not _has(m, attr)
        return

    def get(d):
        return d.entropy() if attr == "entropy" else getattr(d, attr)

    _close(get(m), get(t64), get(t), dtype)


CDF_CASES = ["Normal", "LogNormal", "Uniform", "Exponential", "Laplace", "Cauchy", "Gamma"]
ICDF_CASES = ["Normal", "LogNormal", "Uniform", "Exponential", "Laplace", "Cauchy"]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("case", CDF_CASES)
def test_cdf_icdf(case, batch, dtype):
    m, t, t64, value = _value_and_dists(case, batch, dtype)
    mdt, tdt = DTYPES[dtype]
    _close(m.cdf(munet.tensor(value.numpy(), dtype=mdt)), t64.cdf(value), t.cdf(value.to(tdt)), dtype)
    if case not in ICDF_CASES:
        return
    q = torch.rand(value.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 0.98 + 0.01
    _close(m.icdf(munet.tensor(q.numpy(), dtype=mdt)), t64.icdf(q), t.icdf(q.to(tdt)), dtype)


@pytest.mark.parametrize("batch", [(3,), (2, 3)], ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_log_prob_and_entropy_gradients(case, batch):
    params = _params(case, batch)
    t, tleaves = build(TD, torch, case, params, torch.float64, requires_grad=True)
    m, mleaves = build(D, munet, case, params, munet.float64, requires_grad=True)
    torch.manual_seed(0)
    value = t.sample((2,)).detach()
    loss_t = t.log_prob(value).sum()
    loss_m = m.log_prob(munet.tensor(value.numpy())).sum()
    if _has(t, "entropy"):
        loss_t = loss_t + t.entropy().sum()
        loss_m = loss_m + m.entropy().sum()
    grads_t = torch.autograd.grad(loss_t, list(tleaves.values()), allow_unused=True)
    grads_m = munet.autograd.grad(loss_m, list(mleaves.values()), allow_unused=True)
    for name, gt, gm in zip(tleaves, grads_t, grads_m):
        if gt is None:
            assert gm is None or not np.any(gm.numpy()), name
            continue
        gm, gt = gm.numpy(), gt.numpy()
        if name == "scale_tril":
            # the densities read only the lower triangle; torch.cholesky_solve's backward (Wishart) also
            # returns a gradient for the unread upper triangle
            gm, gt = np.tril(gm), np.tril(gt)
        np.testing.assert_allclose(gm, gt, rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_sample_shapes_and_expand(case, batch):
    params = _params(case, batch)
    m, _ = build(D, munet, case, params, munet.float32)
    t, _ = build(TD, torch, case, params, torch.float32)
    assert tuple(m.batch_shape) == tuple(t.batch_shape) and tuple(m.event_shape) == tuple(t.event_shape)
    for shape in [(), (4,), (2, 1)]:
        assert tuple(m.sample(shape).shape) == tuple(t.sample(shape).shape)
    bigger = (5,) + tuple(t.batch_shape)
    me, te = m.expand(bigger), t.expand(bigger)
    assert tuple(me.batch_shape) == tuple(te.batch_shape)
    value = te.sample()
    np.testing.assert_allclose(
        me.log_prob(munet.tensor(value.numpy())).numpy(), te.log_prob(value).numpy(), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("case", ["Normal", "Gamma", "Beta", "StudentT", "Laplace"])
def test_non_contiguous_parameters_and_values(case):
    params = _params(case, (3, 2))
    views = {k: munet.tensor(v.T.copy()).T for k, v in params.items()}  # (3, 2) views of (2, 3) storage, float64
    assert not next(iter(views.values())).is_contiguous()
    mine = getattr(D, case)(**views)
    theirs, _ = build(TD, torch, case, params, torch.float64)
    value = theirs.sample((2,))
    mvalue = munet.tensor(value.numpy().transpose(0, 2, 1).copy()).transpose(1, 2)
    _close(mine.log_prob(mvalue), theirs.log_prob(value))
