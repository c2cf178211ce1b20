"""Every scheduler's lr sequence (and momentum, where it cycles) equals PyTorch's."""

import math

import pytest
import torch

import munet
import munet.optim as optim
from munet.optim import lr_scheduler as mls

S = torch.optim.lr_scheduler


def _opts(kind="SGD", groups=2):
    mp = [munet.zeros(1, requires_grad=True) for _ in range(groups)]
    tp = [torch.zeros(1, requires_grad=True) for _ in range(groups)]
    if kind == "SGD":
        m = optim.SGD([{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(mp)], lr=0.1, momentum=0.9)
        t = torch.optim.SGD([{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(tp)], lr=0.1, momentum=0.9)
    else:
        m = optim.Adam([{"params": [p]} for p in mp], lr=0.01)
        t = torch.optim.Adam([{"params": [p]} for p in tp], lr=0.01)
    return m, t


CASES = [
    ("StepLR", dict(step_size=3, gamma=0.5), "SGD"),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3), "SGD"),
    ("ExponentialLR", dict(gamma=0.9), "SGD"),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001), "SGD"),
    ("CosineAnnealingWarmRestarts", dict(T_0=4, T_mult=2, eta_min=0.01), "SGD"),
    ("LambdaLR", dict(lr_lambda=lambda e: 0.95**e), "SGD"),
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.9), "SGD"),
    ("LinearLR", dict(start_factor=0.25, end_factor=0.9, total_iters=6), "SGD"),
    ("ConstantLR", dict(factor=0.5, total_iters=4), "SGD"),
    ("PolynomialLR", dict(total_iters=8, power=2.0), "SGD"),
    ("OneCycleLR", dict(max_lr=[0.5, 1.0], total_steps=31), "SGD"),
    ("OneCycleLR", dict(max_lr=0.05, total_steps=31, three_phase=True, anneal_strategy="linear"), "Adam"),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=4, mode="triangular2"), "SGD"),
    (
        "CyclicLR",
        dict(base_lr=0.001, max_lr=0.01, step_size_up=3, step_size_down=5, mode="exp_range", gamma=0.95),
        "Adam",
    ),
]


def _trace(opt, sched, steps=30):
    out = []
    for _ in range(steps):
        opt.step()
        sched.step()
        groups = opt.param_groups
        out.append(
            (
                [g["lr"] for g in groups],
                [g.get("momentum", g.get("betas", (None,))[0]) for g in groups],
                sched.get_last_lr(),
            )
        )
    return out


@pytest.mark.parametrize("name,kwargs,kind", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_lr_sequence_matches_pytorch(name, kwargs, kind):
    m_opt, t_opt = _opts(kind)
    m_sched = getattr(mls, name)(m_opt, **kwargs)
    t_sched = getattr(S, name)(t_opt, **kwargs)
    assert m_sched.get_last_lr() == pytest.approx(t_sched.get_last_lr(), rel=1e-12)
    for (m_lr, m_mom, m_last), (t_lr, t_mom, t_last) in zip(_trace(m_opt, m_sched), _trace(t_opt, t_sched)):
        assert m_lr == pytest.approx(t_lr, rel=1e-12, abs=1e-15)
        assert m_mom == pytest.approx(t_mom, rel=1e-12)
        assert m_last == pytest.approx(t_last, rel=1e-12, abs=1e-15)


def test_sequential_and_chained_match_pytorch():
    m_opt, t_opt = _opts()
    m = mls.SequentialLR(
        m_opt, [mls.LinearLR(m_opt, 0.1, total_iters=4), mls.ExponentialLR(m_opt, 0.9)], milestones=[4]
    )
    t = S.SequentialLR(t_opt, [S.LinearLR(t_opt, 0.1, total_iters=4), S.ExponentialLR(t_opt, 0.9)], milestones=[4])
    for a, b in zip(_trace(m_opt, m, 15), _trace(t_opt, t, 15)):
        assert a[0] == pytest.approx(b[0], rel=1e-12) and a[2] == pytest.approx(b[2], rel=1e-12)
    m_opt, t_opt = _opts()
    m = mls.ChainedScheduler([mls.ConstantLR(m_opt, 0.5, total_iters=3), mls.ExponentialLR(m_opt, 0.9)])
    t = S.ChainedScheduler([S.ConstantLR(t_opt, 0.5, total_iters=3), S.ExponentialLR(t_opt, 0.9)])
    for a, b in zip(_trace(m_opt, m, 10), _trace(t_opt, t, 10)):
        assert a[0] == pytest.approx(b[0], rel=1e-12)


def test_reduce_lr_on_plateau_matches_pytorch():
    metrics = [1.0, 0.9, 0.9, 0.91, 0.95, 0.9, 0.89, 0.9, 0.9, 0.9, 0.9, 0.9, 0.5, 0.5, 0.5, 0.5]
    for kwargs in (
        dict(patience=2, factor=0.5),
        dict(mode="max", patience=1, cooldown=2, threshold_mode="abs", min_lr=0.02),
    ):
        m_opt, t_opt = _opts()
        m = mls.ReduceLROnPlateau(m_opt, **kwargs)
        t = S.ReduceLROnPlateau(t_opt, **kwargs)
        for value in metrics:
            m.step(value)
            t.step(value)
            assert [g["lr"] for g in m_opt.param_groups] == pytest.approx([g["lr"] for g in t_opt.param_groups])
            assert m.get_last_lr() == pytest.approx(t.get_last_lr())


def test_state_dict_resume_gives_same_sequence():
    m_opt, _ = _opts()
    sched = mls.CosineAnnealingWarmRestarts(m_opt, T_0=3, T_mult=2)
    for _ in range(5):
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state
    expected = []
    for _ in range(6):
        sched.step()
        expected.append(sched.get_last_lr())
    m_opt2, _ = _opts()
    for g, g_old in zip(m_opt2.param_groups, m_opt.param_groups):
        g["initial_lr"] = g_old["initial_lr"]
    resumed = mls.CosineAnnealingWarmRestarts(m_opt2, T_0=3, T_mult=2, last_epoch=0)
    resumed.load_state_dict(state)
    got = []
    for _ in range(6):
        resumed.step()
        got.append(resumed.get_last_lr())
    assert all(math.isclose(a, b) for x, y in zip(got, expected) for a, b in zip(x, y))


def _sequential(opt):
    return mls.SequentialLR(opt, [mls.ConstantLR(opt, 0.5, total_iters=2), mls.ExponentialLR(opt, 0.9)], [2])


@pytest.mark.parametrize("name, kwargs, kind", [*CASES, ("SequentialLR", {}, "SGD"), ("ReduceLROnPlateau", {}, "SGD")])
def test_check_state_dict_accepts_a_saved_state_and_names_what_does_not_fit(tmp_path, name, kwargs, kind):
    def make():
        opt = _opts(kind)[0]
        return opt, _sequential(opt) if name == "SequentialLR" else getattr(mls, name)(opt, **kwargs)

    opt, sched = make()
    for _ in range(5):
        opt.step()
        sched.step(1.0) if name == "ReduceLROnPlateau" else sched.step()
    munet.save(sched.state_dict(), tmp_path / "s")
    saved = munet.load(tmp_path / "s")  # through a file: Counters become dicts, tuples lists
    _, fresh = make()
    fresh.check_state_dict(saved)
    with pytest.raises(
        ValueError, match=rf"{name} state_dict: missing key\(s\) \['last_epoch'\], unexpected key\(s\) \['x'\]"
    ):
        fresh.check_state_dict({**{k: v for k, v in saved.items() if k != "last_epoch"}, "x": 1})
    with pytest.raises(ValueError, match=rf"{name} state_dict\['last_epoch'\]: expected a number, got a str"):
        fresh.check_state_dict({**saved, "last_epoch": "5"})
    with pytest.raises(ValueError, match=rf"{name} state_dict\['_last_lr'\]: expected a list of 2, got a list of 1"):
        fresh.check_state_dict({**saved, "_last_lr": [0.1]})


def test_check_state_dict_of_a_sequence_names_the_inner_scheduler():
    opt = _opts()[0]
    sched = _sequential(opt)
    state = sched.state_dict()
    del state["_schedulers"][1]["gamma"]
    with pytest.raises(
        ValueError, match=r"SequentialLR state_dict\['_schedulers'\]\[1\]: ExponentialLR state_dict: missing"
    ):
        sched.check_state_dict(state)


def test_errors():
    m_opt, _ = _opts()
    with pytest.raises(TypeError, match="not an Optimizer"):
        mls.StepLR(object(), 3)
    with pytest.raises(ValueError, match="total_steps"):
        mls.OneCycleLR(m_opt, max_lr=0.1)
    sched = mls.OneCycleLR(m_opt, max_lr=0.1, total_steps=2)
    sched.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        sched.step()
