"""munet/ops/pooling.py: max/avg/adaptive/lp pooling against PyTorch (values, indices and
gradients), ceil_mode, padding, dilation, ties, unbatched and non-contiguous inputs, errors."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from munet.backends.cpu import compiled_formula, kernels_pooling
from tests.reference import check, noncontiguous, randn

F64 = "float64"


@pytest.fixture(params=["numpy", "generated"])
def pool_path(request, monkeypatch):
    """The cpu max-pool kernels' two paths: NumPy's passes, or the generated C kernels the compiled
    plan also runs (every size; where their form applies: unpadded windows, a tiling gradient)."""
    if request.param == "generated":
        if not compiled_formula.enabled():
            pytest.skip("eager C kernels are off: no C compiler on this machine, or MUNET_EAGER_C=0")
        monkeypatch.setattr(kernels_pooling, "MIN_ELEMENTS", 0)
    else:
        monkeypatch.setattr(kernels_pooling, "MIN_ELEMENTS", float("inf"))
    return request.param


MAX_CASES = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0), "dilation": (2, 3)},
    {"kernel_size": 2, "stride": 3, "ceil_mode": True},
    {"kernel_size": (4, 3), "stride": 1, "padding": (2, 1), "dilation": 1},
]


@pytest.mark.parametrize("kw", MAX_CASES)
def test_max_pool2d(kw, pool_path):
    x = randn(2, 3, 9, 8, dtype=F64)
    check(
        lambda x: F.max_pool2d(x, return_indices=True, **kw), lambda x: TF.max_pool2d(x, return_indices=True, **kw), x
    )
    check(lambda x: munet.max_pool2d(x, **kw), lambda x: torch.max_pool2d(x, **kw), noncontiguous(randn(2, 3, 9, 8)))


def test_max_pool_ties_pick_first_and_route_gradient_once(pool_path):
    # After relu many windows are all zeros: PyTorch picks the first maximum, and overlapping
    # windows that choose the same element add their gradients there.
    x = np.maximum(np.round(randn(2, 2, 7, 7, dtype=F64)), 0)
    for kw in ({"kernel_size": 3, "stride": 1}, {"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1}):
        check(
            lambda x: F.max_pool2d(x, return_indices=True, **kw),
            lambda x: TF.max_pool2d(x, return_indices=True, **kw),
            x,
        )


@pytest.mark.parametrize(
    "kw", [{"kernel_size": 3}, {"kernel_size": 2, "stride": 1, "padding": 1, "dilation": 2, "ceil_mode": True}]
)
def test_max_pool1d_3d(kw, pool_path):
    check(
        lambda x: F.max_pool1d(x, return_indices=True, **kw),
        lambda x: TF.max_pool1d(x, return_indices=True, **kw),
        randn(2, 3, 11, dtype=F64),
    )
    check(
        lambda x: F.max_pool3d(x, return_indices=True, **kw),
        lambda x: TF.max_pool3d(x, return_indices=True, **kw),
        randn(1, 2, 6, 7, 5, dtype=F64),
    )
    check(
        lambda x: munet.max_pool1d_with_indices(x, **kw),
        lambda x: torch.max_pool1d_with_indices(x, **kw),
        randn(3, 9, dtype=F64),
    )


def test_max_pool_unbatched_low_precision_and_double_backward(pool_path):
    check(
        lambda x: F.max_pool2d(x, 2, return_indices=True),
        lambda x: TF.max_pool2d(x, 2, return_indices=True),
        randn(3, 6, 5),
    )
    for dtype in ("float16", "bfloat16"):
        check(lambda x: F.max_pool2d(x, 3, 2, 1), lambda x: TF.max_pool2d(x, 3, 2, 1), randn(2, 2, 7, 6, dtype=dtype))

    def second(grad, pool):
        def fn(x):
            out = pool(x, 3, 2, 1)
            (gx,) = grad((out * out).sum(), x, create_graph=True)
            return gx

        return fn

    check(
        second(munet.autograd.grad, F.max_pool2d),
        second(torch.autograd.grad, TF.max_pool2d),
        randn(1, 2, 6, 6, dtype=F64),
    )


@pytest.mark.parametrize(
    "kw",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 1, "padding": 1},
        {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True},
    ],
)
def test_max_pool_nan_and_minus_inf_windows(kw, pool_path):
    # PyTorch (max and adaptive max): a window holding NaN gives NaN at its last NaN; a window with nothing above -inf
    # points at its first cell inside the input (not at padding).
    x = randn(2, 2, 7, 6, dtype=F64)
    x[0, 0, 1, 1] = x[0, 0, 1, 2] = x[1, 1, 4, 0] = np.nan
    x[0, 1, :4, :4] = -np.inf
    x[1, 0, :, 3:] = -np.inf
    check(
        lambda x: F.max_pool2d(x, return_indices=True, **kw),
        lambda x: TF.max_pool2d(x, return_indices=True, **kw),
        x,
        grad=False,
    )
    check(
        lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True),
        lambda x: TF.adaptive_max_pool2d(x, (3, 2), return_indices=True),
        x,
        grad=False,
    )


def test_generated_max_pool_serves_eager_calls(monkeypatch):
    if not compiled_formula.enabled():
        pytest.skip("eager C kernels are off: no C compiler on this machine, or MUNET_EAGER_C=0")
    served = []
    original = kernels_pooling._run_generated
    monkeypatch.setattr(kernels_pooling, "_run_generated", lambda *a: served.append(original(*a)) or served[-1])
    monkeypatch.setattr(kernels_pooling, "MIN_ELEMENTS", 0)
    x = np.maximum(randn(2, 3, 8, 6, dtype=F64), 0)  # relu'd: windows of zeros, first maximum wins
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), lambda x: TF.max_pool2d(x, 2, return_indices=True), x)
    assert served.count(True) >= 2  # the forward and the tiling gradient
    served.clear()
    check(lambda x: F.max_pool2d(x, 3, 2, 1), lambda x: TF.max_pool2d(x, 3, 2, 1), x)  # padded, overlapping
    assert True not in served


def test_max_pool_large_windows():
    # More kernel positions than a 16-bit counter of the winning position holds.
    check(
        lambda x: F.max_pool3d(x, (33, 33, 32), stride=1, return_indices=True),
        lambda x: TF.max_pool3d(x, (33, 33, 32), stride=1, return_indices=True),
        randn(1, 1, 34, 33, 32, dtype=F64),
    )


AVG_CASES = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    {"kernel_size": (2, 3), "stride": (3, 2), "ceil_mode": True},
    {"kernel_size": (3, 2), "stride": 1, "padding": (1, 1), "divisor_override": 5},
]


@pytest.mark.parametrize("kw", AVG_CASES)
def test_avg_pool2d(kw):
    check(lambda x: F.avg_pool2d(x, **kw), lambda x: TF.avg_pool2d(x, **kw), randn(2, 3, 9, 8, dtype=F64))


def test_avg_pool_1d_3d_unbatched_float32_noncontiguous():
    kw = {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}
    check(lambda x: munet.avg_pool1d(x, **kw), lambda x: torch.avg_pool1d(x, **kw), randn(2, 3, 10, dtype=F64))
    check(lambda x: F.avg_pool3d(x, **kw), lambda x: TF.avg_pool3d(x, **kw), randn(1, 2, 5, 6, 7, dtype=F64))
    check(lambda x: F.avg_pool2d(x, 2), lambda x: TF.avg_pool2d(x, 2), noncontiguous(randn(3, 6, 8)))
    check(
        lambda x: F.avg_pool2d(x, 2, 1),
        lambda x: TF.avg_pool2d(x, 2, 1),
        randn(2, 2, 5, 5, dtype="float16"),
        grad=False,
    )


@pytest.mark.parametrize("out", [(4, 3), 1, (None, 2), (9, 8), (7, 5), (12, 11)])
def test_adaptive_pool2d(out):
    x = randn(2, 3, 9, 8, dtype=F64)
    check(lambda x: F.adaptive_avg_pool2d(x, out), lambda x: TF.adaptive_avg_pool2d(x, out), x)
    check(
        lambda x: F.adaptive_max_pool2d(x, out, return_indices=True),
        lambda x: TF.adaptive_max_pool2d(x, out, return_indices=True),
        x,
    )


def test_adaptive_pool_1d_3d_unbatched():
    x = randn(2, 3, 10, dtype=F64)
    check(lambda x: munet.adaptive_avg_pool1d(x, 4), lambda x: torch.adaptive_avg_pool1d(x, 4), x)
    check(lambda x: F.adaptive_max_pool1d(x, 3, True), lambda x: TF.adaptive_max_pool1d(x, 3, True), x)
    check(
        lambda x: F.adaptive_avg_pool3d(x, (2, 3, 1)),
        lambda x: TF.adaptive_avg_pool3d(x, (2, 3, 1)),
        randn(1, 2, 5, 6, 4, dtype=F64),
    )
    check(
        lambda x: F.adaptive_max_pool3d(x, (2, 3, 1), return_indices=True),
        lambda x: TF.adaptive_max_pool3d(x, (2, 3, 1), return_indices=True),
        randn(1, 2, 5, 6, 4, dtype=F64),
    )
    check(lambda x: F.adaptive_avg_pool2d(x, 3), lambda x: TF.adaptive_avg_pool2d(x, 3), noncontiguous(randn(3, 7, 5)))
    check(lambda x: F.adaptive_max_pool2d(x, 3), lambda x: TF.adaptive_max_pool2d(x, 3), noncontiguous(randn(3, 7, 5)))


def test_lp_pool():
    x = np.abs(randn(2, 3, 8, 7, dtype=F64)) + 0.1
    check(lambda x: F.lp_pool2d(x, 2, 2), lambda x: TF.lp_pool2d(x, 2, 2), x)
    check(lambda x: F.lp_pool1d(x, 3, 3, 2), lambda x: TF.lp_pool1d(x, 3, 3, 2), x[0])


def test_errors():
    x = munet.zeros(2, 3, 8, 8)
    with pytest.raises(
        RuntimeError, match=r"max_pool2d: expected input of rank 3 or 4 \(N, C, H, W\), got shape \(8, 8\)"
    ):
        F.max_pool2d(munet.zeros(8, 8), 2)
    with pytest.raises(RuntimeError, match="max_pool2d: pad should be at most half of effective kernel size"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(
        RuntimeError, match=r"avg_pool2d: given input size \[2, 2\], calculated output size \[0, 0\] is too small"
    ):
        F.avg_pool2d(munet.zeros(1, 1, 2, 2), 3)
    with pytest.raises(RuntimeError, match="kernel_size, stride and dilation must be greater than zero"):
        F.max_pool2d(x, 2, stride=0)
    with pytest.raises(RuntimeError, match="avg_pool2d: divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(
        RuntimeError, match="adaptive_avg_pool2d: output_size must be a single int or a tuple of 2 ints"
    ):
        F.adaptive_avg_pool2d(x, (1, 2, 3))
    with pytest.raises(RuntimeError, match="max_pool2d: expected a floating point input, got int64"):
        F.max_pool2d(munet.zeros(1, 1, 4, 4, dtype=munet.int64), 2)


def _special_planes(shape, dtype):
    """Random planes with NaN windows, a -inf block, signed zeros and a constant (all-tied) plane."""
    x = np.random.default_rng(7).standard_normal(shape).astype(dtype)
    x[0, 0, :3, :3] = np.nan
    x[0, 0, 2, 2] = np.nan
    x[0, 1, :4, :4] = -np.inf
    x[1, 0, :2, :3] = [[-0.0, 0.0, -0.0], [0.0, -0.0, -0.0]]
    x[1, 1] = 1.5
    return x


def _pool_attrs(kw):
    from munet.ops.pooling import _window_args

    x = munet.zeros(1, 1, 9, 8)
    args = (
        kw["kernel_size"],
        kw.get("stride"),
        kw.get("padding", 0),
        kw.get("dilation", 1),
        kw.get("ceil_mode", False),
    )
    kernel, stride, pad, dil, out = _window_args("max_pool2d", 2, x, *args)
    return dict(kernel_size=kernel, stride=stride, padding=pad, dilation=dil, output_size=out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", MAX_CASES + [{"kernel_size": 3, "dilation": 2}])
def test_max_pool_decomposition_is_pytorchs_rule(kw, dtype):
    """The decomposition (the op's meaning) gives PyTorch's values, indices and zero signs bit for
    bit on NaN, -inf, tied and signed-zero windows; the eager (fast) kernel gives the same."""
    from munet import ops
    from munet.ops._registry import decompose

    x = _special_planes((2, 3, 9, 8), dtype)
    want = TF.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    fast = F.max_pool2d(munet.tensor(x), return_indices=True, **kw)
    meant = decompose(ops.OPS["max_pool"], (munet.tensor(x),), _pool_attrs(kw))
    for got in (meant, fast):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
        np.testing.assert_array_equal(np.signbit(got[0].numpy()), np.signbit(want[0].numpy()))


@pytest.mark.parametrize("out", [(3, 3), (4, 5), (9, 8), (2, 7), (1, 1)])
def test_adaptive_max_pool_decomposition_is_pytorchs_rule(out):
    from munet import ops
    from munet.ops._registry import decompose

    x = _special_planes((2, 3, 9, 8), np.float32)
    want = TF.adaptive_max_pool2d(torch.tensor(x), out, return_indices=True)
    meant = decompose(ops.OPS["adaptive_max_pool"], (munet.tensor(x),), dict(output_size=out))
    fast = F.adaptive_max_pool2d(munet.tensor(x), out, return_indices=True)
    for got in (meant, fast):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
