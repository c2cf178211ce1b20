"""nn.init's deprecated aliases, the hook-based weight_norm / spectral_norm, batch-norm fusion,
clip_grads_with_norm_, the deprecated clip_grad_norm and skip_init, against PyTorch (float64)."""

import numpy as np
import pytest
import torch

import munet
import munet.nn as nn
from munet.nn import init

ALIASES = [
    ("uniform", (-0.5, 0.5)),
    ("normal", (0.1, 2.0)),
    ("constant", (0.25,)),
    ("eye", ()),
    ("dirac", ()),
    ("xavier_uniform", ()),
    ("xavier_normal", ()),
    ("kaiming_uniform", ()),
    ("kaiming_normal", ()),
    ("orthogonal", ()),
    ("sparse", (0.5,)),
]


@pytest.mark.parametrize("name,args", ALIASES)
def test_init_aliases_warn_and_match_the_underscore_form(name, args):
    shape = (4, 3, 3) if name == "dirac" else (5, 4)
    munet.manual_seed(3)
    expected = getattr(init, name + "_")(munet.empty(*shape), *args)
    munet.manual_seed(3)
    with pytest.warns(FutureWarning, match=f"nn.init.{name}` is now deprecated in favor of `nn.init.{name}_"):
        got = getattr(init, name)(munet.empty(*shape), *args)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    assert getattr(init, name).__name__ == name


def _pair(kind):
    torch.manual_seed(0)
    theirs = {
        "linear": torch.nn.Linear(4, 3),
        "conv": torch.nn.Conv2d(2, 3, 3),
        "convt": torch.nn.ConvTranspose2d(3, 2, 3),
    }[kind].double()
    mine = {"linear": nn.Linear(4, 3), "conv": nn.Conv2d(2, 3, 3), "convt": nn.ConvTranspose2d(3, 2, 3)}[kind].double()
    mine.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    shape = {"linear": (5, 4), "conv": (2, 2, 6, 6), "convt": (2, 3, 4, 4)}[kind]
    x = np.random.default_rng(1).normal(size=shape)
    return mine, theirs, munet.tensor(x), torch.tensor(x)


def _grads_close(mine, theirs, names):
    for name in names:
        np.testing.assert_allclose(
            getattr(mine, name).grad.numpy(), getattr(theirs, name).grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name
        )


@pytest.mark.parametrize("kind,dim", [("linear", 0), ("conv", 0), ("conv", 1), ("conv", None), ("convt", 1)])
def test_weight_norm_hook_matches_torch(kind, dim):
    mine, theirs, xm, xt = _pair(kind)
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        nn.utils.weight_norm(mine, dim=dim)
    with pytest.warns(FutureWarning):
        torch.nn.utils.weight_norm(theirs, dim=dim)
    assert sorted(n for n, _ in mine.named_parameters()) == sorted(n for n, _ in theirs.named_parameters())
    np.testing.assert_allclose(mine.weight_g.detach().numpy(), theirs.weight_g.detach().numpy(), rtol=1e-12)
    for _ in range(2):  # the hook recomputes the weight from the updated g and v each call
        ym, yt = mine(xm), theirs(xt)
        np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
        (ym**2).sum().backward()
        (yt**2).sum().backward()
        _grads_close(mine, theirs, ["weight_g", "weight_v", "bias"])
        with munet.no_grad(), torch.no_grad():
            mine.weight_g.sub_(0.1 * mine.weight_g.grad)
            theirs.weight_g.sub_(0.1 * theirs.weight_g.grad)
    nn.utils.remove_weight_norm(mine)
    torch.nn.utils.remove_weight_norm(theirs)
    assert isinstance(mine.weight, nn.Parameter) and "weight_g" not in dict(mine.named_parameters())
    np.testing.assert_allclose(mine.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-10)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        nn.utils.remove_weight_norm(mine)


def test_weight_norm_twice_raises():
    layer = nn.Linear(3, 2)
    with pytest.warns(FutureWarning):
        nn.utils.weight_norm(layer)
        with pytest.raises(RuntimeError, match="two weight_norm hooks"):
            nn.utils.weight_norm(layer)


@pytest.mark.parametrize("kind", ["linear", "conv", "convt"])
def test_spectral_norm_hook_matches_torch(kind):
    mine, theirs, xm, xt = _pair(kind)
    nn.utils.spectral_norm(mine, n_power_iterations=2)
    torch.nn.utils.spectral_norm(theirs, n_power_iterations=2)
    with munet.no_grad():  # the starting vectors are random: take PyTorch's
        mine.weight_u.copy_(munet.tensor(theirs.weight_u.numpy()))
        mine.weight_v.copy_(munet.tensor(theirs.weight_v.numpy()))
    assert sorted(mine.state_dict()) == sorted(theirs.state_dict())
    for training in (True, True, False):
        mine.train(training)
        theirs.train(training)
        ym, yt = mine(xm), theirs(xt)
        np.testing.assert_allclose(ym.detach().numpy(), yt.detach().numpy(), rtol=1e-9, atol=1e-12)
        for buffer in ("weight_u", "weight_v"):
            np.testing.assert_allclose(
                getattr(mine, buffer).numpy(), getattr(theirs, buffer).numpy(), rtol=1e-9, atol=1e-12
            )
        (ym**2).sum().backward()
        (yt**2).sum().backward()
        _grads_close(mine, theirs, ["weight_orig", "bias"])
    nn.utils.remove_spectral_norm(mine)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert sorted(mine.state_dict()) == sorted(theirs.state_dict())
    np.testing.assert_allclose(mine.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-9)


def _bn_pair(cls_m, cls_t, n):
    rng = np.random.default_rng(2)
    tbn = cls_t(n).double().eval()
    mbn = cls_m(n).double().eval()
    state = {
        "weight": rng.normal(size=n),
        "bias": rng.normal(size=n),
        "running_mean": rng.normal(size=n),
        "running_var": rng.uniform(0.5, 2.0, size=n),
        "num_batches_tracked": np.array(3),
    }
    tbn.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    mbn.load_state_dict({k: munet.tensor(v) for k, v in state.items()})
    return mbn, tbn


@pytest.mark.parametrize("kind", ["conv", "convt", "linear"])
def test_fuse_bn_eval_matches_torch_and_the_unfused_pair(kind):
    mine, theirs, xm, xt = _pair(kind)
    mine.eval()
    theirs.eval()
    if kind == "linear":
        mbn, tbn = _bn_pair(nn.BatchNorm1d, torch.nn.BatchNorm1d, 3)
        fused_m, fused_t = nn.utils.fuse_linear_bn_eval(mine, mbn), torch.nn.utils.fuse_linear_bn_eval(theirs, tbn)
    else:
        channels = 3 if kind == "conv" else 2
        mbn, tbn = _bn_pair(nn.BatchNorm2d, torch.nn.BatchNorm2d, channels)
        transpose = kind == "convt"
        fused_m = nn.utils.fuse_conv_bn_eval(mine, mbn, transpose=transpose)
        fused_t = torch.nn.utils.fuse_conv_bn_eval(theirs, tbn, transpose=transpose)
    for name in ("weight", "bias"):
        assert isinstance(getattr(fused_m, name), nn.Parameter)
        np.testing.assert_allclose(
            getattr(fused_m, name).detach().numpy(), getattr(fused_t, name).detach().numpy(), rtol=1e-12, atol=1e-14
        )
    np.testing.assert_allclose(fused_m(xm).detach().numpy(), mbn(mine(xm)).detach().numpy(), rtol=1e-10, atol=1e-12)
    assert fused_m is not mine and mine.weight is not fused_m.weight


def test_fuse_refuses_training_mode():
    with pytest.raises(RuntimeError, match="eval"):
        nn.utils.fuse_conv_bn_eval(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2).eval())


def test_fuse_linear_bn_weights_without_bias():
    rng = np.random.default_rng(4)
    w, rm, rv, bw, bb = (
        rng.normal(size=(3, 4)),
        rng.normal(size=3),
        rng.uniform(1, 2, 3),
        rng.normal(size=3),
        rng.normal(size=3),
    )
    mine = nn.utils.fuse_linear_bn_weights(*(munet.tensor(a) for a in (w,)), None, *(munet.tensor(a) for a in (rm, rv)), 1e-5,
                                           munet.tensor(bw), munet.tensor(bb))  # fmt: skip
    theirs = torch.nn.utils.fuse_linear_bn_weights(torch.tensor(w), None, torch.tensor(rm), torch.tensor(rv), 1e-5,
                                                   torch.tensor(bw), torch.tensor(bb))  # fmt: skip
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)


def _params_with_grads(lib, grads):
    params = [lib.nn.Parameter(lib.zeros(*g.shape, dtype=lib.float64)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = lib.tensor(g)
    return params


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grads_with_norm_matches_torch(max_norm):
    rng = np.random.default_rng(5)
    grads = [rng.normal(size=(3, 2)), rng.normal(size=4)]
    pm, pt = _params_with_grads(munet, grads), _params_with_grads(torch, grads)
    total_m = nn.utils.get_total_norm([p.grad for p in pm], 3.0)
    total_t = torch.nn.utils.get_total_norm([p.grad for p in pt], 3.0)
    assert nn.utils.clip_grads_with_norm_(pm, max_norm, total_m) is None
    torch.nn.utils.clip_grads_with_norm_(pt, max_norm, total_t)
    for a, b in zip(pm, pt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_is_deprecated_and_accepts_a_generator():
    grads = [np.full((2,), 3.0), np.full((2,), 4.0)]
    pm = _params_with_grads(munet, grads)
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        total = nn.utils.clip_grad_norm((p for p in pm), 1.0)
    assert total.item() == pytest.approx(np.sqrt(50.0))
    np.testing.assert_allclose(pm[0].grad.numpy(), 3.0 / (np.sqrt(50.0) + 1e-6), rtol=1e-12)


def test_skip_init():
    layer = nn.utils.skip_init(nn.Linear, 4, 3, bias=False)
    assert isinstance(layer, nn.Linear) and tuple(layer.weight.shape) == (3, 4) and layer.bias is None
    with pytest.raises(RuntimeError, match="Expected a Module"):
        nn.utils.skip_init(int)

    class NoDevice(nn.Module):
        def __init__(self):
            super().__init__()

    with pytest.raises(RuntimeError, match="'device' arg"):
        nn.utils.skip_init(NoDevice)
