"""Adadelta, ASGD and Rprop match PyTorch over 20 steps, and compile to the eager step."""

import numpy as np
import pytest
import torch

import munet
import munet.nn.functional as F
import munet.optim as optim
from munet import nn
from tests.optim.against_torch import step_side_by_side

CASES = [
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=5, weight_decay=0.1)),  # averaging from step 6
    ("ASGD", dict(lr=0.05, t0=0, maximize=True)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
]


def _run(name, kwargs, steps=20):
    rng = np.random.default_rng(0)
    shapes = [(4, 3), (3,), (2, 2, 2), (1,)]
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    # a gradient that often keeps its sign (Rprop's growth) and sometimes flips (its shrinking)
    grads = [[(rng.standard_normal(s) + 0.5).astype(np.float32) for s in shapes] for _ in range(steps)]
    return step_side_by_side(name, kwargs, init, grads)


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_pytorch_over_20_steps(name, kwargs):
    m_params, t_params, m_opt, t_opt = _run(name, kwargs)
    for mp, tp in zip(m_params, t_params):
        np.testing.assert_allclose(mp.detach().numpy(), tp.detach().numpy(), rtol=0, atol=1e-6)
    m_sd, t_sd = m_opt.state_dict(), t_opt.state_dict()
    assert set(m_sd["param_groups"][0]) == set(t_sd["param_groups"][0])
    for i, t_state in t_sd["state"].items():
        assert set(m_sd["state"][i]) == set(t_state)
        for key, value in t_state.items():
            got = m_sd["state"][i][key]
            assert got.dtype.name == str(value.dtype).removeprefix("torch."), key
            np.testing.assert_allclose(got.numpy(), value.numpy(), rtol=1e-6, atol=1e-7, err_msg=key)


def test_a_state_dict_from_pytorch_resumes():
    _, t_params, _, t_opt = _run("ASGD", dict(lr=0.05, t0=3), steps=5)
    sd = t_opt.state_dict()
    state = {i: {k: munet.tensor(v.numpy()) for k, v in s.items()} for i, s in sd["state"].items()}
    params = [munet.tensor(p.detach().numpy(), requires_grad=True) for p in t_params]
    opt = optim.ASGD(params, lr=0.05, t0=3)
    opt.load_state_dict({"state": state, "param_groups": sd["param_groups"]})
    for mp, tp in zip(params, t_params):
        mp.grad = munet.ones_like(mp)
        tp.grad = torch.ones_like(tp)
    opt.step()
    t_opt.step()
    for mp, tp in zip(params, t_params):
        np.testing.assert_allclose(mp.detach().numpy(), tp.detach().numpy(), rtol=0, atol=1e-6)


def test_invalid_hyperparameters_raise_as_pytorch():
    p = [munet.ones(2, requires_grad=True)]
    with pytest.raises(ValueError, match="Invalid rho value"):
        optim.Adadelta(p, rho=1.5)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.ASGD(p, lr=-1)
    with pytest.raises(ValueError, match="Invalid eta values"):
        optim.Rprop(p, etas=(1.5, 1.2))


MAKERS = {
    "adadelta": lambda ps: optim.Adadelta(ps, lr=1.0, weight_decay=1e-3),
    "asgd": lambda ps: optim.ASGD(ps, lr=0.05, t0=3),
    "rprop": lambda ps: optim.Rprop(ps, lr=0.01),
}


def _mlp():
    munet.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 5))


def _plain_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_compiled_step_matches_eager_without_retracing(name):
    munet.manual_seed(1)
    x, y = munet.randn(16, 12), munet.randint(0, 5, (16,))
    m1, m2 = _mlp(), _mlp()
    o1, o2 = MAKERS[name](m1.parameters()), MAKERS[name](m2.parameters())
    s1, s2 = (optim.lr_scheduler.StepLR(o, 1, gamma=0.7) for o in (o1, o2))
    compiled = munet.compile(_plain_step)
    for _ in range(7):
        assert compiled(m2, o2, x, y).item() == pytest.approx(_plain_step(m1, o1, x, y).item(), rel=1e-5)
        s1.step()
        s2.step()
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p2.detach().numpy(), p1.detach().numpy(), rtol=1e-5, atol=1e-7)
        for key, value in o1.state[p1].items():
            np.testing.assert_allclose(o2.state[p2][key].numpy(), value.numpy(), rtol=1e-5, atol=1e-7, err_msg=key)
    if name != "rprop":  # Rprop reads lr only when it creates its state
        assert compiled.stats()["traces"] == 2  # the state-creating step and the steady one
