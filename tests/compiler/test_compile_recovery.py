"""munet.compile(..., recover="rebuild") (munet/compiler/recovery.py, compiled.py): a call that meets
a lost device resets it, restores the state the call touches from the host copy taken before the
call, rebuilds the plan and runs again, so training goes on as if nothing happened."""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn

STEPS = 4


def _training(device, recover):
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
    opt = munet.optim.Adam(model.parameters(), lr=0.05)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(1)
    host = [(rng.standard_normal((5, 6)).astype(np.float32), rng.integers(0, 3, 5)) for _ in range(STEPS)]
    return model, opt, munet.compile(step, recover=recover), host


def _batch(host, device):
    """A batch moved to the device just before its call, as a data loader's would be: tensors made
    before a loss that the lost call did not touch are gone with the old device."""
    x, y = host
    return munet.tensor(x, device=device), munet.tensor(y, device=device)


def _state(model, opt) -> list:
    arrays = [p.cpu().numpy() for p in model.state_dict().values()]
    arrays += [v.cpu().numpy() for st in opt.state.values() for v in st.values() if isinstance(v, munet.Tensor)]
    return arrays


def _reference(device) -> tuple:
    model, opt, step, batches = _training(device, None)
    losses = [step(*_batch(b, device)).item() for b in batches]
    return losses, _state(model, opt)


@pytest.mark.parametrize("lost_calls", [(0,), (2,), (0, 1)], ids=["first-call", "third-call", "first-two-calls"])
def test_rebuild_retries_a_lost_call_and_training_goes_on(lost_vulkan, lost_calls):
    """Regression: after DeviceLostError every later call failed and there was no way back."""
    device, inject = lost_vulkan
    want_losses, want_state = _reference(device)
    model, opt, step, batches = _training(device, "rebuild")
    losses = []
    for i, host in enumerate(batches):
        batch = _batch(host, device)
        if i in lost_calls:
            munet.vulkan.synchronize(device)
            inject(1)  # the call's own submission
        losses.append(step(*batch).item())
    assert step.stats()["recoveries"] == len(lost_calls)
    assert losses == want_losses
    for got, want in zip(_state(model, opt), want_state, strict=True):
        np.testing.assert_array_equal(got, want)
    x, y = batch  # the arguments of the last call, and the model, work eagerly on the fresh device
    assert F.cross_entropy(model(x), y).item() > 0  # the same tensor objects work eagerly on the fresh device


def test_a_second_loss_raises_and_leaves_the_state_as_before_the_call(lost_vulkan):
    device, inject = lost_vulkan
    model, opt, step, batches = _training(device, "rebuild")
    step(*_batch(batches[0], device))
    before = _state(model, opt)
    batch = _batch(batches[1], device)
    munet.vulkan.synchronize(device)
    inject(1, 2)  # the call and its retry
    with pytest.raises(munet.DeviceLostError, match="lost again while retrying"):
        step(*batch)
    for got, want in zip(_state(model, opt), before, strict=True):
        np.testing.assert_array_equal(got, want)
    assert np.isfinite(step(*batch).item())  # the state and the arguments are back: the call runs


def test_without_recover_a_loss_raises_and_a_reset_says_the_state_is_gone(lost_vulkan):
    device, inject = lost_vulkan
    model, opt, step, batches = _training(device, None)
    step(*_batch(batches[0], device))
    batch = _batch(batches[1], device)
    munet.vulkan.synchronize(device)
    inject(1)
    with pytest.raises(munet.DeviceLostError, match="the device was lost"):
        step(*batch)
    with pytest.raises(munet.DeviceLostError, match="the device was lost"):
        step(*batch)
    munet.vulkan.reset(device)
    with pytest.raises(munet.DeviceLostError, match="made before the device was reset"):
        step(*_batch(batches[1], device))


@pytest.mark.parametrize("bad", ["retry", True, 1])
def test_recover_values_are_checked(bad):
    with pytest.raises(ValueError, match=f"munet.compile: recover must be None or 'rebuild', got {bad!r}"):
        munet.compile(lambda x: x + 1, recover=bad)
    with pytest.raises(ValueError, match="recover must be None or 'rebuild'"):
        munet.compile(recover=bad)


def test_rebuild_on_cpu_changes_nothing():
    f = munet.compile(lambda x: x * 2 + 1, recover="rebuild")
    assert f(munet.ones(3)).tolist() == [3.0, 3.0, 3.0]
    assert f.stats()["recoveries"] == 0


def test_each_call_is_retried_from_its_own_copy(lost_vulkan):
    """Two losses in a row on one specialization: the second retry restores that call's arguments,
    not those of the call before (a copy taken for the first retry must not serve the next call)."""
    device, inject = lost_vulkan
    w = munet.tensor(np.arange(4, dtype=np.float32), device=device)
    f = munet.compile(lambda x: (x * w).sum(), recover="rebuild")
    for k in range(3):
        x = munet.full((4,), float(k + 1), device=device)
        munet.vulkan.synchronize(device)
        inject(1)
        assert f(x).item() == 6.0 * (k + 1)
    assert f.stats()["recoveries"] == 3 and f.stats()["traces"] == 2
