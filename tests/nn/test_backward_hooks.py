"""Module.register_full_backward_hook / register_full_backward_pre_hook against PyTorch."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close

rng = np.random.default_rng(3)


class Mix:
    """A module with two tensor inputs, a non-tensor input and two outputs."""

    @staticmethod
    def build(mod):
        class MixModule(mod.nn.Module):
            def __init__(self):
                super().__init__()
                mod.manual_seed(0)
                self.lin = mod.nn.Linear(3, 3)

            def forward(self, x, scale, y):
                h = self.lin(x) * scale
                return h * y, h.sum(-1)

        return MixModule()


def setup_pair():
    mm, tm = Mix.build(munet), Mix.build(torch)
    tm.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in mm.state_dict().items()})
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    xm, ym = munet.tensor(a, requires_grad=True), munet.tensor(b, requires_grad=True)
    xt, yt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    return (mm, xm, ym), (tm, xt, yt)


def run(module, x, y, log):
    out, s = module(x, 2.0, y)
    (out.sum() * 3 + (s**2).sum()).backward()
    return log


def record(log):
    def hook(module, grad_input, grad_output):
        log.append(("full", grad_input, grad_output))

    def pre_hook(module, grad_output):
        log.append(("pre", grad_output))

    return hook, pre_hook


def test_hooks_see_the_same_gradients_as_torch():
    (mm, xm, ym), (tm, xt, yt) = setup_pair()
    logs = []
    for module in (mm, tm):
        log = []
        hook, pre_hook = record(log)
        module.register_full_backward_hook(hook)
        module.register_full_backward_pre_hook(pre_hook)
        logs.append(log)
    run(mm, xm, ym, None)
    run(tm, xt, yt, None)
    lm, lt = logs
    assert [e[0] for e in lm] == [e[0] for e in lt] == ["pre", "full"]
    assert_close(lm[0][1], lt[0][1])
    assert len(lm[1][1]) == len(lt[1][1]) == 3 and lm[1][1][1] is None  # one per positional input
    assert_close(lm[1][1], lt[1][1])
    assert_close(lm[1][2], lt[1][2])
    assert_close(xm.grad, xt.grad)


def test_returned_tuples_replace_gradients():
    (mm, xm, ym), (tm, xt, yt) = setup_pair()
    for module in (mm, tm):
        module.register_full_backward_pre_hook(lambda m, go: (go[0] * 2, go[1]))
        module.register_full_backward_hook(lambda m, gi, go: (gi[0] * -1, None, gi[2] + 1))
    run(mm, xm, ym, None)
    run(tm, xt, yt, None)
    assert_close(xm.grad, xt.grad)
    assert_close(ym.grad, yt.grad)
    assert_close(mm.lin.weight.grad, tm.lin.weight.grad)


def test_handles_remove_hooks_and_wrong_lengths_raise():
    (mm, xm, ym), _ = setup_pair()
    calls = []
    handle = mm.register_full_backward_hook(lambda m, gi, go: calls.append(1))
    run(mm, xm, ym, None)
    handle.remove()
    run(mm, xm, ym, None)
    assert calls == [1]
    mm.register_full_backward_hook(lambda m, gi, go: (gi[0],))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 1, but expected 3"):
        run(mm, xm, ym, None)


def test_inputs_without_grad_get_none_like_torch():
    seen = []
    for mod in (munet, torch):
        lin = mod.nn.Linear(2, 2)
        log = []
        lin.register_full_backward_hook(lambda m, gi, go, log=log: log.append((gi, go[0].shape)))
        lin(mod.ones(1, 2)).sum().backward()
        seen.append(log)
    assert seen[0][0][0] == seen[1][0][0] == (None,)
    assert tuple(seen[0][0][1]) == tuple(seen[1][0][1])


def test_nested_module_hooks_fire_inner_last():
    order = []
    model = munet.nn.Sequential(munet.nn.Linear(2, 2), munet.nn.Tanh())
    model.register_full_backward_hook(lambda m, gi, go: order.append("outer"))
    model[0].register_full_backward_hook(lambda m, gi, go: order.append("linear"))
    model[1].register_full_backward_hook(lambda m, gi, go: order.append("tanh"))
    model(munet.ones(1, 2, requires_grad=True)).sum().backward()
    assert order == ["tanh", "linear", "outer"]
