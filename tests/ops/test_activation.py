"""Activations, softmax family and dropout (munet/ops/activation.py) against PyTorch."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from tests.ops.test_normalization import double_backward
from tests.reference import assert_close, check, noncontiguous, randn

# (name, kwargs): F.<name>(x, **kwargs) against torch.nn.functional.<name>(x, **kwargs)
UNARY = [
    ("relu", {}),
    ("relu6", {}),
    ("gelu", {}),
    ("gelu", {"approximate": "tanh"}),
    ("silu", {}),
    ("mish", {}),
    ("sigmoid", {}),
    ("tanh", {}),
    ("softplus", {}),
    ("softplus", {"beta": 2.0, "threshold": 1.0}),
    ("softsign", {}),
    ("leaky_relu", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("elu", {}),
    ("elu", {"alpha": 0.5}),
    ("selu", {}),
    ("celu", {"alpha": 2.0}),
    ("hardtanh", {}),
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}),
    ("hardsigmoid", {}),
    ("hardswish", {}),
    ("logsigmoid", {}),
    ("threshold", {"threshold": 0.3, "value": -2.0}),
    ("tanhshrink", {}),
    ("softshrink", {}),
    ("softshrink", {"lambd": 1.0}),
    ("hardshrink", {}),
    ("hardshrink", {"lambd": 1.0}),
    ("rrelu", {}),
]


def _scaled(shape, dtype, seed=0):
    # spread values over the interesting ranges (+-3 for hard*, large for thresholds)
    return randn(*shape, dtype=dtype, seed=seed) * np.asarray(2.5, dtype=randn(1, dtype=dtype).dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kwargs", UNARY, ids=[f"{n}-{i}" for i, (n, _) in enumerate(UNARY)])
def test_unary_activation(name, kwargs, dtype):
    mf, tf = getattr(F, name), getattr(TF, name)
    x = _scaled((4, 5), dtype)
    check(lambda x: mf(x, **kwargs), lambda x: tf(x, **kwargs), x)
    check(lambda x: mf(x, **kwargs), lambda x: tf(x, **kwargs), noncontiguous(_scaled((3, 2, 4), dtype, seed=1)))
    check(lambda x: mf(x, **kwargs), lambda x: tf(x, **kwargs), np.asarray(-1.25, dtype=x.dtype))
    check(lambda x: mf(x, **kwargs), lambda x: tf(x, **kwargs), np.zeros((0, 3), dtype=x.dtype))


@pytest.mark.parametrize(
    "name", ["relu", "gelu", "silu", "sigmoid", "tanh", "elu", "leaky_relu", "softplus", "hardswish"]
)
def test_unary_activation_half(name):
    x = _scaled((3, 7), "float32")
    for dtype in ("float16", "bfloat16"):
        xs = x.astype(np.float16) if dtype == "float16" else randn(3, 7, dtype="bfloat16")
        check(getattr(F, name), getattr(TF, name), xs, grad=False)


def test_extreme_values_are_finite():
    x = np.array([-1e4, -100.0, -30.0, 0.0, 30.0, 100.0, 1e4], dtype=np.float32)
    for name in ["softplus", "logsigmoid", "elu", "selu", "celu", "mish", "silu", "gelu"]:
        check(getattr(F, name), getattr(TF, name), x, atol=1e-5)
    check(lambda x: F.softplus(x, beta=-1.0), lambda x: TF.softplus(x, beta=-1.0), x)


def test_relu_gradient_at_zero_and_int_input():
    check(F.relu, TF.relu, np.array([-1.0, 0.0, 2.0]))
    check(F.hardtanh, TF.hardtanh, np.array([-1.0, 1.0, 0.5, -3.0]))
    check(F.leaky_relu, TF.leaky_relu, np.array([-1.0, 0.0, 2.0]))
    check(munet.relu, torch.relu, np.array([-3, 0, 4], dtype=np.int64), grad=False)


@pytest.mark.parametrize(
    "name", ["relu", "leaky_relu", "elu", "selu", "celu", "hardtanh", "relu6", "rrelu", "silu", "mish"]
)
def test_inplace_variants(name):
    x = _scaled((3, 4), "float64")
    check(lambda x: getattr(F, name)(x * 1.0, inplace=True), lambda x: getattr(TF, name)(x * 1.0, inplace=True), x)
    m = munet.tensor(x)
    out = getattr(F, name)(m, inplace=True)
    assert out is m
    assert_close(m, getattr(TF, name)(torch.tensor(x)))


def test_inplace_functions():
    x = _scaled((3, 4), "float64")
    for mfn, tfn, args in [
        (munet.relu_, torch.relu_, ()),
        (F.leaky_relu_, TF.leaky_relu_, (0.1,)),
        (F.elu_, TF.elu_, ()),
        (munet.selu_, torch.selu_, ()),
        (munet.celu_, torch.celu_, ()),
        (F.hardtanh_, TF.hardtanh_, (-0.5, 0.5)),
        (munet.threshold_, torch.threshold_, (0.1, 5.0)),
    ]:
        check(lambda x: mfn(x * 1.0, *args), lambda x: tfn(x * 1.0, *args), x)
    m = munet.tensor(x)
    assert m.relu_() is m
    assert_close(m, torch.tensor(x).relu_())
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        munet.relu_(munet.tensor(x, requires_grad=True))


def test_tensor_methods():
    x = _scaled((3, 4), "float64")
    check(lambda x: x.relu(), lambda x: x.relu(), x)
    check(lambda x: x.softmax(1), lambda x: x.softmax(1), x)
    check(lambda x: x.log_softmax(dim=0), lambda x: x.log_softmax(dim=0), x)
    check(lambda x: x.hardshrink(0.3), lambda x: x.hardshrink(0.3), x)


@pytest.mark.parametrize("wshape", [(1,), (3,)])
@pytest.mark.parametrize("xshape", [(2, 3), (2, 3, 4), (2, 3, 2, 2)])
def test_prelu(xshape, wshape):
    x, w = _scaled(xshape, "float64"), randn(*wshape, dtype="float64", seed=3)
    check(F.prelu, TF.prelu, x, w)
    check(munet.prelu, torch.prelu, noncontiguous(x), w)


def test_prelu_errors_and_1d():
    check(F.prelu, TF.prelu, _scaled((5,), "float64"), np.array([0.3]))
    with pytest.raises(RuntimeError, match=r"prelu: expected weight with 1 element or 3 elements"):
        F.prelu(munet.zeros(2, 3), munet.zeros(2))


def test_rrelu_training_slopes_in_range():
    x = munet.tensor(-np.abs(randn(1000, dtype="float64")) - 0.1)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    slope = (y / x).numpy()
    assert slope.min() >= 0.1 and slope.max() <= 0.3 and slope.std() > 0.03
    pos = munet.tensor(np.abs(randn(10, dtype="float64")))
    assert_close(F.rrelu(pos, training=True), torch.tensor(pos.numpy()))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_glu(dim):
    check(lambda x: F.glu(x, dim), lambda x: TF.glu(x, dim), randn(4, 6, 2, dtype="float64"))
    with pytest.raises(RuntimeError, match="glu: Halving dimension must be even, but dimension 1 is size 3"):
        F.glu(munet.zeros(2, 3), 1)


def test_activation_errors():
    with pytest.raises(ValueError, match="hardtanh: min_val cannot be greater than max_val"):
        F.hardtanh(munet.zeros(2), 1.0, -1.0)
    with pytest.raises(RuntimeError, match="gelu: approximate argument must be either 'none' or 'tanh', got 'fast'"):
        F.gelu(munet.zeros(2), approximate="fast")
    with pytest.raises(RuntimeError, match="leaky_relu: expected a floating point input, got int64"):
        F.leaky_relu(munet.zeros(2, dtype=munet.int64))


# softmax family -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_softmax_family(name, dim, dtype):
    mf, tf = getattr(F, name), getattr(TF, name)
    x = randn(3, 4, 5, dtype=dtype) * np.asarray(3, dtype=dtype)
    check(lambda x: mf(x, dim), lambda x: tf(x, dim), x)
    check(lambda x: mf(x, dim=dim), lambda x: tf(x, dim=dim), noncontiguous(x))
    check(lambda x: mf(x, dim, dtype=munet.float64), lambda x: tf(x, dim, dtype=torch.float64), x)


def test_softmax_edge_shapes_and_stability():
    check(lambda x: F.softmax(x, 0), lambda x: TF.softmax(x, 0), np.array(1.5))
    check(lambda x: F.log_softmax(x, 1), lambda x: TF.log_softmax(x, 1), np.zeros((0, 3)))
    check(lambda x: F.log_softmax(x, 1), lambda x: TF.log_softmax(x, 1), np.zeros((2, 1)))
    big = np.array([[1000.0, 0.0, -1000.0], [3e38, 3e38, 1.0]], dtype=np.float32)
    check(lambda x: F.softmax(x, 1), lambda x: TF.softmax(x, 1), big)
    check(lambda x: F.log_softmax(x, 1), lambda x: TF.log_softmax(x, 1), big)
    check(lambda x: F.softmax(x, -1), lambda x: TF.softmax(x, -1), randn(2, 5, dtype="bfloat16"), grad=False)
    check(lambda x: munet.softmax(x, 1), lambda x: torch.softmax(x, 1), randn(2, 5).astype(np.float16), grad=False)


def test_softmax_implicit_dim_follows_legacy_rule():
    for shape in [(5,), (2, 3), (2, 3, 4), (2, 3, 4, 5)]:
        x = randn(*shape, dtype="float64")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = F.softmax(munet.tensor(x))
        assert any("Implicit dimension choice" in str(w.message) for w in caught)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_close(out, TF.softmax(torch.tensor(x)))


def test_softmax_errors():
    with pytest.raises(RuntimeError, match="softmax: expected a floating point input, got int64"):
        F.softmax(munet.zeros(2, 3, dtype=munet.int64), 1)
    with pytest.raises(IndexError, match=r"softmax: dimension out of range"):
        F.softmax(munet.zeros(2, 3), 2)
    check(
        lambda x: F.softmax(x, 1, dtype=munet.float32),
        lambda x: TF.softmax(x, 1, dtype=torch.float32),
        np.arange(6).reshape(2, 3),
        grad=False,
    )


@pytest.mark.parametrize(
    "mf,tf",
    [
        (lambda x: F.softmax(x, 1), lambda x: TF.softmax(x, 1)),
        (lambda x: F.log_softmax(x, 0), lambda x: TF.log_softmax(x, 0)),
        (F.gelu, TF.gelu),
        (lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh")),
        (F.silu, TF.silu),
        (F.elu, TF.elu),
        (F.softplus, TF.softplus),
        (F.mish, TF.mish),
        (F.leaky_relu, TF.leaky_relu),
        (F.relu, TF.relu),
    ],
)
def test_double_backward(mf, tf):
    double_backward(mf, tf, randn(3, 4, dtype="float64") * 2)


# dropout ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_dropout_statistics_and_scaling(p):
    x = munet.ones(200, 100, dtype=munet.float64, requires_grad=True)
    y = F.dropout(x, p)
    values = np.unique(y.detach().numpy())
    assert set(np.round(values, 12)) <= {0.0, round(1 / (1 - p), 12)}
    kept = (y.detach().numpy() != 0).mean()
    assert abs(kept - (1 - p)) < 0.02, kept
    assert abs(y.detach().numpy().mean() - 1.0) < 0.06
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())  # gradient is mask / (1 - p)


def test_dropout_identity_and_edge_cases():
    x = munet.tensor(randn(4, 5, dtype="float64"))
    assert F.dropout(x, 0.0) is x
    assert F.dropout(x, 0.7, training=False) is x
    assert munet.dropout(x, 0.5, False) is x
    assert_close(F.dropout(x, 1.0), torch.zeros(4, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        F.dropout(x, 1.5)
    y = x.clone()
    out = F.dropout(y, 0.5, inplace=True)
    assert out is y and set(np.unique(np.round(y.numpy() / x.numpy(), 9))) <= {0.0, 2.0}


@pytest.mark.parametrize(
    "fn,shape,mask_dims",
    [
        (F.dropout1d, (8, 50, 6), (2,)),
        (F.dropout1d, (50, 6), (1,)),
        (F.dropout2d, (8, 50, 3, 4), (2, 3)),
        (F.dropout3d, (4, 50, 2, 3, 2), (2, 3, 4)),
        (F.dropout3d, (50, 2, 3, 2), (1, 2, 3)),
    ],
)
def test_channel_dropout_masks_whole_channels(fn, shape, mask_dims):
    x = munet.ones(*shape, dtype=munet.float64)
    y = fn(x, 0.5).numpy()
    assert np.all(y.min(axis=mask_dims) == y.max(axis=mask_dims)), "a channel was partly dropped"
    assert set(np.unique(y)) <= {0.0, 2.0}
    frac = (y != 0).mean()
    assert 0.3 < frac < 0.7
    assert fn(x, 0.5, training=False) is x


def _constant_dims(y: np.ndarray) -> tuple:
    """The dims along which the dropout mask of ``y`` never changes (where its noise has size 1)."""
    return tuple(d for d in range(y.ndim) if np.all(y.min(axis=d) == y.max(axis=d)))


@pytest.mark.parametrize(
    "name,shape",
    [
        ("dropout1d", (16, 5)),
        ("dropout2d", (16, 5, 4)),
        ("dropout2d", (16, 5)),  # no batch and no channel dim: PyTorch warns and drops elements
        ("dropout2d", (4, 6, 3, 2, 2)),
        ("dropout3d", (16, 5, 2, 3)),
        ("dropout3d", (16, 5, 4)),  # an unexpected rank is one unbatched sample, with a warning
        ("dropout3d", (16, 5)),
        ("dropout3d", (16, 4, 2, 2, 2, 2)),
    ],
)
def test_channel_dropout_ranks_and_warnings_as_torch(name, shape):
    """Which dims share a mask entry, and which warnings are given, for every rank PyTorch runs
    (each dim with its own mask entries has at least 16 of them, so it is never constant by chance)."""
    torch.manual_seed(0)
    munet.manual_seed(0)
    results = []
    for lib, fn in ((torch, getattr(TF, name)), (munet, getattr(F, name))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = np.asarray(fn(lib.ones(*shape, dtype=lib.float64), 0.5))
        results.append((_constant_dims(y), y.shape, [str(w.message)[:40] for w in caught]))
    assert results[1] == results[0]


def test_channel_dropout_rank_errors_as_torch():
    for name, shape in (("dropout1d", (5,)), ("dropout1d", (2, 3, 4, 5)), ("dropout2d", (5,)), ("dropout3d", ())):
        with pytest.raises(RuntimeError) as expected, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(TF, name)(torch.ones(shape))
        message = str(expected.value).split(".")[0]
        with pytest.raises(RuntimeError, match=message), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(F, name)(munet.ones(shape))


def test_alpha_dropout_keeps_mean_and_variance():
    x = munet.randn(200, 200, dtype=munet.float64)
    y = F.alpha_dropout(x, 0.3, training=True).numpy()
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1.0) < 0.05
    assert F.alpha_dropout(x, 0.3) is x
    p, alpha = 0.5, 1.7580993408473766
    a = 1.0 / np.sqrt((alpha * alpha * p + 1) * (1 - p))
    x = munet.randn(20, 30, 4, dtype=munet.float64)
    z = F.feature_alpha_dropout(x, p, training=True).numpy()
    kept = np.isclose(z, x.numpy() * a + alpha * a * p).all(axis=2)
    dropped = np.isclose(z, alpha * a * (p - 1)).all(axis=2)
    assert np.all(kept ^ dropped), "noise is not constant per channel"
    assert 0.3 < kept.mean() < 0.7


def test_softmax_positional_dtype_like_torch_softmax():
    x = randn(2, 3)
    check(lambda x: munet.softmax(x, 1, munet.float64), lambda x: torch.softmax(x, 1, torch.float64), x)
    check(lambda x: x.log_softmax(0, munet.float64), lambda x: x.log_softmax(0, torch.float64), x)
