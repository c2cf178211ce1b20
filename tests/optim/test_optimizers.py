"""Every optimizer over 20 steps with identical gradients matches PyTorch within 1e-6."""

import numpy as np
import pytest

import munet
import munet.optim as optim
from tests.optim.against_torch import step_side_by_side

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.5, amsgrad=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.01, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, momentum_decay=0.01)),
    ("RAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
]


def _run(name, kwargs, steps=20, two_groups=False):
    rng = np.random.default_rng(0)
    shapes = [(4, 3), (3,), (2, 2, 2)]
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(steps)]
    return step_side_by_side(name, kwargs, init, grads, two_groups)


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_pytorch_over_20_steps(name, kwargs):
    m_params, t_params, _, _ = _run(name, kwargs)
    for mp, tp in zip(m_params, t_params):
        np.testing.assert_allclose(mp.detach().numpy(), tp.detach().numpy(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop"])
def test_param_groups_with_own_options(name):
    kwargs = dict(lr=0.05, momentum=0.9) if name == "SGD" else dict(lr=0.05)
    m_params, t_params, m_opt, _ = _run(name, kwargs, steps=5, two_groups=True)
    for mp, tp in zip(m_params, t_params):
        np.testing.assert_allclose(mp.detach().numpy(), tp.detach().numpy(), rtol=0, atol=1e-6)
    assert m_opt.param_groups[0]["lr"] == 0.025 and m_opt.param_groups[1]["lr"] == 0.05


def test_state_dict_layout_matches_pytorch_and_resumes():
    m_params, t_params, m_opt, t_opt = _run("Adam", dict(lr=0.01, amsgrad=True), steps=3)
    m_sd, t_sd = m_opt.state_dict(), t_opt.state_dict()
    assert list(m_sd["state"]) == list(t_sd["state"]) == [0, 1, 2]
    assert set(m_sd["state"][0]) == set(t_sd["state"][0])
    assert m_sd["param_groups"][0]["params"] == t_sd["param_groups"][0]["params"]
    assert m_sd["state"][0]["step"].item() == 3
    copies = [munet.tensor(p.detach().numpy(), requires_grad=True) for p in m_params]
    resumed = optim.Adam(copies, lr=0.5)
    resumed.load_state_dict(m_sd)
    assert resumed.param_groups[0]["lr"] == 0.01 and resumed.param_groups[0]["amsgrad"]
    for opt, params in ((m_opt, m_params), (resumed, copies)):
        for p in params:
            p.grad = munet.ones_like(p)
        opt.step()
    for a, b in zip(m_params, copies):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_load_state_dict_checks_hyperparameter_kinds_first():
    _, _, m_opt, t_opt = _run("Adam", dict(lr=0.01), steps=1)
    t_sd = t_opt.state_dict()
    state = {i: {k: munet.tensor(v.numpy()) for k, v in s.items()} for i, s in t_sd["state"].items()}
    m_opt.load_state_dict({"state": state, "param_groups": t_sd["param_groups"]})  # PyTorch's kinds fit
    groups = m_opt.state_dict()["param_groups"]
    for key, value, message in (
        ("lr", "fast", "expected a number, got a str"),
        ("betas", [0.9], "expected a list of 2, got a list of 1"),
    ):
        with pytest.raises(ValueError, match=f"parameter group 0 '{key}': {message}"):
            m_opt.load_state_dict({"state": {}, "param_groups": [dict(groups[0], **{key: value})]})
        assert m_opt.param_groups[0][key] == groups[0][key] and m_opt.state


def test_errors_and_zero_grad_and_add_param_group():
    p = munet.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.Adam(p)
    opt = optim.SGD([p], lr=0.1)
    q = munet.ones(3, requires_grad=True)
    opt.add_param_group({"params": [q], "lr": 0.5})
    assert opt.param_groups[1]["momentum"] == 0 and opt.param_groups[1]["lr"] == 0.5
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})
    (p.sum() + q.sum()).backward()
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None
    with pytest.raises(ValueError, match="parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})


def test_closure_and_hooks():
    p = munet.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 5.0 and calls == ["pre", "post"]
    np.testing.assert_allclose(p.detach().numpy(), [0.8, 1.6], rtol=1e-6)
