"""Composite ops (``define(..., decomposition=fn)``, ``munet/ops/_registry.py``): the decomposition
is the meaning.

Every fast kernel a backend registers for a composite is checked against the composite's
decomposition on the same device, on inputs with NaN, +-inf, rows entirely -inf, ties and signed
zeros (cpu here; vulkan with a Vulkan device, required under ``MUNET_TEST_VULKAN=1``). Without a
fast kernel, eager mode runs the decomposition and the compiler decomposes the node at any
optimization level.

Tolerances: the fast kernels compute what the decomposition computes in another order (a running
log-sum-exp, Welford's moments, NumPy's pairwise sums), so they agree to float32 rounding: the
default float32 tolerances (rtol 1.3e-6, atol 1e-5), and float16's (rtol 1e-3, atol 1e-5) where
both round one float32 result to float16.
"""

import math

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import ops
from munet.backends.cpu.registry import KERNELS, load_kernel_modules
from munet.ops._registry import Meta, apply, apply_factory, decompose, define

# attributes each fast kernel is checked with: a case per code path (dim, centering, several dims)
CASES = {
    "softmax": [dict(dim=-1), dict(dim=0), dict(dim=1)],
    "log_softmax": [dict(dim=-1), dict(dim=0), dict(dim=1)],
    "logsumexp": [dict(dims=(2,), keepdim=False), dict(dims=(0,), keepdim=True), dict(dims=(0, 1, 2), keepdim=False)],
    "nansum": [dict(dims=(2,), keepdim=False), dict(dims=(0, 1), keepdim=True), dict(dims=(0, 1, 2), keepdim=False)],
    "standardize": [
        dict(dims=(2,), eps=1e-5, center=True),
        dict(dims=(2,), eps=1e-5, center=False),
        dict(dims=(0, 2), eps=1e-3, center=True),
        dict(dims=(1, 2), eps=0.0, center=True),
    ],
}
# movement, selection and masking composites: the fast kernel and the decomposition pick the same
# elements, so they agree exactly (the tolerances below are then never used)
CASES.update(
    {
        "tril": [dict(diagonal=0), dict(diagonal=2), dict(diagonal=-3), dict(diagonal=-20)],
        "triu": [dict(diagonal=0), dict(diagonal=1), dict(diagonal=-2), dict(diagonal=9)],
        "flip": [dict(dims=(2,)), dict(dims=(0, 1)), dict(dims=(0, 1, 2)), dict(dims=())],
        "roll": [dict(shifts=(3,), dims=(2,)), dict(shifts=(-2, 9), dims=(1, 0)), dict(shifts=(5,), dims=None)],
        "constant_pad_nd": [
            dict(pad=((0, 0), (1, 2), (3, 0)), value=0),
            dict(pad=((1, 1), (0, 0), (0, 0)), value=-1.5),
            dict(pad=((0, 0), (0, 0), (2, 2)), value=float("-inf")),
        ],
        "max_dim": [dict(dim=2, keepdim=False), dict(dim=0, keepdim=True), dict(dim=1, keepdim=False)],
        "min_dim": [dict(dim=2, keepdim=False), dict(dim=0, keepdim=True), dict(dim=1, keepdim=False)],
        "median": [dict(dims=(0, 1, 2), keepdim=False)],
        "nanmedian": [dict(dims=(0, 1, 2), keepdim=False)],
        "median_dim": [dict(dim=2, keepdim=False), dict(dim=0, keepdim=True), dict(dim=1, keepdim=False)],
        "nanmedian_dim": [dict(dim=2, keepdim=False), dict(dim=0, keepdim=True), dict(dim=1, keepdim=False)],
        "mode": [dict(dim=2, keepdim=False), dict(dim=0, keepdim=True), dict(dim=1, keepdim=False)],
        # (N, C, L) = (3, 8, 7) as 1-d pooling: plain, padded, dilated, ceil_mode windows past the end
        "max_pool": [
            dict(kernel_size=(2,), stride=(2,), padding=(0,), dilation=(1,), output_size=(3,)),
            dict(kernel_size=(3,), stride=(2,), padding=(1,), dilation=(1,), output_size=(4,)),
            dict(kernel_size=(2,), stride=(1,), padding=(1,), dilation=(2,), output_size=(7,)),
            dict(kernel_size=(3,), stride=(3,), padding=(0,), dilation=(1,), output_size=(3,)),
        ],
        "adaptive_max_pool": [dict(output_size=(3,)), dict(output_size=(7,)), dict(output_size=(5,))],
        "prod_others": [dict(dims=(2,)), dict(dims=(0, 1)), dict(dims=(0, 1, 2)), dict(dims=())],
        "kthvalue": [dict(k=1, dim=2, keepdim=False), dict(k=3, dim=0, keepdim=True), dict(k=8, dim=1, keepdim=False)],
    }
)
CASES["count_nonzero"] = [dict(dims=(2,)), dict(dims=(0, 1)), dict(dims=(0, 1, 2)), dict(dims=())]
# the gradients of scans and products: (gradient, input) pairs; the special input holds zeros (one
# or several to a line), so every branch of the zero rules is taken
CASES.update(
    {
        "cumprod_backward": [dict(dim=2), dict(dim=0), dict(dim=1)],
        "prod_others_backward": [dict(dims=(2,)), dict(dims=(0, 1)), dict(dims=(0, 1, 2)), dict(dims=())],
        "gelu_backward": [dict(approximate="none"), dict(approximate="tanh")],
        "softmax_backward": [dict(dim=-1), dict(dim=0), dict(dim=1)],
    }
)
# elementwise composites whose fast kernels are rendered from their formulas
CASES["gelu"] = [dict(approximate="none"), dict(approximate="tanh")]
# composites whose inputs are not just the special input x: (inputs made from x, attributes)
EXTRA_INPUTS = {
    # (gradient, standardized values, mean of their product, mean of the gradient or 0, rstd)
    "standardize_input_grad": [
        (
            lambda x: (
                x.flip((0, 2)),
                x,
                x.mean(2, keepdim=True),
                x.flip((0, 2)).mean(2, keepdim=True),
                x.abs()[:, :, :1],
            ),
            {},
        ),
        (lambda x: (x.flip((0, 2)), x, x.mean((0, 2), keepdim=True), 0.0, x.abs().amax((0, 2), keepdim=True)), {}),
    ],
    "masked_fill": [
        (lambda x: (x, x > 0.5, 2.5), {}),
        (lambda x: (x, (x < 0)[:1, :, :1], float("nan")), {}),  # a broadcast mask
        (lambda x: (x, x.isnan(), munet.tensor(-0.0, dtype=x.dtype, device=x.device)), {}),
    ],
    "reduce_tie_weights": [
        (lambda x: (x, x.amax(2)), dict(dims=(2,), keepdim=False)),
        (lambda x: (x, x.amin((0, 1), keepdim=True)), dict(dims=(0, 1), keepdim=True)),
        (lambda x: (x, x.nan_to_num(0.0).amax()), dict(dims=(0, 1, 2), keepdim=False)),
    ],
    "reduce_onehot": [
        (lambda x: (x.argmax(2),), dict(dim=2, shape=(3, 8, 7), keepdim=False, dtype=munet.float32)),
        (lambda x: (x.argmin(0, keepdim=True),), dict(dim=0, shape=(3, 8, 7), keepdim=True, dtype=munet.float32)),
        (lambda x: (munet.tensor(0, device=x.device),), dict(dim=0, shape=(), keepdim=False, dtype=munet.float32)),
    ],
    "one_hot": [
        (lambda x: (munet.tensor(np.arange(24).reshape(2, 3, 4) % 5, device=x.device),), dict(num_classes=5)),
        (lambda x: (munet.tensor([0, 0, 3], device=x.device),), dict(num_classes=4)),
        (lambda x: (munet.tensor(np.zeros((0, 2), np.int64), device=x.device),), dict(num_classes=3)),
    ],
}


def _indices(x, values) -> munet.Tensor:
    return munet.tensor(np.asarray(values, np.int64), device=x.device)


def _special_grid(x) -> munet.Tensor:
    """(3, 3, 5, 2) sampling points for a (3, 2, 4, 7) input: NaN, +-inf, the corners +-1, signed
    zeros, points on pixel centres and half-way between them (ties for nearest's rounding), and
    points outside [-1, 1] that border and reflection padding bring back."""
    rng = np.random.default_rng(5)
    grid = rng.uniform(-1.4, 1.4, (3, 3, 5, 2))
    special = [math.nan, 0.3, 0.1, math.inf, -math.inf, 0.2, -1.0, 1.0, 0.0, -0.0, 1.0 / 7, -3.0 / 7]
    special += [0.25, 0.5, -0.75, 1.5, -2.6, 3.3, -1.0, -1.0, 1.0, 1.0, 5.0 / 7, 0.0]
    grid[0].reshape(-1)[: len(special)] = special
    grid[1].reshape(-1)[-len(special) :] = special[::-1]
    return munet.tensor(grid, dtype=x.dtype, device=x.device)


_GRID_MODES = [
    dict(mode=mode, padding_mode=padding, align_corners=align)
    for mode in ("bilinear", "nearest")
    for padding in ("zeros", "border", "reflection")
    for align in (False, True)
]
_EMBEDDING_GRADIENTS = [
    dict(num_weights=10, padding_idx=None, scale_grad_by_freq=False),
    dict(num_weights=10, padding_idx=2, scale_grad_by_freq=False),
    dict(num_weights=12, padding_idx=0, scale_grad_by_freq=True),
]
# (3, 8) indices into 10 rows: repeated rows, an unused row, the padding rows 0 and 2 among them
_EMBEDDING_ROWS = np.array([[0, 3, 3, 1, 9, 3, 2, 2], [5, 5, 5, 5, 0, 1, 7, 8], [2, 4, 6, 8, 3, 1, 0, 9]])
EXTRA_INPUTS.update(
    {
        "embedding": [
            (
                lambda x: (x.reshape(24, 7), _indices(x, _EMBEDDING_ROWS)),
                dict(padding_idx=None, scale_grad_by_freq=False, sparse=False),
            ),
            (
                lambda x: (x[0], _indices(x, [[7, 0], [3, 3]])),
                dict(padding_idx=3, scale_grad_by_freq=True, sparse=False),
            ),
        ],
        "embedding_backward": [(lambda x: (x, _indices(x, _EMBEDDING_ROWS)), attrs) for attrs in _EMBEDDING_GRADIENTS],
        "searchsorted": [
            # rows sorted with NaN last (ties, -0.0 beside 0.0, +-inf), searched for every special value
            (lambda x: (x.sort(-1).values, x, None), dict(right=right, out_int32=False))
            for right in (False, True)
        ]
        + [
            (lambda x: (x, x[..., :3], x.argsort(-1)), dict(right=True, out_int32=True)),  # through a sorter
            (lambda x: (x[0, 6].sort().values, x, None), dict(right=False, out_int32=False)),  # one sequence
            (lambda x: (x.floor().sort(-1).values, x.floor(), None), dict(right=False, out_int32=False)),
            (lambda x: (x[..., :0], x, None), dict(right=True, out_int32=False)),  # no boundaries
        ],
        "cumulative_select_backward": [
            (lambda x: (x.flip(2), x.cummax(2).indices), dict(dim=2)),
            (lambda x: (x, x.cummin(0).indices), dict(dim=0)),
            (lambda x: (x[0, 0, 0], munet.tensor(0, device=x.device)), dict(dim=0)),
        ],
        "grid_sampler_2d": [(lambda x: (x.reshape(3, 2, 4, 7), _special_grid(x)), attrs) for attrs in _GRID_MODES],
        # (gradient, indices) of 1-d max pooling: windows that tile the input (the generated gather's
        # form) and overlapping ones (the scatter)
        "max_pool_backward": [
            (
                lambda x: (x[..., :3].flip(2), F.max_pool1d(x[..., :6], 2, return_indices=True)[1]),
                dict(input_shape=(3, 8, 6), kernel_size=(2,), stride=(2,), padding=(0,), dilation=(1,)),
            ),
            (
                lambda x: (x[..., :5], F.max_pool1d(x, 3, 1, return_indices=True)[1]),
                dict(input_shape=(3, 8, 7), kernel_size=(3,), stride=(1,), padding=(0,), dilation=(1,)),
            ),
        ],
        "grid_sampler_2d_backward": [
            (lambda x: (x[:, :6, :5].reshape(3, 2, 3, 5), x.reshape(3, 2, 4, 7), _special_grid(x)), attrs)
            for attrs in _GRID_MODES
        ],
    }
)
# creation composites: attributes (the device is the test's)
FACTORY_CASES = {
    "eye": [dict(n=4, m=6), dict(n=5, m=5), dict(n=0, m=3)],
    "linspace": [
        dict(start=-1.0, end=3.0, steps=7),
        dict(start=0.1, end=1e4, steps=1001),
        dict(start=2.0, end=2.0, steps=4),
        dict(start=5.0, end=-5.0, steps=1),
        dict(start=0.0, end=1.0, steps=0),
    ],
}
TOLERANCE = {"float32": (1.3e-6, 1e-5), "float16": (1e-3, 1e-5)}


def _special_input(dtype: str) -> np.ndarray:
    """(3, 8, 7): rows of plain values, NaN, +inf, -inf, all -inf, signed zeros, ties at the max,
    a constant row (zero variance), and a third slice of plain values only."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 8, 7)) * 3
    x[0, 1, 2] = math.nan
    x[0, 2, 0] = math.inf
    x[0, 3, 4] = -math.inf
    x[0, 4, :] = -math.inf
    x[0, 5, :] = [0.0, -0.0, 0.0, -0.0, -0.0, 0.0, -0.0]
    x[0, 6, :4] = 2.5 + x[0, 6].max()  # four equal maxima
    x[0, 7, :] = -1.25  # every element tied
    x[1, ::2, ::3] = -0.0
    x[1, 3, :] = 7.0
    return x.astype(dtype)


def _fast_kernels():
    """(op name, device type) for every fast kernel registered for a composite."""
    load_kernel_modules()
    from munet.backends.vulkan.registry import KERNELS as VULKAN_KERNELS

    composites = sorted(name for name, op in ops.OPS.items() if op.decomposition is not None)
    tables = {"cpu": KERNELS, "vulkan": VULKAN_KERNELS}
    return [(name, device) for device, table in tables.items() for name in composites if name in table]


def _assert_same_meaning(fast, meant, dtype: str, what: str) -> None:
    f, m = fast.float().numpy(), meant.float().numpy()
    assert f.shape == m.shape, what
    np.testing.assert_array_equal(np.isnan(f), np.isnan(m), err_msg=f"{what}: NaN positions")
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(f, m, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    zeros = (f == 0) & (m == 0)
    np.testing.assert_array_equal(np.signbit(f[zeros]), np.signbit(m[zeros]), err_msg=f"{what}: signs of zeros")


def test_every_fast_kernel_has_cases():
    untested = sorted({name for name, _ in _fast_kernels()} - set(CASES) - set(EXTRA_INPUTS) - set(FACTORY_CASES))
    assert not untested, f"fast kernels for composites without cases in CASES: {untested}"


# composites of a gradient and the input it was taken at: the gradient is the special input reversed
GRADIENT_OF_INPUT = {"cumprod_backward", "prod_others_backward", "gelu_backward", "softmax_backward"}


def _cases(name: str, x) -> list:
    """(inputs, attributes) of each case of composite ``name`` on the special input ``x``."""
    if name in FACTORY_CASES:
        return []
    if name in EXTRA_INPUTS:
        return [(inputs(x), attrs) for inputs, attrs in EXTRA_INPUTS[name]]
    inputs = (x.flip((0, 2)), x) if name in GRADIENT_OF_INPUT else (x,)
    return [(inputs, attrs) for attrs in CASES[name]]


def _decomposition_rounded_once(op, inputs, attrs):
    """A composite with a formula: its kernels compute 16-bit floats in float32 and round once (as
    every formula op does), so they mean the decomposition in float32, rounded to the inputs' dtype."""
    dtype = inputs[0].dtype
    if dtype not in (munet.float16, munet.bfloat16):
        return decompose(op, inputs, attrs)
    return decompose(op, tuple(x.float() if isinstance(x, munet.Tensor) else x for x in inputs), attrs).to(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(("name", "device_type"), _fast_kernels())
def test_fast_kernel_matches_the_decomposition(name, device_type, dtype, request):
    device = "cpu" if device_type == "cpu" else request.getfixturevalue("vulkan")
    op = ops.OPS[name]
    x = munet.tensor(_special_input(dtype), device=device)
    for inputs, attrs in _cases(name, x):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            fast = apply(op, *inputs, **attrs)
            meant = _decomposition_rounded_once(op, inputs, attrs) if op.formula else decompose(op, inputs, attrs)
        fast = fast if isinstance(fast, tuple) else (fast,)
        meant = meant if isinstance(meant, tuple) else (meant,)
        for k, (f, m) in enumerate(zip(fast, meant, strict=True)):
            _assert_same_meaning(f.cpu(), m.cpu(), dtype, f"{name}{attrs} on {device}, output {k}")
    for attrs in FACTORY_CASES.get(name, ()):
        attrs = dict(attrs, dtype=getattr(munet, dtype))
        fast = apply_factory(op, device, **attrs)
        meant = decompose(op, (), dict(attrs, device=munet.device(device)))
        _assert_same_meaning(fast.cpu(), meant.cpu(), dtype, f"{name}{attrs} on {device}")


# integer linspace: start and end truncated first (PyTorch's rule); small ranges, where the
# float32 of the vulkan kernel and the float64 of the decomposition truncate alike
INTEGER_CASES = {
    "eye": [dict(n=3, m=4), dict(n=2, m=0)],
    "linspace": [
        dict(start=6.6, end=1.4, steps=4),
        dict(start=-3.3, end=2.1, steps=7),
        dict(start=0.33, end=70.0, steps=11),
        dict(start=0.0, end=10.0, steps=7),
    ],
}


@pytest.mark.parametrize(("name", "device_type"), [(n, d) for n, d in _fast_kernels() if n in FACTORY_CASES])
def test_integer_creation_kernels_match_the_decomposition(name, device_type, request):
    device = "cpu" if device_type == "cpu" else request.getfixturevalue("vulkan")
    op = ops.OPS[name]
    for attrs in INTEGER_CASES[name]:
        attrs = dict(attrs, dtype=munet.int64)
        fast = apply_factory(op, device, **attrs)
        meant = decompose(op, (), dict(attrs, device=munet.device("cpu")))
        np.testing.assert_array_equal(fast.cpu().numpy(), meant.numpy(), err_msg=f"{name}{attrs}")


# without a fast kernel -------------------------------------------------------------------------------


@pytest.fixture
def without_cpu_softmax(monkeypatch):
    """softmax with no fast kernel, on the cpu and (for ``--munet-device=vulkan``) on vulkan."""
    from munet.backends.vulkan.registry import KERNELS as VULKAN_KERNELS

    load_kernel_modules()
    monkeypatch.delitem(KERNELS, "softmax")
    monkeypatch.delitem(VULKAN_KERNELS, "softmax", raising=False)


def test_eager_runs_the_decomposition_without_a_fast_kernel(without_cpu_softmax):
    import torch

    data = np.random.default_rng(1).standard_normal((4, 9)).astype(np.float32)
    x = munet.tensor(data, requires_grad=True)
    y = F.softmax(x, dim=-1)
    (y * munet.arange(9.0)).sum().backward()
    assert y.grad_fn is not None and y.grad_fn.name() == "SoftmaxBackward0"  # the composite's own gradient
    t = torch.tensor(data, requires_grad=True)
    ty = torch.softmax(t, -1)
    (ty * torch.arange(9.0)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1.3e-6, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("fuse", [True, False])
def test_the_compiler_decomposes_a_composite_without_a_fast_kernel(without_cpu_softmax, fuse, tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    x = munet.tensor(np.random.default_rng(2).standard_normal((5, 6)).astype(np.float32))
    compiled = munet.compile(lambda x: F.softmax(x * 2, dim=0), fuse=fuse)
    got = compiled(x)
    np.testing.assert_allclose(got.numpy(), F.softmax(x * 2, dim=0).numpy(), rtol=1.3e-6, atol=1e-5)
    assert "softmax" not in [n.name for n in compiled.graph.nodes]
    assert compiled.stats()["passes"]["decompose"] == 1


def test_with_a_fast_kernel_an_unfused_plan_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    x = munet.tensor(np.random.default_rng(3).standard_normal((5, 6)).astype(np.float32))
    compiled = munet.compile(lambda x: F.softmax(x, dim=0), fuse=False)
    np.testing.assert_array_equal(compiled(x).numpy(), F.softmax(x, dim=0).numpy())
    assert "softmax" in [n.name for n in compiled.graph.nodes]


# a composite without a gradient rule of its own -------------------------------------------------------


def _toy_composite(name: str, decomposition, **rules):
    """Define a toy composite (same shape and dtype as its input) for one test; its name is
    removed from the registry afterwards, so the coverage table never sees it."""
    op = define(name, meta=lambda x: Meta(tuple(x.shape), x.dtype), decomposition=decomposition, **rules)
    try:
        yield op
    finally:
        del ops.OPS[name]


@pytest.fixture
def softsquare():
    """A toy composite ``x * |x|`` with no backward: its gradient comes from its decomposition's ops."""
    yield from _toy_composite("test_softsquare", lambda x: x * x.abs())


def test_a_composite_without_backward_differentiates_through_its_ops(softsquare, tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    data = np.array([-2.0, -0.5, 0.0, 1.5], np.float32)
    x = munet.tensor(data, requires_grad=True)
    apply(softsquare, x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.abs(data))

    def step(x):
        x.requires_grad_(True)
        y = apply(softsquare, x)
        y.sum().backward()
        return y, x.grad

    y, grad = munet.compile(step)(munet.tensor(data))
    np.testing.assert_allclose(y.numpy(), data * np.abs(data))
    np.testing.assert_allclose(grad.numpy(), 2 * np.abs(data))


def test_a_composite_checks_its_arguments_before_decomposing(without_cpu_softmax):
    with pytest.raises(RuntimeError, match="softmax: expected a floating point input"):
        apply(ops.OPS["softmax"], munet.arange(3), dim=0)


@pytest.fixture
def sharpened_softmax():
    """A toy composite with its own gradient rule whose decomposition applies another composite."""

    def backward(ctx, g):
        y = ctx.saved_tensor("result")
        gy = g * y
        return (gy - y * gy.sum(-1, keepdim=True)) * 2.0

    decomposition = lambda x: F.softmax(x * 2.0, dim=-1)  # noqa: E731
    yield from _toy_composite("test_sharpened_softmax", decomposition, backward=backward, saves=("result",))


def test_an_inplace_composite_without_a_kernel_writes_its_decomposition(softsquare):
    from munet.ops._registry import apply_inplace

    x = munet.tensor([-2.0, -0.5, 3.0])
    base = x[:]
    before = x._storage.version
    assert apply_inplace(softsquare, x) is x
    np.testing.assert_array_equal(base.numpy(), [-4.0, -0.25, 9.0])
    assert x._storage.version == before + 1


def test_composites_inside_a_decomposition_are_decomposed_too(sharpened_softmax, tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    data = np.random.default_rng(4).standard_normal((3, 7)).astype(np.float32)
    weights = munet.arange(7.0)

    def step(x):
        x.requires_grad_(True)
        y = apply(sharpened_softmax, x)
        (y * weights).sum().backward()
        return y, x.grad

    compiled = munet.compile(step)
    got = compiled(munet.tensor(data))
    want = step(munet.tensor(data))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1.3e-6, atol=1e-5)
    names = [n.name for n in compiled.graph.nodes]
    assert "test_sharpened_softmax" not in names and "softmax" not in names
    assert compiled.stats()["passes"]["decompose"] == 2


@pytest.fixture
def flat_double():
    """A toy composite with its own gradient rule whose decomposition flattens its input."""
    decomposition = lambda x: (x.reshape(-1) * 2.0).reshape(tuple(x.shape))  # noqa: E731
    yield from _toy_composite("test_flat_double", decomposition, backward=lambda ctx, g: g * 2.0)


def test_a_decomposition_sees_a_view_input_with_its_strides(flat_double, tmp_path, monkeypatch):
    """The node's input is an expand (zero strides) at run time: the decomposition's reshape of it
    must copy, as it does in eager mode, not become a view the run-time strides cannot give."""
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    data = np.arange(4.0, dtype=np.float32)
    compiled = munet.compile(lambda x: apply(flat_double, x.expand(3, 4)) + 1.0)
    np.testing.assert_array_equal(compiled(munet.tensor(data)).numpy(), np.broadcast_to(data * 2 + 1, (3, 4)))
    assert compiled.stats()["passes"]["decompose"] == 1


def test_a_composite_without_backward_runs_its_fast_kernel_only_where_no_gradient_is_needed(softsquare, monkeypatch):
    """Its gradient comes from its decomposition's ops, so eager mode runs the fast kernel only
    where no input needs a gradient (count_nonzero, one_hot: integer results)."""
    load_kernel_modules()
    calls = []

    def fast(x):
        calls.append(1)
        return x * np.abs(x)

    monkeypatch.setitem(KERNELS, "test_softsquare", fast)
    data = np.array([-2.0, -0.5, 0.0, 1.5], np.float32)  # on the cpu, whose kernel table holds `fast`
    np.testing.assert_array_equal(apply(softsquare, munet.tensor(data, device="cpu")).numpy(), data * np.abs(data))
    assert len(calls) == 1
    x = munet.tensor(data, requires_grad=True, device="cpu")
    apply(softsquare, x).sum().backward()
    assert len(calls) == 1
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.abs(data))
    with munet.no_grad():
        apply(softsquare, x)
    assert len(calls) == 2


def _composite_calls():
    """Public calls of the composites whose decomposition runs in every mode (no own gradient rule)."""
    g = np.random.default_rng(4)

    def t(*shape, dtype=np.float32):
        return munet.tensor(g.standard_normal(shape).astype(dtype))

    x, w, b = t(4, 6, 5), t(6), t(6)
    xg = t(4, 6, 5).requires_grad_()
    labels = munet.tensor(g.integers(0, 6, (4, 5)))
    probs = t(4, 6, 5).softmax(1)
    q, kv = t(2, 4, 3, 8), t(2, 2, 7, 8)
    return [
        lambda: F.layer_norm(x, (5,)),
        lambda: F.layer_norm(x.double(), (6, 5)),
        lambda: F.rms_norm(x, (5,), t(5)),
        lambda: F.group_norm(x, 3, w, b),
        lambda: F.batch_norm(x, munet.zeros(6), munet.ones(6), w, b, training=True),
        lambda: F.batch_norm(x, munet.zeros(6), munet.ones(6), training=False),
        lambda: F.instance_norm(x, munet.zeros(6), munet.ones(6), w, b),
        lambda: F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True),
        lambda: F.scaled_dot_product_attention(q, t(2, 1, 7, 8), t(2, 1, 7, 2), is_causal=True),
        lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=t(3, 3) > 0),
        lambda: F.cross_entropy(x, labels, reduction="none", label_smoothing=0.1),
        lambda: F.cross_entropy(x, probs, reduction="none"),
        lambda: F.cross_entropy(x[:, :, 0], labels[:, 0], weight=w.abs()),
        lambda: F.nll_loss(x.log_softmax(1), labels, reduction="none"),
        lambda: F.mse_loss(x, probs, reduction="none"),
        lambda: F.l1_loss(x, probs, weight=probs),
        lambda: F.smooth_l1_loss(x, probs, beta=0.5, reduction="sum"),
        lambda: F.huber_loss(x, probs, reduction="none", delta=0.3),
        lambda: F.binary_cross_entropy(probs, probs.detach() * 0 + 0.5, reduction="none"),
        lambda: F.binary_cross_entropy_with_logits(x, probs, pos_weight=t(5).abs(), reduction="none"),
        lambda: F.kl_div(probs.log(), probs, reduction="batchmean"),
        lambda: F.kl_div(x, x, reduction="none", log_target=True),
        *(lambda f=f: f(x) for f in (F.gelu, F.silu, F.mish, F.hardsigmoid, F.hardswish, F.softsign)),
        *(lambda f=f: f(x) for f in (F.logsigmoid, F.tanhshrink, F.hardshrink, F.softshrink)),
        lambda: F.gelu(x, approximate="tanh"),
        # gelu's gradient composite decomposes where its own gradient is needed (a double backward)
        *(
            lambda a=a: munet.autograd.grad(F.gelu(xg, approximate=a).sum(), xg, create_graph=True)
            for a in ("none", "tanh")
        ),
        lambda: munet.autograd.grad((F.layer_norm(xg, (5,)) * xg).sum(), xg, create_graph=True),
        # softmax's gradient composite decomposes in a double backward too
        lambda: munet.autograd.grad((F.softmax(xg, -1) * xg).sum(), xg, create_graph=True),
        lambda: F.glu(x, 1),
        lambda: F.prelu(x, t(6)),
    ]


def test_every_composite_has_a_meta_that_matches_its_decomposition(monkeypatch):
    """Each composite's meta (its shape/dtype rule) agrees with what its decomposition returns, on a
    call per code path; every composite of the activation, attention, loss and normalization
    families whose gradient comes from its decomposition is called."""
    from munet.ops import _registry

    seen = set()

    def checked(op, args, attrs):
        result = decompose(op, args, attrs)
        meta = op.meta(*args, **attrs)
        metas = meta if isinstance(meta, tuple) and not isinstance(meta, Meta) else (meta,)
        results = result if isinstance(result, tuple) else (result,)
        for m, r in zip(metas, results, strict=True):
            assert (tuple(m.shape), m.dtype) == (tuple(r.shape), r.dtype), op.name
        seen.add(op.name)
        return result

    monkeypatch.setattr(_registry, "decompose", checked)
    for call in _composite_calls():
        call()
    families = {f"munet.ops.{m}" for m in ("activation", "attention", "loss", "normalization")}
    wanted = {
        name
        for name, op in ops.OPS.items()
        if op.decomposition is not None and op.backward is None and op.decomposition.__module__ in families
    }
    assert wanted - seen == set()


# compiled training through the gather/scatter composites -----------------------------------------------


def _sampling_step(x, theta, table, idx, edges):
    """A step through grid_sample (an affine grid, reflection padding), embedding (a padding row)
    and bucketize (searchsorted): the loss and the gradients of the three inputs."""
    for t in (x, theta, table):
        t.requires_grad_(True)
    grid = F.affine_grid(theta, (2, 3, 5, 4), align_corners=False)
    y = F.grid_sample(x, grid, padding_mode="reflection", align_corners=False)  # (2, 3, 5, 4)
    rows = F.embedding(idx, table, padding_idx=0)  # (2, 4, 3)
    bucket = munet.bucketize(y.detach(), edges).to(y.dtype)
    loss = (y * (bucket + 1)).sum() + (rows.sum(1).unsqueeze(-1).unsqueeze(-1) * y).sum()
    loss.backward()
    return loss, x.grad, theta.grad, table.grad


@pytest.mark.parametrize("device_type", ["cpu", "vulkan"])
def test_a_compiled_step_through_grid_sample_embedding_and_searchsorted(device_type, request, tmp_path, monkeypatch):
    """The fused plan holds none of the three composites (they are decomposed into gathers,
    scatters, comparisons and sums before fusion) and matches the eager step, which runs the fast
    kernels."""
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    device = "cpu" if device_type == "cpu" else request.getfixturevalue("vulkan")
    g = np.random.default_rng(7)
    theta = np.array([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]], [[1.2, 0.1, 0.0], [-0.1, 0.8, 0.3]]], np.float32)
    data = [
        g.standard_normal((2, 3, 6, 9)).astype(np.float32),
        theta,
        g.standard_normal((6, 3)).astype(np.float32),
        np.array([[1, 0, 5, 1], [2, 2, 0, 3]]),
        np.array([-0.5, 0.0, 0.5], np.float32),
    ]

    def inputs():
        return [munet.tensor(a, device=device) for a in data]

    compiled = munet.compile(_sampling_step)
    got = compiled(*inputs())
    want = _sampling_step(*inputs())
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().cpu().numpy(), rtol=1e-5, atol=1e-5)
    names = {n.name for n in compiled.graph.nodes}
    assert not names & {"grid_sampler_2d", "grid_sampler_2d_backward", "embedding", "embedding_backward"}
    assert "searchsorted" not in names and {"gather", "scatter"} <= names
