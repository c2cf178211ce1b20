"""LPPool3d, adaptive_max_pool3d_with_indices, FractionalMaxPool2d/3d, LazyInstanceNorm*, CrossMapLRN2d,
AdaptiveLogSoftmaxWithLoss and the deprecated Container, against PyTorch (forward and gradients)."""

import numpy as np
import pytest
import torch

import munet
import munet.nn as nn
import munet.nn.functional as F


def _pair(x):
    return munet.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


def _backward_both(ym, yt, xm, xt, rtol=1e-10):
    w = np.random.default_rng(7).normal(size=tuple(yt.shape))
    (ym * munet.tensor(w, dtype=ym.dtype)).sum().backward()
    (yt * torch.tensor(w, dtype=yt.dtype)).sum().backward()
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("norm_type,kernel,stride", [(2.0, 2, None), (3.0, (2, 3, 2), (1, 2, 1))])
def test_lp_pool3d(norm_type, kernel, stride):
    x = np.abs(np.random.default_rng(0).normal(size=(2, 3, 5, 6, 5))) + 0.1
    xm, xt = _pair(x)
    ym = nn.LPPool3d(norm_type, kernel, stride)(xm)
    yt = torch.nn.LPPool3d(norm_type, kernel, stride)(xt)
    np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(F.lp_pool3d(xm, norm_type, kernel, stride).detach().numpy(), yt.detach().numpy())
    _backward_both(ym, yt, xm, xt)


def test_adaptive_max_pool3d_with_indices():
    x = np.random.default_rng(1).normal(size=(2, 2, 5, 6, 7))
    ym, im = F.adaptive_max_pool3d_with_indices(munet.tensor(x), (2, 3, 4))
    yt, it = torch.nn.functional.adaptive_max_pool3d_with_indices(torch.tensor(x), (2, 3, 4))
    np.testing.assert_array_equal(ym.numpy(), yt.numpy())
    np.testing.assert_array_equal(im.numpy(), it.numpy())


FRACTIONAL = [
    (2, (2, 3, 9, 8), (2, 3), {"output_size": (4, 3)}),
    (2, (3, 7, 7), 2, {"output_size": 5}),
    (2, (2, 2, 10, 10), 3, {"output_ratio": 0.5}),
    (3, (1, 2, 6, 7, 8), (2, 2, 3), {"output_size": (3, 4, 2)}),
    (3, (2, 6, 6, 6), 2, {"output_ratio": (0.5, 0.6, 0.7)}),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n,shape,kernel,kwargs", FRACTIONAL)
def test_fractional_max_pool_matches_torch(n, shape, kernel, kwargs, dtype):
    x = np.random.default_rng(2).normal(size=shape).astype(dtype)
    planes = shape[0] if len(shape) == n + 2 else 1
    samples = torch.rand(
        planes, shape[-n - 1], n, generator=torch.Generator().manual_seed(3), dtype=getattr(torch, dtype)
    )
    xm, xt = _pair(x)
    mod_m = getattr(nn, f"FractionalMaxPool{n}d")(
        kernel, return_indices=True, _random_samples=munet.tensor(samples.numpy()), **kwargs
    )
    mod_t = getattr(torch.nn, f"FractionalMaxPool{n}d")(kernel, return_indices=True, _random_samples=samples, **kwargs)
    (ym, im), (yt, it) = mod_m(xm), mod_t(xt)
    np.testing.assert_array_equal(ym.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(im.numpy(), it.numpy())
    _backward_both(ym, yt, xm, xt)
    assert "_random_samples" in dict(mod_m.named_buffers())


def test_fractional_max_pool_draws_samples_and_checks_arguments():
    munet.manual_seed(0)
    y = F.fractional_max_pool2d(munet.randn(2, 3, 10, 10), 3, output_ratio=0.5)
    assert tuple(y.shape) == (2, 3, 5, 5)
    with pytest.raises(ValueError, match="output_size or an output_ratio"):
        F.fractional_max_pool2d(munet.randn(1, 1, 4, 4), 2)
    with pytest.raises(ValueError, match="only one of"):
        nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5)
    with pytest.raises(RuntimeError, match="too large"):
        F.fractional_max_pool2d(munet.randn(1, 1, 4, 4), 3, output_size=3)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("batched", [True, False])
def test_lazy_instance_norm(n, batched):
    shape = (2, 3) + (4,) * n if batched else (3,) + (4,) * n
    x = np.random.default_rng(4).normal(size=shape)
    mine = getattr(nn, f"LazyInstanceNorm{n}d")()
    assert mine.has_uninitialized_params()
    ym = mine(munet.tensor(x))
    assert type(mine) is getattr(nn, f"InstanceNorm{n}d")
    assert mine.num_features == 3 and mine.affine and mine.track_running_stats
    theirs = getattr(torch.nn, f"InstanceNorm{n}d")(3, affine=True, track_running_stats=True).double()
    np.testing.assert_allclose(ym.detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-10, atol=1e-12)
    # the lazy layer was built with float32 buffers (the default dtype)
    np.testing.assert_allclose(mine.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-6)


@pytest.mark.parametrize("size,channels", [(3, 5), (4, 6), (5, 3), (2, 4), (1, 3), (7, 9)])
def test_cross_map_lrn2d_forward_matches_torch(size, channels):
    x = np.random.default_rng(5).normal(size=(2, channels, 3, 3))
    ym = nn.CrossMapLRN2d(size, 0.1, 0.75, 2.0)(munet.tensor(x))
    yt = torch.nn.CrossMapLRN2d(size, 0.1, 0.75, 2.0)(torch.tensor(x))
    np.testing.assert_allclose(ym.numpy(), yt.numpy(), rtol=1e-12)


def test_cross_map_lrn2d_gradient_is_the_derivative_of_its_forward():
    # PyTorch's hand-written backward assumes a symmetric window that its forward does not use
    # (and fails for size 1); MuNet differentiates the forward itself
    x = munet.tensor(np.random.default_rng(6).normal(size=(1, 5, 2, 2)), requires_grad=True)
    assert munet.autograd.gradcheck(nn.CrossMapLRN2d(3, 0.1, 0.75, 2.0), (x,))
    with pytest.raises(ValueError, match="4D"):
        nn.CrossMapLRN2d(3)(munet.ones(2, 3, 4))


def test_adaptive_log_softmax_with_loss_matches_torch():
    torch.manual_seed(0)
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10], div_value=2.0, head_bias=True).double()
    mine = nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10], div_value=2.0, head_bias=True).double()
    assert sorted(mine.state_dict()) == sorted(theirs.state_dict())
    mine.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x, y = np.random.default_rng(8).normal(size=(6, 8)), np.array([0, 5, 19, 3, 12, 7])
    om, ot = mine(munet.tensor(x), munet.tensor(y)), theirs(torch.tensor(x), torch.tensor(y))
    np.testing.assert_allclose(om.output.detach().numpy(), ot.output.detach().numpy(), rtol=1e-12)
    om.loss.backward()
    ot.loss.backward()
    for (name, pm), pt in zip(mine.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(pm.grad.numpy(), pt.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=name)
    np.testing.assert_allclose(mine.log_prob(munet.tensor(x)).detach().numpy(),
                               theirs.log_prob(torch.tensor(x)).detach().numpy(), rtol=1e-12)  # fmt: skip
    np.testing.assert_array_equal(mine.predict(munet.tensor(x)).numpy(), theirs.predict(torch.tensor(x)).numpy())
    single = mine(munet.tensor(x[0]), munet.tensor(y[0]))
    assert single.output.ndim == 0
    with pytest.raises(RuntimeError, match="Target values should be in"):
        mine(munet.tensor(x[:1]), munet.tensor([20]))
    with pytest.raises(ValueError, match="cutoffs"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 20, [10, 4])


def test_container_is_deprecated():
    with pytest.warns(FutureWarning, match="nn.Container` is deprecated"):
        c = nn.Container(a=nn.Linear(2, 3), b=nn.ReLU())
    assert list(dict(c.named_children())) == ["a", "b"]
