"""Row and scan kernels on vulkan against the cpu backend: the same munet call on both devices.

Tolerances: rtol/atol 1e-5 for row statistics of O(1) data; 1e-4 where float32 sums of
hundreds of terms are compared (cumsum, prod, gradients); 2e-3 absolute for cumsum over 100k
elements (the running sum reaches ~300, and the two devices add in different orders).
"""

import numpy as np
import pytest

import munet
import munet.nn.functional as F

RTOL, ATOL = 1e-5, 1e-5


def both(fn, *arrays, vulkan):
    cpu = [munet.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays]
    gpu = [t.to(vulkan) if isinstance(t, munet.Tensor) else t for t in cpu]
    return fn(*cpu), fn(*gpu)


def assert_same(cpu, gpu, rtol=RTOL, atol=ATOL):
    cpu = cpu if isinstance(cpu, tuple) else (cpu,)
    gpu = gpu if isinstance(gpu, tuple) else (gpu,)
    for c, g in zip(cpu, gpu):
        assert g.device.type == "vulkan"
        assert g.dtype is c.dtype and g.shape == c.shape, (g.dtype, c.dtype, g.shape, c.shape)
        np.testing.assert_allclose(g.cpu().numpy(), c.numpy(), rtol=rtol, atol=atol, equal_nan=True)


def check(fn, *arrays, vulkan, **tol):
    assert_same(*both(fn, *arrays, vulkan=vulkan), **tol)


def grads(fn, *arrays, vulkan, **tol):
    """Gradients of ``sum(fn(*inputs) * weights)`` on both devices (the weights are fixed and uneven)."""
    out = {}
    for dev in ("cpu", vulkan):
        ts = [munet.tensor(a, device=dev, requires_grad=True) for a in arrays]
        y = fn(*ts)
        y = y[0] if isinstance(y, tuple) else y
        w = munet.tensor(np.cos(np.arange(y.numel(), dtype=np.float32)).reshape(y.shape), device=dev)
        (y * w).sum().backward()
        out[str(dev)] = [t.grad.cpu().numpy() for t in ts]
    for c, g in zip(out["cpu"], out[str(vulkan)]):
        np.testing.assert_allclose(g, c, **({"rtol": 1e-4, "atol": 1e-5} | tol))


def rand(*shape, low=-2.0, high=2.0):
    return np.random.uniform(low, high, shape).astype(np.float32)


# the softmax family and normalization -------------------------------------------------------------


@pytest.mark.parametrize("shape,dim", [((7, 300), 1), ((300, 7), 0), ((4, 5, 6), 1), ((5,), 0), ((3, 1), 1),
                                       ((0, 4), 1), ((2, 70_000), 1)])  # fmt: skip
def test_softmax_family(vulkan, shape, dim):
    x = rand(*shape, low=-8, high=8)
    for fn in (F.softmax, F.log_softmax):
        check(lambda t, fn=fn: fn(t, dim), x, vulkan=vulkan)
    check(lambda t: munet.logsumexp(t, dim, keepdim=True), x, vulkan=vulkan)
    if x.ndim > 1:
        check(lambda t: F.softmax(t.transpose(0, 1), dim), x, vulkan=vulkan)  # strided rows
        check(lambda t: munet.logsumexp(t, (0, 1)), x, vulkan=vulkan)
    if x.size and x.size < 5000:
        grads(lambda t: F.log_softmax(t * 2, dim), x, vulkan=vulkan)
        grads(lambda t: munet.logsumexp(t, dim), x, vulkan=vulkan)


def test_softmax_special_values(vulkan):
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0], [np.nan, 0.0, 1.0]],
                 np.float32)  # fmt: skip
    for fn in (lambda t: F.softmax(t, 1), lambda t: F.log_softmax(t, 1), lambda t: munet.logsumexp(t, 1)):
        check(fn, x, vulkan=vulkan)
    check(lambda t: F.softmax(t, 0), np.array(3.0, np.float32), vulkan=vulkan)


@pytest.mark.parametrize("shape", [(6, 33), (4, 3, 5, 7), (2, 70_000)])
def test_layer_and_rms_norm(vulkan, shape):
    x = rand(*shape) * 3 + 1
    n = shape[-1]
    w, b = rand(n), rand(n)
    check(lambda t, w, b: F.layer_norm(t, (n,), w, b), x, w, b, vulkan=vulkan, atol=3e-5)
    check(lambda t: F.rms_norm(t, (n,), eps=1e-6), x, vulkan=vulkan, atol=3e-5)
    if len(shape) == 4:
        check(lambda t: F.layer_norm(t.transpose(1, 3), (5, 3)), x, vulkan=vulkan, atol=3e-5)
        check(lambda t: F.group_norm(t.transpose(1, 2), 5), x, vulkan=vulkan, atol=3e-5)
        check(lambda t: F.instance_norm(t), x, vulkan=vulkan, atol=3e-5)
    if x.size < 5000:
        grads(lambda t, w, b: F.layer_norm(t, (n,), w, b), x, w, b, vulkan=vulkan)
        grads(lambda t: F.rms_norm(t, (n,)), x, vulkan=vulkan)


def test_batch_norm_training_and_eval(vulkan):
    x, w, b = rand(8, 3, 5, 5) * 2 + 0.5, rand(3), rand(3)
    results = {}
    for dev in ("cpu", vulkan):
        bn = munet.nn.BatchNorm2d(3).to(dev)
        with munet.no_grad():
            bn.weight.copy_(munet.tensor(w, device=dev))
            bn.bias.copy_(munet.tensor(b, device=dev))
        t = munet.tensor(x, device=dev, requires_grad=True)
        y = bn(t)
        (y * y * munet.tensor(x, device=dev)).sum().backward()
        bn.eval()
        z = bn(munet.tensor(x[:2], device=dev))
        results[str(dev)] = [a.detach().cpu().numpy() for a in (y, z, t.grad, bn.weight.grad, bn.running_mean,
                                                                 bn.running_var)]  # fmt: skip
    for c, g in zip(results["cpu"], results[str(vulkan)]):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)


def test_standardize_edge_cases(vulkan):
    from munet.ops.normalization import standardize

    check(lambda t: standardize(t, (1,), 1e-5), np.zeros((3, 0), np.float32), vulkan=vulkan)
    check(lambda t: standardize(t, (0, 2), 1e-5, center=False), rand(4, 3, 9).transpose(1, 0, 2), vulkan=vulkan)
    check(lambda t: standardize(t, (1,), 1e-5), np.full((2, 1), 7.0, np.float32), vulkan=vulkan)


def test_cross_entropy_and_mlp_step(vulkan):
    logits, target = rand(16, 10), np.random.randint(0, 10, 16).astype(np.int64)
    check(lambda a, y: F.cross_entropy(a, y), logits, target, vulkan=vulkan)
    check(lambda a, y: F.cross_entropy(a, y, label_smoothing=0.1), logits, target, vulkan=vulkan)
    grads(lambda a: F.cross_entropy(a, munet.tensor(target, device=a.device)), logits, vulkan=vulkan)

    def train(dev):
        munet.manual_seed(0)
        model = munet.nn.Sequential(munet.nn.Linear(12, 32), munet.nn.LayerNorm(32), munet.nn.GELU(),
                                    munet.nn.Linear(32, 10)).to(dev)  # fmt: skip
        opt = munet.optim.AdamW(model.parameters(), lr=1e-2)
        x = munet.tensor(np.random.default_rng(1).standard_normal((16, 12)).astype(np.float32), device=dev)
        y = munet.tensor(target, device=dev)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().cpu().numpy() for p in model.parameters()]

    (lc, pc), (lg, pg) = train("cpu"), train(vulkan)
    np.testing.assert_allclose(lg, lc, rtol=1e-4)
    for g, c in zip(pg, pc):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-5)


# reductions -------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,dims", [((7, 300), (1,)), ((300, 7), (0,)), ((4, 5, 6), (0, 2)), ((5,), (0,)),
                                        ((3, 0), (1,)), ((2, 70_000), (1,))])  # fmt: skip
def test_reductions(vulkan, shape, dims):
    x = rand(*shape, low=0.9, high=1.1)
    x.flat[::7] = np.nan if x.size else 0
    check(lambda t: t.nansum(dims), x, vulkan=vulkan, rtol=1e-4, atol=1e-3)
    check(lambda t: t.nan_to_num(1.0).prod(dims, keepdim=True), x, vulkan=vulkan, rtol=1e-4)
    for fn in (munet.all, munet.any):
        check(lambda t, fn=fn: fn(t > 1.0, dims[0]), x, vulkan=vulkan)
        check(lambda t, fn=fn: fn(t), x, vulkan=vulkan)
    check(lambda t: munet.count_nonzero(t > 1.0, dims), x, vulkan=vulkan)
    if all(shape):
        check(lambda t: t.max(dims[0]), x, vulkan=vulkan)
        check(lambda t: t.nan_to_num(0.0).min(dims[0], keepdim=True), x, vulkan=vulkan)


def test_integer_and_bool_reductions(vulkan):
    i = np.random.randint(-3, 4, (5, 40)).astype(np.int64)
    check(lambda t: t.prod(1), i[:, :9], vulkan=vulkan)
    check(lambda t: t.nansum(0), i, vulkan=vulkan)
    check(lambda t: t.max(1), i, vulkan=vulkan)
    check(lambda t: t.min(0), i.astype(np.int32), vulkan=vulkan)
    check(lambda t: (t > 0).all(1), i, vulkan=vulkan)
    check(lambda t: t.any(0), i, vulkan=vulkan)
    check(lambda t: munet.count_nonzero(t), i, vulkan=vulkan)
    check(lambda t: munet.count_nonzero(t, ()), i, vulkan=vulkan)
    check(lambda t: (t > 0).max(1), i, vulkan=vulkan)


def test_max_min_ties_nan_and_grads(vulkan):
    x = np.array([[1.0, 3.0, 3.0, -1.0], [np.nan, 2.0, np.nan, 0.0], [2.0, 2.0, 2.0, 2.0]], np.float32)
    check(lambda t: t.max(1), x, vulkan=vulkan)
    check(lambda t: t.min(1, keepdim=True), x, vulkan=vulkan)
    check(lambda t: t.max(0), np.array(4.0, np.float32), vulkan=vulkan)
    grads(lambda t: t.max(1).values, rand(6, 9), vulkan=vulkan)
    grads(lambda t: t.min(0).values, rand(6, 9), vulkan=vulkan)


def test_prod_gradients_with_zeros(vulkan):
    x = rand(4, 6)
    x[1, 2] = 0
    x[2, [1, 4]] = 0
    x[3, [0, 1, 5]] = 0
    grads(lambda t: t.prod(1), x, vulkan=vulkan)
    grads(lambda t: t.prod(), x[:2, :3], vulkan=vulkan)
    out = {}
    for dev in ("cpu", vulkan):
        t = munet.tensor(x, device=dev, requires_grad=True)
        (g,) = munet.autograd.grad(t.prod(1).sum(), t, create_graph=True)
        (g * g).sum().backward()
        out[str(dev)] = t.grad.cpu().numpy()
    np.testing.assert_allclose(out[str(vulkan)], out["cpu"], rtol=1e-4, atol=1e-5)


def test_median_and_mode(vulkan):
    x = np.random.randint(-4, 4, (7, 301)).astype(np.float32)
    x[2, 5] = x[3, :] = np.nan
    x[4, 7] = -0.0
    for fn in (munet.median, munet.nanmedian):
        check(lambda t, fn=fn: fn(t, 1), x, vulkan=vulkan)
        check(lambda t, fn=fn: fn(t.T, 0, keepdim=True), x, vulkan=vulkan)
        check(fn, x, vulkan=vulkan)
        check(fn, x[:3, :40], vulkan=vulkan)
    check(lambda t: munet.median(t, 1), rand(3, 5000), vulkan=vulkan)
    check(lambda t: munet.median(t, 0), np.random.randint(-9, 9, (33, 4)).astype(np.int64), vulkan=vulkan)
    check(munet.median, np.zeros((0,), np.float32), vulkan=vulkan)
    check(lambda t: munet.mode(t, 1), x, vulkan=vulkan)
    check(lambda t: munet.mode(t, 0), x[:, :9], vulkan=vulkan)
    check(lambda t: munet.mode(t, 1), np.random.randint(0, 40, (3, 1000)).astype(np.int64), vulkan=vulkan)
    check(lambda t: munet.mode(t, 0), np.full((3,), np.nan, np.float32), vulkan=vulkan)
    grads(lambda t: munet.median(t, 1).values, rand(4, 9), vulkan=vulkan)
    grads(lambda t: munet.nanmedian(t), rand(4, 9), vulkan=vulkan)


# scans ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,dim", [((7, 300), 1), ((300, 7), 0), ((4, 5, 6), 1), ((5,), 0), ((0, 3), 0),
                                       ((2, 70_000), 1)])  # fmt: skip
def test_scans(vulkan, shape, dim):
    x = rand(*shape)
    big = shape[-1] > 1000
    check(lambda t: t.cumsum(dim), x, vulkan=vulkan, rtol=1e-4, atol=2e-3 if big else 1e-4)
    check(lambda t: (t * 0.05 + 1).cumprod(dim), x, vulkan=vulkan, rtol=1e-3 if big else 1e-4)
    check(lambda t: t.cummax(dim), x, vulkan=vulkan)
    check(lambda t: t.cummin(dim), x, vulkan=vulkan)
    if x.ndim > 1:
        check(lambda t: t.transpose(0, 1).cumsum(dim), x, vulkan=vulkan, rtol=1e-4, atol=2e-3 if big else 1e-4)
    if not big and x.size:
        grads(lambda t: t.cumsum(dim), x, vulkan=vulkan)
        grads(lambda t: t.cummax(dim).values, x, vulkan=vulkan)


def test_scan_special_values_and_integers(vulkan):
    x = np.array([[1.0, 3.0, 3.0, np.nan, 5.0, np.nan, 0.0], [-np.inf, -np.inf, 2.0, 2.0, 1.0, 9.0, 9.0]],
                 np.float32)  # fmt: skip
    check(lambda t: t.cummax(1), x, vulkan=vulkan)
    check(lambda t: t.cummin(1), x, vulkan=vulkan)
    i = np.random.randint(-3, 4, (4, 50)).astype(np.int64)
    check(lambda t: t.cumsum(1), i, vulkan=vulkan)
    check(lambda t: (t > 0).cumsum(0), i, vulkan=vulkan)
    check(lambda t: t[:, :8].cumprod(1), i, vulkan=vulkan)
    check(lambda t: t.cummax(1), i, vulkan=vulkan)
    check(lambda t: t.cumsum(0), np.array(2.0, np.float32), vulkan=vulkan)


def test_cumprod_gradient_with_zeros(vulkan):
    x = rand(5, 12)
    x[0, 3] = 0
    x[1, [2, 7]] = 0
    x[2, 0] = 0
    x[3, 11] = 0
    grads(lambda t: t.cumprod(1), x, vulkan=vulkan)
    grads(lambda t: t.cumprod(0), x, vulkan=vulkan)


def test_long_rows_take_multiple_passes(vulkan, monkeypatch):
    from munet.backends.vulkan import reduction

    monkeypatch.setattr(reduction, "LONG_ROW", 300)
    monkeypatch.setattr(reduction, "CHUNK", 100)
    x = rand(3, 1234)
    before = munet.vulkan.memory_stats()["dispatches"]
    check(lambda t: F.softmax(t, 1), x, vulkan=vulkan)
    assert munet.vulkan.memory_stats()["dispatches"] - before >= 3  # chunk states, their combination, apply
    check(lambda t: t.max(1), x, vulkan=vulkan)
    check(lambda t: F.layer_norm(t, (1234,)), x, vulkan=vulkan, atol=3e-5)
    check(lambda t: t.cumsum(1), x, vulkan=vulkan, rtol=1e-4, atol=1e-4)
    check(lambda t: t.cummax(1), x, vulkan=vulkan)
    grads(lambda t: t.cumsum(1), x, vulkan=vulkan)  # reverse scan in passes


# elementwise special functions -----------------------------------------------------------------


def test_special_functions(vulkan):
    x = rand(4, 33, low=-6, high=6).T
    check(munet.erf, x, vulkan=vulkan, rtol=2e-6, atol=1e-7)
    check(munet.erfc, x, vulkan=vulkan, rtol=2e-5, atol=1e-30)
    y = np.tanh(x).astype(np.float32)
    check(munet.erfinv, y, vulkan=vulkan, rtol=2e-5, atol=1e-6)
    check(munet.erfinv, np.array([-1.0, 1.0, 1.5, np.nan, 0.0, 0.999999], np.float32), vulkan=vulkan, rtol=1e-4)
    check(munet.erf, np.array([np.nan, np.inf, -np.inf, 0.0, 1e-30], np.float32), vulkan=vulkan)
    check(lambda t: F.softplus(t, beta=2.0, threshold=5.0), x * 5, vulkan=vulkan)
    check(F.elu, x, vulkan=vulkan)
    check(F.selu, x, vulkan=vulkan)
    check(lambda t: F.celu(t, 0.5), x, vulkan=vulkan)
    check(lambda t: F.gelu(t), x, vulkan=vulkan)
    grads(lambda t: F.gelu(t) + F.softplus(t) + F.elu(t) + munet.erfinv(t.tanh() * 0.9), x, vulkan=vulkan)
    special = np.array([np.nan, np.inf, -np.inf, 1.0, -2.0], np.float32)
    check(munet.nan_to_num, special, vulkan=vulkan)
    check(lambda t: munet.nan_to_num(t, 1.0, 2.0, -3.0), special, vulkan=vulkan)
    check(munet.nan_to_num, np.array([1, 2], np.int32), vulkan=vulkan)
    check(lambda t: t.std(1), np.ones((3, 4), np.float32), vulkan=vulkan)  # safe_sqrt
    grads(lambda t: t.std(1) + t.norm(dim=1), np.concatenate([np.ones((1, 4)), rand(2, 4)]).astype(np.float32),
          vulkan=vulkan)  # fmt: skip


def test_shifts(vulkan):
    a = np.random.randint(-1000, 1000, (3, 7)).astype(np.int32)
    b = np.array([0, 1, 5, 31, 32, 40, -1], np.int32)  # past the width: 0 (left) or the sign (right)
    for fn in (munet.bitwise_left_shift, munet.bitwise_right_shift):
        check(lambda x, y, fn=fn: fn(x, y), a, b, vulkan=vulkan)
        check(lambda x, fn=fn: fn(x.long(), 3), a, vulkan=vulkan)
    check(lambda x: x.T << 2, a, vulkan=vulkan)
