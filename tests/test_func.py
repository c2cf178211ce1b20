"""munet.func against torch.func: grad, grad_and_value, vjp, jacrev, jacfwd, hessian, functional_call."""

import numpy as np
import pytest
import torch
import torch.func as tfunc

import munet
import munet.func as mfunc
from tests.reference import assert_close

rng = np.random.default_rng(2)


def pair(*shape):
    a = rng.standard_normal(shape).astype(np.float32)
    return munet.tensor(a), torch.tensor(a)


def loss(mod):
    return lambda x, y: (mod.tanh(x) * y).sum() + (x**2).sum()


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1,)])
def test_grad_and_value_match_torch(argnums):
    (xm, xt), (ym, yt) = pair(3, 2), pair(3, 2)
    assert_close(mfunc.grad(loss(munet), argnums)(xm, ym), tfunc.grad(loss(torch), argnums)(xt, yt))
    gm, vm = mfunc.grad_and_value(loss(munet), argnums)(xm, ym)
    gt, vt = tfunc.grad_and_value(loss(torch), argnums)(xt, yt)
    assert_close(gm, gt)
    assert_close(vm, vt)
    assert not vm.requires_grad and not (gm[0] if isinstance(gm, tuple) else gm).requires_grad


def test_grad_has_aux_and_pytree_arguments():
    (am, at), (bm, bt) = pair(4), pair(4)

    def f(mod):
        return lambda p: ((p["a"] * p["b"][0]).sum(), {"aux": p["a"] * 2})

    gm, aux_m = mfunc.grad(f(munet), has_aux=True)({"a": am, "b": [bm]})
    gt, aux_t = tfunc.grad(f(torch), has_aux=True)({"a": at, "b": [bt]})
    assert set(gm) == {"a", "b"} and isinstance(gm["b"], list)
    assert_close(gm["a"], gt["a"])
    assert_close(gm["b"][0], gt["b"][0])
    assert_close(aux_m["aux"], aux_t["aux"])


def test_nested_grad_matches_torch():
    f = lambda x: (x**3).sin().sum()  # noqa: E731
    xm, xt = pair(3)
    assert_close(mfunc.grad(lambda x: mfunc.grad(f)(x).sum())(xm), tfunc.grad(lambda x: tfunc.grad(f)(x).sum())(xt))


def test_grad_composes_with_backward_through_closed_over_tensors():
    (wm, wt), (xm, xt) = pair(3), pair(3)
    wm.requires_grad_()
    wt.requires_grad_()
    gm = mfunc.grad(lambda x: (wm * x**2).sum())(xm)
    gt = tfunc.grad(lambda x: (wt * x**2).sum())(xt)
    assert gm.requires_grad and gt.requires_grad
    gm.sum().backward()
    gt.sum().backward()
    assert_close(wm.grad, wt.grad)


def test_grad_errors():
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims"):
        mfunc.grad(lambda x: x * 2)(munet.ones(2))
    with pytest.raises(RuntimeError, match="output of function f should be a tuple"):
        mfunc.grad(lambda x: x.sum(), has_aux=True)(munet.ones(2))
    with pytest.raises(RuntimeError, match="only 1 positional inputs"):
        mfunc.grad(lambda x: x.sum(), argnums=1)(munet.ones(2))


def test_unused_argument_gets_zeros_like_torch():
    (xm, xt), (ym, yt) = pair(2), pair(3)
    assert_close(mfunc.grad(lambda x, y: x.sum(), (0, 1))(xm, ym), tfunc.grad(lambda x, y: x.sum(), (0, 1))(xt, yt))


def test_vjp_matches_torch():
    (xm, xt), (ym, yt) = pair(3), pair(3)
    f = lambda x, y: (x * y, x.exp())  # noqa: E731
    out_m, fn_m = mfunc.vjp(f, xm, ym)
    out_t, fn_t = tfunc.vjp(f, xt, yt)
    assert_close(out_m, out_t)
    (cm1, ct1), (cm2, ct2) = pair(3), pair(3)
    res_m, res_t = fn_m((cm1, cm2)), fn_t((ct1, ct2))
    assert isinstance(res_m, tuple) and len(res_m) == 2
    assert_close(res_m, res_t)
    assert_close(fn_m((cm2, cm1)), fn_t((ct2, ct1)))  # the vjp_fn may be called again
    with pytest.raises(RuntimeError, match="pytree structure"):
        fn_m(cm1)


def test_jvp_matches_torch():
    (xm, xt), (ym, yt) = pair(3), pair(3)
    (um, ut), (vm, vt) = pair(3), pair(3)
    f = lambda x, y: (x * y.sin(), (x**2).sum())  # noqa: E731
    out_m, tan_m = mfunc.jvp(f, (xm, ym), (um, vm))
    out_t, tan_t = tfunc.jvp(f, (xt, yt), (ut, vt))
    assert_close(out_m, out_t)
    assert_close(tan_m, tan_t)
    assert not tan_m[0].requires_grad
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        mfunc.jvp(f, xm, (um,))


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_jacobians_match_torch(transform, argnums):
    (xm, xt), (ym, yt) = pair(3), pair(2, 3)
    f = lambda x, y: (x.sin() * y, (x * y).sum(0))  # noqa: E731
    assert_close(getattr(mfunc, transform)(f, argnums)(xm, ym), getattr(tfunc, transform)(f, argnums)(xt, yt))


def test_hessian_matches_torch():
    xm, xt = pair(4)
    f = lambda x: (x**3).sum() + x.prod()  # noqa: E731
    assert_close(mfunc.hessian(f)(xm), tfunc.hessian(f)(xt))


def make_model(mod):
    mod.manual_seed(0)
    model = mod.nn.Sequential(mod.nn.Linear(3, 4), mod.nn.BatchNorm1d(4), mod.nn.Linear(4, 2))
    return model


def copy_state(m_model, t_model):
    t_model.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in m_model.state_dict().items()})


def test_functional_call_matches_torch_and_restores():
    mm, tm = make_model(munet), make_model(torch)
    copy_state(mm, tm)
    xm, xt = pair(5, 3)
    new = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32) for k, v in mm.named_parameters()}
    pm = {k: munet.tensor(v, requires_grad=True) for k, v in new.items()}
    pt = {k: torch.tensor(v, requires_grad=True) for k, v in new.items()}
    bufs_m = {"1.running_mean": munet.zeros(4)}
    bufs_t = {"1.running_mean": torch.zeros(4)}
    out_m = mfunc.functional_call(mm, (pm, bufs_m), (xm,))
    out_t = tfunc.functional_call(tm, (pt, bufs_t), (xt,))
    assert_close(out_m, out_t)
    assert_close(bufs_m["1.running_mean"], bufs_t["1.running_mean"])  # the swapped-in buffer was updated
    out_m.sum().backward()
    out_t.sum().backward()
    for k in pm:
        assert_close(pm[k].grad, pt[k].grad)
    assert mm[0].weight.grad is None
    assert_close(mm(xm), tm(xt))  # the module's own parameters are back


def test_functional_call_restores_on_exception_and_checks_keys():
    model = munet.nn.Linear(2, 2)
    weight = model.weight

    def boom(module, args):
        raise ValueError("boom")

    handle = model.register_forward_pre_hook(boom)
    with pytest.raises(ValueError, match="boom"):
        munet.nn.utils.stateless.functional_call(model, {"weight": munet.zeros(2, 2)}, munet.ones(2))
    handle.remove()
    assert model.weight is weight
    with pytest.raises(RuntimeError, match="Unexpected key\\(s\\): 'nope'.\n\tMissing key\\(s\\): 'bias'."):
        munet.func.functional_call(
            model, {"weight": munet.zeros(2, 2), "nope": munet.ones(1)}, munet.ones(2), strict=True
        )
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        munet.func.functional_call(model, ({"weight": weight}, {"weight": weight}), munet.ones(2))


def test_functional_call_tie_weights():
    def tied(mod):
        model = mod.nn.Sequential(mod.nn.Linear(2, 2, bias=False), mod.nn.Linear(2, 2, bias=False))
        model[1].weight = model[0].weight
        return model

    mm, tm = tied(munet), tied(torch)
    w = rng.standard_normal((2, 2)).astype(np.float32)
    xm, xt = pair(2)
    copy_state(mm, tm)
    for tie in (True, False):
        assert_close(
            mfunc.functional_call(mm, {"0.weight": munet.tensor(w)}, xm, tie_weights=tie),
            tfunc.functional_call(tm, {"0.weight": torch.tensor(w)}, xt, tie_weights=tie),
        )
    with pytest.raises(ValueError, match="which are tied"):
        mfunc.functional_call(mm, {"0.weight": munet.tensor(w), "1.weight": munet.ones(2, 2)}, xm)


def test_grad_over_functional_call_params():
    mm, tm = make_model(munet), make_model(torch)
    mm.eval()
    tm.eval()
    copy_state(mm, tm)
    xm, xt = pair(5, 3)
    gm = mfunc.grad(lambda p: mfunc.functional_call(mm, p, (xm,)).sum())(dict(mm.named_parameters()))
    gt = tfunc.grad(lambda p: tfunc.functional_call(tm, p, (xt,)).sum())(dict(tm.named_parameters()))
    for k in gt:
        assert_close(gm[k], gt[k])
