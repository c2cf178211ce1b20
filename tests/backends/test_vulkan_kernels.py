"""Each vulkan kernel against the cpu backend: the same munet call on both devices.

Tolerances: float32 math on lavapipe differs from NumPy by a few ulps for transcendental
functions; rtol 1e-5 / atol 1e-6 unless stated.
"""

import numpy as np
import pytest

import munet

RTOL, ATOL = 1e-5, 1e-6


def both(fn, *arrays, vulkan):
    """``fn`` on cpu tensors and on vulkan tensors (arrays become tensors, numbers stay)."""
    cpu = [munet.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays]
    gpu = [t.to(vulkan) if isinstance(t, munet.Tensor) else t for t in cpu]
    return fn(*cpu), fn(*gpu)


def assert_same(cpu, gpu, rtol=RTOL, atol=ATOL):
    assert gpu.device.type == "vulkan"
    assert gpu.dtype is cpu.dtype and gpu.shape == cpu.shape
    np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=rtol, atol=atol, equal_nan=True)


def rand(*shape, low=-2.0, high=2.0):
    return np.random.uniform(low, high, shape).astype(np.float32)


UNARY = {
    "neg": None, "abs": None, "exp": None, "exp2": None, "expm1": None, "sin": None, "cos": None,
    "tan": (-1.2, 1.2), "atan": None, "sinh": None, "cosh": None, "tanh": (-12.0, 12.0), "asinh": None,
    "sigmoid": (-30.0, 30.0), "relu": None, "sign": None, "floor": None, "ceil": None, "trunc": None,
    "round": None, "frac": None, "deg2rad": None, "rad2deg": None, "reciprocal": (0.5, 2.0),
    "log": (0.01, 5.0), "log2": (0.01, 5.0), "log10": (0.01, 5.0), "log1p": (-0.9, 5.0),
    "sqrt": (0.0, 5.0), "rsqrt": (0.1, 5.0), "asin": (-0.99, 0.99), "acos": (-0.99, 0.99),
    "acosh": (1.0, 5.0), "atanh": (-0.99, 0.99), "isnan": None, "isinf": None, "isfinite": None,
    "signbit": None, "logical_not": None,
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(vulkan, name):
    low, high = UNARY[name] or (-2.0, 2.0)
    x = rand(4, 33, low=low, high=high)
    cpu, gpu = both(getattr(munet, name), x.T, vulkan=vulkan)  # transposed: strided input
    assert_same(cpu, gpu, rtol=3e-5, atol=3e-6)


def test_unary_special_values(vulkan):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0], np.float32)
    for name in ("relu", "sigmoid", "tanh", "abs", "isnan", "isinf", "isposinf", "isneginf", "sign", "exp"):
        assert_same(*both(getattr(munet, name), x, vulkan=vulkan))
    assert_same(*both(munet.log, np.array([-1.0, 0.0, 1.0], np.float32), vulkan=vulkan))


BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "copysign",
          "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "remainder", "fmod",
          "xlogy", "heaviside", "pow"]  # fmt: skip


TENSOR_ONLY = {
    "heaviside",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "atan2",
    "hypot",
    "logical_and",
    "logical_or",
    "logical_xor",
}


@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcasting(vulkan, name):
    a, b = rand(3, 1, 5), rand(4, 1)
    b[0, 0] = 0.0 if name not in ("div", "remainder", "fmod") else 1.5
    fn = getattr(munet, name)
    assert_same(*both(fn, a, b, vulkan=vulkan))
    if name not in TENSOR_ONLY:
        assert_same(*both(lambda x: fn(x, 0.75), a, vulkan=vulkan))
    assert_same(*both(lambda x: fn(x, x[:, :, 1:2] + 0.25), a, vulkan=vulkan))  # broadcast strided slice


def test_pow_and_nan_propagation(vulkan):
    a = np.array([-2.0, -0.5, 0.0, 0.5, 2.0, np.nan], np.float32)
    for e in (2.0, 3.0, 0.5, -1.0, 0.0):
        assert_same(*both(lambda x, e=e: munet.pow(x, e), a, vulkan=vulkan), rtol=1e-5)
    b = np.array([1.0, np.nan, 0.0, -3.0, 4.0, 1.0], np.float32)
    for name in ("maximum", "minimum", "fmax", "fmin"):
        assert_same(*both(getattr(munet, name), a, b, vulkan=vulkan))


def test_integer_and_bool_ops(vulkan):
    a = np.random.randint(-50, 50, (4, 6)).astype(np.int64)
    b = np.random.randint(1, 5, (6,)).astype(np.int32)
    for fn in (munet.add, munet.sub, munet.mul, munet.maximum, munet.minimum, munet.eq, munet.lt, munet.pow):
        assert_same(*both(fn, a, b.astype(np.int64), vulkan=vulkan))
    assert_same(*both(lambda x: x.abs() + 3, a, vulkan=vulkan))
    assert_same(*both(lambda x, y: x & y, b, b[::-1].copy(), vulkan=vulkan))
    m, n = np.random.rand(5) > 0.5, np.random.rand(5) > 0.5
    for fn in (munet.logical_and, munet.logical_xor, lambda x, y: x | y, lambda x, y: x & y, lambda x, y: ~x):
        assert_same(*both(fn, m, n, vulkan=vulkan))


def test_where_clamp_lerp_casts(vulkan):
    c, a, b = np.random.rand(3, 4) > 0.5, rand(3, 4), rand(4)
    assert_same(*both(munet.where, c, a, b, vulkan=vulkan))
    assert_same(*both(lambda cc, x: munet.where(cc, x, 0.0), c, a, vulkan=vulkan))
    assert_same(*both(lambda x: x.clamp(-0.5, 0.7), a, vulkan=vulkan))
    assert_same(*both(lambda x: x.clamp(min=0.1), a, vulkan=vulkan))
    assert_same(*both(lambda x, y: munet.lerp(x, y, 0.3), a, b, vulkan=vulkan))
    for dtype in (munet.int32, munet.int64, munet.bool, munet.float32):
        assert_same(*both(lambda x, d=dtype: (x * 3).to(d), a, vulkan=vulkan))
    assert_same(*both(lambda x: (x > 0).float() + x.int(), a, vulkan=vulkan))


def test_creation(vulkan):
    for fn in (
        lambda d: munet.full((2, 3), 1.5, device=d),
        lambda d: munet.zeros(4, dtype=munet.int64, device=d),
        lambda d: munet.ones(3, dtype=munet.bool, device=d),
        lambda d: munet.arange(2, 20, 3, device=d),
        lambda d: munet.arange(-1.0, 1.0, 0.125, device=d),
        lambda d: munet.linspace(-1, 3, 7, device=d),
        lambda d: munet.linspace(0, 10, 6, dtype=munet.int64, device=d),
        lambda d: munet.eye(3, 5, device=d),
        lambda d: munet.empty(0, 3, device=d).fill_(2.0),
        lambda d: munet.zeros(2, 3, device=d).fill_(7).clone(),
    ):
        assert_same(fn("cpu"), fn(vulkan))


@pytest.mark.parametrize("shape,dims", [((7, 300), (1,)), ((300, 7), (0,)), ((4, 5, 6), (0, 2)), ((5,), (0,)),
                                        ((3, 4), (0, 1)), ((2, 100_000), (1,)), ((1, 300_000), (0, 1))])  # fmt: skip
def test_reductions(vulkan, shape, dims):
    x = rand(*shape)
    tol = dict(rtol=1e-4, atol=1e-4)
    assert_same(*both(lambda t: t.sum(dims), x, vulkan=vulkan), **tol)
    assert_same(*both(lambda t: t.mean(dims, keepdim=True), x, vulkan=vulkan), **tol)
    assert_same(*both(lambda t: t.amax(dims), x, vulkan=vulkan))
    assert_same(*both(lambda t: t.amin(dims, keepdim=True), x, vulkan=vulkan))
    assert_same(*both(lambda t: t.argmax(dims[-1]), x, vulkan=vulkan))
    assert_same(*both(lambda t: t.argmin(), x, vulkan=vulkan))


def test_reduction_edge_cases(vulkan):
    x = np.array([[1.0, np.nan, 3.0], [3.0, 3.0, -1.0]], np.float32)
    assert_same(*both(lambda t: t.amax(1), x, vulkan=vulkan))
    assert_same(*both(lambda t: t.argmax(1), x, vulkan=vulkan))  # NaN wins; ties: first index
    long = np.zeros((4, 1000), np.float32)  # rows longer than a workgroup: ties and NaNs across threads
    long[0, [700, 5]] = 1.0
    long[1, [900, 300]] = np.nan
    long[2] = -np.inf
    long[3, [999, 256]] = -2.0
    assert_same(*both(lambda t: t.argmax(1), long, vulkan=vulkan))
    assert_same(*both(lambda t: t.argmin(1), long, vulkan=vulkan))
    i = np.random.randint(-9, 9, (5, 40)).astype(np.int64)
    assert_same(*both(lambda t: t.sum(1), i, vulkan=vulkan))
    assert_same(*both(lambda t: t.amax(0), i, vulkan=vulkan))
    assert_same(*both(lambda t: (t > 0).sum(), i, vulkan=vulkan))
    assert_same(*both(lambda t: t.sum(), np.zeros((0, 3), np.float32), vulkan=vulkan))
    assert_same(*both(lambda t: t.sum(), np.array(2.5, np.float32), vulkan=vulkan))


@pytest.fixture(params=["tiled", "blocked"])
def matmul_kernel(request, vulkan, monkeypatch):
    """Run matmul with each of its two kernels: tiled (GPUs) and register-blocked (CPU drivers)."""
    runtime = munet._device.get_backend(vulkan).runtime
    monkeypatch.setattr(runtime, "cpu_driver", request.param == "blocked")
    return vulkan


@pytest.mark.parametrize("sa,sb", [((70, 33), (33, 90)), ((1, 1), (1, 1)), ((2, 3, 64, 16), (16, 65)),
                                   ((4, 1, 5, 7), (3, 7, 2)), ((128, 128), (128, 128)), ((130, 5), (5, 260))])  # fmt: skip
def test_matmul(matmul_kernel, sa, sb):
    vulkan = matmul_kernel
    a, b = rand(*sa), rand(*sb)
    assert_same(*both(munet.matmul, a, b, vulkan=vulkan), rtol=1e-4, atol=1e-4)
    assert_same(*both(lambda x, y: x.mT @ y.mT.contiguous().mT, a.swapaxes(-1, -2).copy(), b, vulkan=vulkan),
                rtol=1e-4, atol=1e-4)  # fmt: skip


def test_integer_matmul(matmul_kernel):
    vulkan = matmul_kernel
    a, b = np.random.randint(-5, 5, (9, 20)).astype(np.int32), np.random.randint(-5, 5, (20, 3)).astype(np.int32)
    assert_same(*both(munet.matmul, a, b, vulkan=vulkan))


def test_gradients_of_a_small_graph(vulkan):
    a, b, w = rand(6, 5), rand(5), rand(5, 4)
    grads = {}
    for dev in ("cpu", vulkan):
        ta, tb, tw = (munet.tensor(v, device=dev, requires_grad=True) for v in (a, b, w))
        h = ((ta * tb - tb.exp()) / 2).tanh() @ tw
        loss = (h.relu() + h.sigmoid() * h.amax(1, keepdim=True)).mean() + ta.abs().sum() * 0.01
        loss.backward()
        grads[str(dev)] = [loss.item()] + [t.grad.cpu().numpy() for t in (ta, tb, tw)]
    for c, g in zip(grads["cpu"], grads["vulkan:0"]):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-5)


def test_in_place_ops_and_views(vulkan):
    x = rand(4, 6)

    def step(t):
        t = t.clone()
        t[:, 1:3] += 1.0
        t.mul_(2).relu_()
        t.T[2].fill_(-1)
        return t

    assert_same(*both(step, x, vulkan=vulkan))


def test_no_kernel_raises_device_error(vulkan, monkeypatch):
    x = munet.ones(3, 3, device=vulkan)
    from munet.backends.vulkan.registry import KERNELS

    monkeypatch.delitem(KERNELS, "cumsum")  # every op will have a kernel
    monkeypatch.delitem(x._storage.backend.kernels, "cumsum", raising=False)
    with pytest.raises(munet.DeviceError, match="no kernel for device 'vulkan:0'"):
        munet.cumsum(x, 0)
