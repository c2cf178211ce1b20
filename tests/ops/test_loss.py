"""Loss functions (munet/ops/loss.py) against torch.nn.functional: forward and gradients."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from tests.reference import check, gradcheck, noncontiguous, randn, rng, to_torch


class Const:
    """A non-differentiable tensor argument (class weights, pos_weight, ...)."""

    def __init__(self, arr):
        self.arr = np.asarray(arr)


def _const(x, lib):
    if not isinstance(x, Const):
        return x
    return munet.from_numpy(x.arr.copy()) if lib == "munet" else to_torch(x.arr)


def check_loss(name, *inputs, rtol=None, atol=None, grad=True, **kwargs):
    """``F.name(*inputs, **kwargs)`` against torch; ``Const`` arguments get no gradient."""
    live = [x for x in inputs if not isinstance(x, Const)]

    def call(fn, lib):
        def run(*args):
            it = iter(args)
            full = [_const(x, lib) if isinstance(x, Const) else next(it) for x in inputs]
            return fn(*full, **{k: _const(v, lib) for k, v in kwargs.items()})

        return run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return check(
            call(getattr(F, name), "munet"), call(getattr(TF, name), "torch"), *live, rtol=rtol, atol=atol, grad=grad
        )


def targets(shape, n_classes, seed=0, ignore=None):
    t = rng(seed).integers(0, n_classes, size=shape).astype(np.int64)
    if ignore is not None and t.size:
        t.reshape(-1)[::3] = ignore
    return t


def probs(shape, class_dim, dtype, seed=5):
    x = rng(seed).standard_normal(shape)
    e = np.exp(x)
    return (e / e.sum(axis=class_dim, keepdims=True)).astype(dtype)


INDEX_SHAPES = [((5,), ()), ((4, 5), (4,)), ((2, 4, 3, 2), (2, 3, 2))]
REDUCTIONS = ["none", "mean", "sum"]


# cross_entropy / nll_loss ------------------------------------------------------------------------


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("ignore_index", [-100, 1])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shapes", INDEX_SHAPES)
def test_cross_entropy_indices(shapes, reduction, weighted, ignore_index, smoothing):
    in_shape, t_shape = shapes
    C = in_shape[0] if len(in_shape) == 1 else in_shape[1]
    x = randn(*in_shape, dtype="float64", seed=1)
    t = targets(t_shape, C, ignore=ignore_index if ignore_index < 0 else None)
    kw = dict(reduction=reduction, ignore_index=ignore_index, label_smoothing=smoothing)
    if weighted:
        kw["weight"] = Const(rng(2).uniform(0.5, 2.0, C))
    check_loss("cross_entropy", x, t, **kw)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shapes", INDEX_SHAPES)
def test_cross_entropy_float32_noncontiguous(shapes, reduction):
    in_shape, t_shape = shapes
    C = in_shape[0] if len(in_shape) == 1 else in_shape[1]
    x = noncontiguous(randn(*in_shape, seed=3))
    t = noncontiguous(targets(t_shape, C, ignore=-100)) if t_shape else targets(t_shape, C)
    check_loss("cross_entropy", x, t, reduction=reduction, weight=Const(np.linspace(0.5, 1.5, C).astype(np.float32)),
               label_smoothing=0.1)  # fmt: skip


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5,), (4, 5), (2, 3, 2, 2)])
def test_cross_entropy_probabilities(shape, reduction, weighted, smoothing, dtype):
    class_dim = 0 if len(shape) == 1 else 1
    x = randn(*shape, dtype=dtype, seed=4)
    t = probs(shape, class_dim, dtype)
    kw = dict(reduction=reduction, label_smoothing=smoothing)
    if weighted:
        kw["weight"] = Const(rng(2).uniform(0.5, 2.0, shape[class_dim]).astype(dtype))
    check_loss("cross_entropy", x, t, **kw)  # gradient for the target too


@pytest.mark.parametrize("ignore_index", [-100, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shapes", INDEX_SHAPES)
def test_nll_loss(shapes, reduction, weighted, ignore_index):
    in_shape, t_shape = shapes
    C = in_shape[0] if len(in_shape) == 1 else in_shape[1]
    x = randn(*in_shape, dtype="float64", seed=1)
    t = targets(t_shape, C, ignore=-100 if ignore_index == -100 else None)
    kw = dict(reduction=reduction, ignore_index=ignore_index)
    if weighted:
        kw["weight"] = Const(rng(2).uniform(0.5, 2.0, C))
    check_loss("nll_loss", x, t, **kw)
    if weighted:
        kw["weight"] = Const(kw["weight"].arr.astype(np.float32))
    check_loss("nll_loss", noncontiguous(x.astype(np.float32)), t, **kw)


def test_all_ignored_mean_is_nan_and_empty_batch():
    x = randn(3, 4, dtype="float64")
    t = np.full(3, -100, dtype=np.int64)
    for w in (None, Const(np.ones(4))):
        out = check_loss("cross_entropy", x, t, weight=w)
        assert np.isnan(out.item())
        check_loss("nll_loss", x, t, weight=w)
        check_loss("cross_entropy", x, t, weight=w, label_smoothing=0.1)
    x0 = randn(0, 4, dtype="float64")
    t0 = np.zeros(0, dtype=np.int64)
    for reduction in REDUCTIONS:
        check_loss("cross_entropy", x0, t0, reduction=reduction)
        check_loss("nll_loss", x0, t0, reduction=reduction)


def test_cross_entropy_int32_target_and_legacy_flags():
    x = randn(4, 3, dtype="float64")
    t = targets((4,), 3)
    out = F.cross_entropy(munet.from_numpy(x.copy()), munet.from_numpy(t.astype(np.int32)))
    np.testing.assert_allclose(
        out.item(), TF.cross_entropy(torch.from_numpy(x), torch.from_numpy(t)).item(), rtol=1e-12
    )
    check_loss("cross_entropy", x, t, reduce=False)
    check_loss("cross_entropy", x, t, size_average=False)


def test_cross_entropy_double_backward():
    x = munet.tensor(randn(3, 4, dtype="float64"), requires_grad=True)
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    t = targets((3,), 4)
    (g,) = munet.autograd.grad(F.cross_entropy(x, munet.from_numpy(t), label_smoothing=0.1), x, create_graph=True)
    (gt,) = torch.autograd.grad(TF.cross_entropy(xt, torch.from_numpy(t), label_smoothing=0.1), xt, create_graph=True)
    (g * g).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-7, atol=1e-10)


def test_class_loss_errors():
    x = munet.from_numpy(randn(4, 3))
    with pytest.raises(
        RuntimeError, match=r"cross_entropy: expected target of shape \(N,\) or \(N, d1, ...\).*got \[3\]"
    ):
        F.cross_entropy(x, munet.from_numpy(np.zeros(3, np.int64)))
    with pytest.raises(IndexError, match="cross_entropy: target 3 is out of bounds for 3 classes"):
        F.cross_entropy(x, munet.from_numpy(np.array([0, 1, 3, 2])))
    with pytest.raises(IndexError, match="nll_loss: target -1 is out of bounds for 3 classes"):
        F.nll_loss(x, munet.from_numpy(np.array([0, -1, 1, 2])))
    with pytest.raises(
        RuntimeError, match="nll_loss: expected target of class indices with an integer dtype, got float32"
    ):
        F.nll_loss(x, munet.from_numpy(np.zeros(4, np.float32)))
    with pytest.raises(
        RuntimeError, match=r"cross_entropy: expected weight to be a 1D tensor of size 3.*got shape \[4\]"
    ):
        F.cross_entropy(x, munet.from_numpy(np.zeros(4, np.int64)), weight=munet.ones(4))
    with pytest.raises(ValueError, match="cross_entropy: 'avg' is not a valid value for reduction"):
        F.cross_entropy(x, munet.from_numpy(np.zeros(4, np.int64)), reduction="avg")
    with pytest.raises(ValueError, match="nll_loss: expected input of rank >= 1"):
        F.nll_loss(munet.tensor(1.0), munet.tensor(0))
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        F.cross_entropy(x, munet.from_numpy(np.zeros(4, np.int64)), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match=r"for input of shape \[3\] the target must have shape \[\], got \[1\]"):
        F.cross_entropy(munet.zeros(3), munet.from_numpy(np.zeros(1, np.int64)))
    with pytest.warns(UserWarning, match="kl_div: reduction 'mean' divides the total loss"):
        F.kl_div(x, x)
    with pytest.raises(ValueError, match="kl_div: 'avg' is not a valid value for reduction"):
        F.kl_div(x, x, reduction="avg")
    with pytest.raises(RuntimeError, match="cross_entropy: expected input of a floating point dtype, got int64"):
        F.cross_entropy(munet.zeros(4, 3, dtype=munet.int64), munet.from_numpy(np.zeros(4, np.int64)))


# regression losses -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_regression_losses(name, reduction, dtype):
    x, y = randn(3, 4, dtype=dtype, seed=1), randn(3, 4, dtype=dtype, seed=2)
    check_loss(name, x, y, reduction=reduction)
    check_loss(name, noncontiguous(x), y, reduction=reduction)
    check_loss(name, x, randn(4, dtype=dtype, seed=2), reduction=reduction)  # broadcast (with a warning)
    check_loss(name, randn(dtype=dtype), randn(dtype=dtype, seed=2), reduction=reduction)  # rank 0
    check_loss(name, randn(0, 3, dtype=dtype), randn(0, 3, dtype=dtype, seed=2), reduction=reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_regression_weight(name, reduction):
    x, y = randn(3, 4, dtype="float64", seed=1), randn(3, 4, dtype="float64", seed=2)
    check_loss(name, x, y, reduction=reduction, weight=Const(rng(3).uniform(0.1, 2.0, (3, 4))))
    with pytest.raises(ValueError, match=f"{name}: expected weight of the input's shape"):
        getattr(F, name)(munet.from_numpy(x), munet.from_numpy(y), weight=munet.ones(4, dtype=munet.float64))


@pytest.mark.parametrize("beta", [0.0, 0.5, 2.0])
def test_smooth_l1_beta_and_huber_delta(beta):
    x, y = randn(4, 5, dtype="float64", seed=1), randn(4, 5, dtype="float64", seed=2)
    check_loss("smooth_l1_loss", x, y, beta=beta)
    if beta > 0:
        check_loss("huber_loss", x, y, delta=beta, reduction="none")
    with pytest.raises(RuntimeError, match="smooth_l1_loss: beta must be non-negative"):
        F.smooth_l1_loss(munet.from_numpy(x), munet.from_numpy(y), beta=-1.0)


# binary and probabilistic losses -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction, dtype):
    x = rng(1).uniform(0.05, 0.95, (4, 3)).astype(dtype)
    t = rng(2).uniform(0, 1, (4, 3)).astype(dtype)
    check_loss("binary_cross_entropy", x, t, reduction=reduction)  # gradient for the target too
    check_loss(
        "binary_cross_entropy", noncontiguous(x), t, reduction=reduction, weight=Const(np.array([0.5, 1.0, 2.0], dtype))
    )
    # log clamped to -100 at exactly 0 and 1 (forward)
    edge = np.array([0.0, 1.0, 0.5, 1.0], dtype)
    check_loss("binary_cross_entropy", edge, np.array([1.0, 0.0, 0.5, 1.0], dtype), reduction=reduction, grad=False)


def test_binary_cross_entropy_saturated_inputs_have_finite_gradients():
    x = munet.tensor([0.0, 1.0, 0.0, 1.0, 0.5], dtype=munet.float64, requires_grad=True)
    t = munet.tensor([1.0, 0.0, 0.0, 1.0, 0.5], dtype=munet.float64)
    F.binary_cross_entropy(x, t).backward()
    assert np.all(np.isfinite(x.grad.numpy()))
    # through a saturated sigmoid the gradient vanishes, as in PyTorch
    z = np.array([40.0, -120.0, 0.3], np.float32)  # sigmoid gives exactly 1 and 0 in float32
    check(lambda a: F.binary_cross_entropy(a.sigmoid(), munet.tensor([0.0, 1.0, 1.0])),
          lambda a: TF.binary_cross_entropy(a.sigmoid(), torch.tensor([0.0, 1.0, 1.0])), z)  # fmt: skip


def test_binary_cross_entropy_errors():
    with pytest.raises(RuntimeError, match="binary_cross_entropy: all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(munet.tensor([0.5, 1.5]), munet.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"binary_cross_entropy: using a target size \(\[2, 1\]\)"):
        F.binary_cross_entropy(munet.tensor([0.5, 0.5]), munet.tensor([[0.0], [1.0]]))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction, dtype):
    x = (randn(4, 3, dtype=dtype, seed=1) * 3).astype(dtype)
    t = rng(2).uniform(0, 1, (4, 3)).astype(dtype)
    check_loss("binary_cross_entropy_with_logits", x, t, reduction=reduction)
    check_loss("binary_cross_entropy_with_logits", noncontiguous(x), t, reduction=reduction,
               weight=Const(np.array([0.5, 1.0, 2.0], dtype)), pos_weight=Const(np.array([3.0, 1.0, 0.5], dtype)))  # fmt: skip
    check_loss("binary_cross_entropy_with_logits", randn(2, 3, 2, dtype=dtype), rng(3).uniform(0, 1, (2, 3, 2)).astype(dtype),
               reduction=reduction, pos_weight=Const(np.array([2.0, 0.5], dtype)))  # fmt: skip
    # exactly zero logits (a zero-initialized output layer)
    check_loss("binary_cross_entropy_with_logits", np.zeros((2, 3), dtype), t[:2].copy(), reduction=reduction)
    # numerically stable for large logits
    big = np.array([-1000.0, -50.0, 50.0, 1000.0], dtype)
    check_loss("binary_cross_entropy_with_logits", big, np.array([1.0, 0.0, 1.0, 0.0], dtype), reduction=reduction)


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum", "batchmean"])
def test_kl_div(reduction, log_target):
    x = np.log(probs((3, 4), 1, "float64", seed=1))
    t = probs((3, 4), 1, "float64", seed=2)
    if log_target:
        t = np.log(t)
    check_loss("kl_div", x, t, reduction=reduction, log_target=log_target)
    check_loss(
        "kl_div", noncontiguous(x.astype(np.float32)), t.astype(np.float32), reduction=reduction, log_target=log_target
    )
    if not log_target:  # zero targets contribute 0 (input gradient only: d/dt log t is infinite there)
        t0 = t.copy()
        t0[0, 1] = 0.0
        check_loss("kl_div", x, Const(t0), reduction=reduction)


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("log_input", [True, False])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_poisson_nll_loss(reduction, log_input, full):
    x = randn(3, 4, dtype="float64", seed=1) if log_input else rng(1).uniform(0.1, 3.0, (3, 4))
    t = rng(2).poisson(2.0, (3, 4)).astype(np.float64)
    # target as a constant: torch's full=True target gradient is nan at target 0 (0 * log 0)
    check_loss("poisson_nll_loss", x, Const(t), log_input=log_input, full=full, reduction=reduction)
    check_loss("poisson_nll_loss", x, t, log_input=log_input, reduction=reduction)


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gaussian_nll_loss(reduction, full):
    x, t = randn(3, 4, dtype="float64", seed=1), randn(3, 4, dtype="float64", seed=2)
    var = rng(3).uniform(0.1, 2.0, (3, 4))
    var[0, 0] = 1e-9  # clamped to eps, gradient still flows
    check_loss("gaussian_nll_loss", x, t, var, full=full, reduction=reduction)
    check_loss("gaussian_nll_loss", x, t, var[:, 0].copy(), reduction=reduction)  # one dim short
    check_loss("gaussian_nll_loss", x, t, var[:, :1].copy(), reduction=reduction)  # size 1 in one dim
    check_loss("gaussian_nll_loss", x, t, 0.5, reduction=reduction)
    with pytest.raises(ValueError, match="gaussian_nll_loss: var is of incorrect size"):
        F.gaussian_nll_loss(munet.from_numpy(x), munet.from_numpy(t), munet.ones(2, 2, dtype=munet.float64))
    with pytest.raises(ValueError, match="gaussian_nll_loss: var has negative entry"):
        F.gaussian_nll_loss(munet.from_numpy(x), munet.from_numpy(t), -1.0)


# margin and embedding losses ---------------------------------------------------------------------


def _signs(shape, seed=4):
    return np.where(rng(seed).uniform(size=shape) < 0.5, -1.0, 1.0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_losses(reduction):
    x1, x2 = randn(6, dtype="float64", seed=1), randn(6, dtype="float64", seed=2)
    y = _signs(6)
    check_loss("soft_margin_loss", x1, Const(y), reduction=reduction)
    check_loss("margin_ranking_loss", x1, x2, Const(y), margin=0.3, reduction=reduction)
    check_loss("hinge_embedding_loss", noncontiguous(randn(3, 4, dtype="float64")), Const(_signs((3, 4))), margin=0.5,
               reduction=reduction)  # fmt: skip
    check_loss("cosine_embedding_loss", randn(4, 5, dtype="float64", seed=1), randn(4, 5, dtype="float64", seed=2),
               Const(_signs(4)), margin=0.1, reduction=reduction)  # fmt: skip
    check_loss("cosine_embedding_loss", randn(5, dtype="float64", seed=1), randn(5, dtype="float64", seed=2),
               Const(np.array(-1.0)), reduction=reduction)  # fmt: skip


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("p", [1.0, 2.0])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_triplet_margin_loss(reduction, p, swap):
    a, pos, neg = (randn(4, 5, dtype="float64", seed=s) for s in (1, 2, 3))
    check_loss("triplet_margin_loss", a, pos, neg, margin=1.5, p=p, swap=swap, reduction=reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_soft_margin_loss(reduction):
    x = randn(3, 4, dtype="float64")
    t = (rng(2).uniform(size=(3, 4)) < 0.5).astype(np.float64)
    check_loss("multilabel_soft_margin_loss", x, Const(t), reduction=reduction)
    check_loss(
        "multilabel_soft_margin_loss", x, Const(t), weight=Const(np.array([0.5, 1.0, 2.0, 1.5])), reduction=reduction
    )


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multi_margin_loss(reduction, p):
    x = randn(4, 5, dtype="float64")
    t = targets((4,), 5)
    check_loss("multi_margin_loss", x, t, p=p, margin=0.7, reduction=reduction)
    check_loss("multi_margin_loss", x, t, p=p, weight=Const(rng(3).uniform(0.5, 2, 5)), reduction=reduction)
    check_loss("multi_margin_loss", x[0].copy(), np.array(t[0]), p=p, reduction=reduction)
    with pytest.raises(IndexError, match="multi_margin_loss: target 5 is out of bounds for 5 classes"):
        F.multi_margin_loss(munet.from_numpy(x), munet.from_numpy(np.array([0, 1, 5, 2])))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_losses_half_precision(dtype):
    x = randn(4, 3, 2, dtype=dtype, seed=1)
    t = targets((4, 2), 3, ignore=-100)
    check_loss("cross_entropy", x, t, label_smoothing=0.1)
    check_loss("nll_loss", x, t, reduction="sum")
    check_loss("mse_loss", x, randn(4, 3, 2, dtype=dtype, seed=2))
    check_loss("binary_cross_entropy_with_logits", x, Const(rng(3).uniform(size=(4, 3, 2)).astype(x.dtype)))


def test_losses_gradcheck_float64():
    """Finite differences through the composites where PyTorch's rule is analytic."""
    t = targets((3,), 4)
    gradcheck(lambda x: F.cross_entropy(x, munet.from_numpy(t), label_smoothing=0.2), randn(3, 4, dtype="float64"))
    gradcheck(lambda x: F.binary_cross_entropy_with_logits(x, munet.tensor([[1.0, 0.0, 0.5], [0.0, 0.2, 1.0]], dtype=munet.float64)),
              randn(2, 3, dtype="float64"))  # fmt: skip
