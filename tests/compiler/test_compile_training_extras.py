"""Training-loop extras inside munet.compile: clip_grad_norm_, EMA (AveragedModel) and GradScaler
give the same results as the eager step."""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn

RTOL = 1e-5


def _assert_close(a, b, name):
    np.testing.assert_allclose(
        b.numpy().astype(np.float64), a.numpy().astype(np.float64), rtol=RTOL, atol=1e-7, err_msg=name
    )


def _assert_same_state(m1, m2):
    for (name, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items()):
        _assert_close(a, b, name)


def _mlp():
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 5))
    return model, munet.optim.AdamW(model.parameters(), lr=3e-2, weight_decay=0.05)


def _data():
    munet.manual_seed(1)
    return munet.randn(16, 12), munet.randint(0, 5, (16,))


@pytest.mark.parametrize("max_norm", [0.05, 100.0])  # clipping, and a norm below max_norm
def test_clip_grad_norm_matches_eager(max_norm):
    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        return loss, norm

    x, y = _data()
    (m1, o1), (m2, o2) = _mlp(), _mlp()
    compiled = munet.compile(step)
    for _ in range(4):
        eager_loss, eager_norm = step(m1, o1, x, y)
        loss, norm = compiled(m2, o2, x, y)
        assert loss.item() == pytest.approx(eager_loss.item(), rel=RTOL)
        assert norm.item() == pytest.approx(eager_norm.item(), rel=RTOL)
    assert (eager_norm.item() > max_norm) == (max_norm < 1)
    _assert_same_state(m1, m2)
    assert compiled.stats()["traces"] == 2


@pytest.mark.parametrize(
    "avg",
    [
        {"multi_avg_fn": munet.optim.swa_utils.get_ema_multi_avg_fn(0.9)},
        {"avg_fn": munet.optim.swa_utils.get_ema_avg_fn(0.8)},
        {},  # SWA: weight 1 / (n_averaged + 1)
    ],
    ids=["ema_multi", "ema_single", "swa"],
)
def test_averaged_model_update_matches_eager(avg):
    def step(model, opt, ema, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        ema.update_parameters(model)
        return loss

    x, y = _data()
    (m1, o1), (m2, o2) = _mlp(), _mlp()
    e1, e2 = munet.optim.swa_utils.AveragedModel(m1, **avg), munet.optim.swa_utils.AveragedModel(m2, **avg)
    compiled = munet.compile(step)
    for _ in range(4):
        eager_loss = step(m1, o1, e1, x, y)
        assert compiled(m2, o2, e2, x, y).item() == pytest.approx(eager_loss.item(), rel=RTOL)
    _assert_same_state(m1, m2)
    _assert_same_state(e1, e2)
    assert e1.n_averaged.item() == e2.n_averaged.item() == 4
    # the average is not a copy of the model
    assert not np.allclose(e2.module[0].weight.detach().numpy(), m2[0].weight.detach().numpy())
    assert compiled.stats()["traces"] == 2


def _scaled_step(model, opt, scaler, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss


def _scaled_clipped_step(model, opt, scaler, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(model.parameters(), 0.05)
    scaler.step(opt)
    scaler.update()
    return loss


@pytest.mark.parametrize("make_opt", ["adamw", "sgd", "adamw_clip"])
def test_grad_scaler_matches_eager_including_skipped_steps(make_opt):
    # also the regression test of fuse.py's cycle check: the step-count restore `where` used to join
    # the step increment's group although found_inf depends on it through the loss-gradient/bias-update
    # reduction group, which reaches back past that group's first member
    x, y = _data()
    bad = x.clone()
    bad[3, 2] = float("inf")  # nan loss and gradients: the step is skipped and the scale backs off
    batches = [bad, x, x, x, bad, x, x]  # the first step, which creates the optimizer state, is skipped

    def make():
        model, opt = _mlp()
        if make_opt == "sgd":
            opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        return model, opt, munet.amp.GradScaler(init_scale=2.0**16, growth_interval=2)

    step = _scaled_clipped_step if make_opt == "adamw_clip" else _scaled_step
    (m1, o1, s1), (m2, o2, s2) = make(), make()
    compiled = munet.compile(step)
    scales = []
    for batch in batches:
        eager_loss = step(m1, o1, s1, batch, y).item()
        loss = compiled(m2, o2, s2, batch, y).item()
        assert loss == pytest.approx(eager_loss, rel=RTOL, nan_ok=True)
        assert s2.get_scale() == s1.get_scale()
        scales.append(s1.get_scale())
        _assert_same_state(m1, m2)
    # skip + back off, grow after 2 clean steps, one more clean, skip, 2 clean -> grow
    assert scales == [2.0**15, 2.0**15, 2.0**16, 2.0**16, 2.0**15, 2.0**15, 2.0**16]
    assert s2.state_dict() == s1.state_dict()
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        for key, value in o1.state[p1].items():
            _assert_close(value, o2.state[p2][key], key)
    # the first step (no grads, no state: skipped, so its state is dropped), the first step again with
    # the gradients now existing, and the steady step
    assert compiled.stats()["traces"] == 3


OPTIMIZERS = {
    "adagrad": lambda ps: munet.optim.Adagrad(
        ps, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1
    ),  # state at init
    "adamax": lambda ps: munet.optim.Adamax(ps, lr=0.01),
    "sgd_dampening": lambda ps: munet.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5),  # buffer starts as grad
    "sgd_nesterov": lambda ps: munet.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adam": lambda ps: munet.optim.Adam(ps, lr=0.01, amsgrad=True),
    "adamw": lambda ps: munet.optim.AdamW(ps, lr=0.01),
}


def _plain_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


STEP_COUNT_OPTIMIZERS = {  # their updates depend on the step count, which eager reads on the host
    "adamax": lambda ps: munet.optim.Adamax(ps, lr=0.01, weight_decay=1e-3),
    "adagrad": lambda ps: munet.optim.Adagrad(ps, lr=0.1, lr_decay=0.01),
    "nadam": lambda ps: munet.optim.NAdam(ps, lr=0.01, momentum_decay=4e-3),
    "radam": lambda ps: munet.optim.RAdam(ps, lr=0.01),  # rectified from the 6th step on
}


@pytest.mark.parametrize("name", sorted(STEP_COUNT_OPTIMIZERS))
def test_optimizers_using_the_step_count_compile_and_match_eager(name):
    x, y = _data()
    (m1, o1), (m2, o2) = ((m, STEP_COUNT_OPTIMIZERS[name](m.parameters())) for m, _ in (_mlp(), _mlp()))
    compiled = munet.compile(_plain_step)
    for _ in range(8):
        assert compiled(m2, o2, x, y).item() == pytest.approx(_plain_step(m1, o1, x, y).item(), rel=RTOL)
    _assert_same_state(m1, m2)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        for key, value in o1.state[p1].items():
            _assert_close(value, o2.state[p2][key], key)
    assert compiled.stats()["traces"] <= 2  # the step count is state: no retrace per step


@pytest.mark.parametrize("name", sorted(STEP_COUNT_OPTIMIZERS) + ["rmsprop"])
def test_a_scheduled_learning_rate_is_an_input_for_every_optimizer(name):
    # the scheduler changes lr every step: it is read at each call, so nothing retraces
    make = STEP_COUNT_OPTIMIZERS.get(name) or (lambda ps: munet.optim.RMSprop(ps, lr=0.01, momentum=0.5))
    x, y = _data()
    (m1, o1), (m2, o2) = ((m, make(m.parameters())) for m, _ in (_mlp(), _mlp()))
    s1, s2 = (munet.optim.lr_scheduler.StepLR(o, 1, gamma=0.7) for o in (o1, o2))
    compiled = munet.compile(_plain_step)
    for _ in range(6):
        assert compiled(m2, o2, x, y).item() == pytest.approx(_plain_step(m1, o1, x, y).item(), rel=RTOL)
        s1.step()
        s2.step()
    _assert_same_state(m1, m2)
    assert compiled.stats()["traces"] == 2  # the first (state-creating) step and the steady one


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_skipped_first_step_leaves_no_state_for_any_optimizer(name):
    # the first step creates the optimizer state; when the scaler skips it, the compiled call drops
    # that state as eager never made it, and the next step starts from fresh state
    x, y = _data()
    bad = x.clone()
    bad[3, 2] = float("inf")
    (m1, o1), (m2, o2) = ((m, OPTIMIZERS[name](m.parameters())) for m, _ in (_mlp(), _mlp()))
    s1, s2 = munet.amp.GradScaler(growth_interval=2), munet.amp.GradScaler(growth_interval=2)
    compiled = munet.compile(_scaled_step)
    for batch in (bad, bad, x, bad, x, x):
        eager_loss = _scaled_step(m1, o1, s1, batch, y).item()
        loss = compiled(m2, o2, s2, batch, y).item()
        assert loss == pytest.approx(eager_loss, rel=RTOL, nan_ok=True)
        assert s2.get_scale() == s1.get_scale()
        assert len(o2.state) == len(o1.state)
        _assert_same_state(m1, m2)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        assert set(o1.state[p1]) == set(o2.state[p2])
        for key, value in o1.state[p1].items():
            if isinstance(value, munet.Tensor):
                _assert_close(value, o2.state[p2][key], key)
            else:
                assert value == o2.state[p2][key], key


def test_grad_scaler_on_vulkan_matches_eager(vulkan):
    # the scale stays a float64 cpu tensor: the compiled graph casts it on cpu and moves it to the device
    x, y = _data()
    bad = x.clone()
    bad[3, 2] = float("inf")

    def make():
        model, _ = _mlp()
        model = model.to(vulkan)
        opt = munet.optim.AdamW(model.parameters(), lr=3e-2, weight_decay=0.05)
        return model, opt, munet.amp.GradScaler(str(vulkan), growth_interval=2)

    (m1, o1, s1), (m2, o2, s2) = make(), make()
    compiled = munet.compile(_scaled_step)
    for batch in [bad, x, x, x, bad, x]:
        batch, target = batch.to(vulkan), y.to(vulkan)
        eager_loss = _scaled_step(m1, o1, s1, batch, target).item()
        assert compiled(m2, o2, s2, batch, target).item() == pytest.approx(eager_loss, rel=2e-5, nan_ok=True)
        assert s2.get_scale() == s1.get_scale()
    assert s1.get_scale() == 2.0**15
    for (name, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items()):
        want, got = a.cpu().numpy().astype(np.float64), b.cpu().numpy().astype(np.float64)
        assert np.abs(got - want).max() <= 2e-5 * np.abs(want).max(), name
    assert compiled.stats()["backend"] == "vulkan"


def test_fusion_refuses_a_join_that_closes_a_cycle_through_a_straddling_reduction_group():
    # the shape of GradScaler's step-count restore: `c` starts a group; the reduction group of `a`
    # (exp, sum, mul) starts before `c` and ends after it (it reads pow(c)), and `flag` depends on
    # that group through the matmul; `where(flag, c, s)` joining `c`'s group would close a cycle
    def fn(x, z, s):
        a = x.exp()
        flag = munet.isfinite(a.t() @ z).all()
        c = s + 1
        e = a.sum(0) * c.pow(2)
        return e, munet.where(flag, c, s)

    munet.manual_seed(0)
    x, z, s = munet.randn(4, 2), munet.randn(4, 3), munet.randn(2)
    compiled = munet.compile(fn)
    for got, want in zip(compiled(x, z, s), fn(x, z, s)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert compiled.stats()["fused_groups"] == 1


def test_saved_step_with_grad_scaler_and_ema_replays_like_the_compiled_one(tmp_path):
    def step(model, opt, scaler, ema, x, y):
        loss = _scaled_step(model, opt, scaler, x, y)
        ema.update_parameters(model)
        return loss

    x, y = _data()
    model, opt = _mlp()
    scaler = munet.amp.GradScaler(growth_interval=2)
    ema = munet.optim.swa_utils.AveragedModel(model, multi_avg_fn=munet.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    compiled = munet.compile(step)
    for _ in range(3):
        compiled(model, opt, scaler, ema, x, y)
    munet.save(compiled, tmp_path / "step.safetensors")
    program = munet.load(tmp_path / "step.safetensors", device="cpu")
    for _ in range(3):  # the program's own state: scale, growth tracker, n_averaged, averages
        assert program(x, y).item() == compiled(model, opt, scaler, ema, x, y).item()
    saved = program.state_dict()
    assert 2.0**19 in [t.item() for t in saved.values() if t.dtype == munet.float64 and t.ndim == 0]
    assert scaler.get_scale() == 2.0**19  # 2**16 grown after every 2 of 6 clean steps
    assert saved["module1.n_averaged"].item() == ema.n_averaged.item() == 6
    np.testing.assert_array_equal(saved["module1.module.0.weight"].numpy(), ema.module[0].weight.detach().numpy())
