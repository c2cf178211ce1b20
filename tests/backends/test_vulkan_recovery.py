"""Device loss and the way back: MUNET_TEST_INJECT_DEVICE_LOST, munet.vulkan.reset(), and what a lost
or reset device answers (munet/backends/vulkan/runtime.py, backend.py, munet/vulkan.py)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import munet

LOST = "the device was lost"
RESET = "made before the device was reset"
ROOT = Path(__file__).resolve().parents[2]


def test_injected_loss_stays_lost_and_public_calls_say_so(lost_vulkan):
    """Regression: empty_cache() on a lost device raised a raw wgpu error."""
    device, inject = lost_vulkan
    x = munet.arange(4.0, device=device)
    inject(1)
    with pytest.raises(munet.DeviceLostError, match=f"{LOST} \\(injected by MUNET_TEST_INJECT_DEVICE_LOST"):
        (x * 2).cpu()
    for call in (munet.vulkan.empty_cache, munet.vulkan.memory_stats, munet.vulkan.synchronize):
        with pytest.raises(munet.DeviceLostError, match=LOST):
            call(device)
    with pytest.raises(munet.DeviceLostError, match="munet.vulkan.reset"):
        munet.ones(2, device=device).cpu()


def test_reset_brings_the_device_back_and_old_tensors_raise_clearly(lost_vulkan):
    """Regression: there was no public reset, and a fresh device's tensors clashed with the old ones
    ('expected all tensors on the same device, got vulkan:0 and vulkan:0')."""
    device, inject = lost_vulkan
    old = munet.arange(4.0, device=device)
    inject(1)
    with pytest.raises(munet.DeviceLostError):
        (old + 1).cpu()
    backend = munet._device.get_backend(device)
    generation = backend.generation
    munet.vulkan.reset(device)
    assert backend.generation == generation + 1
    new = munet.arange(4.0, device=device)
    assert (new * 2).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
    for use in (lambda: old.cpu(), lambda: old + new, lambda: new.copy_(old), lambda: old.sum()):
        with pytest.raises(munet.DeviceLostError, match=f"{RESET} \\(generation {generation}; the device is at"):
            use().cpu()
    assert munet.vulkan.memory_stats(device)["submits"] >= 1
    munet.vulkan.empty_cache(device)
    munet.vulkan.synchronize(device)


def test_reset_of_a_live_device_drops_its_tensors(lost_vulkan):
    device, _ = lost_vulkan
    old = munet.ones(3, device=device) * 3  # recorded, not submitted
    munet.vulkan.reset(device)
    with pytest.raises(munet.DeviceLostError, match=RESET):
        old.cpu()
    assert munet.full((2,), 5.0, device=device).cpu().tolist() == [5.0, 5.0]


def test_a_lost_device_loses_no_other_device(lost_vulkan):
    device, inject = lost_vulkan
    inject(1)
    with pytest.raises(munet.DeviceLostError):
        munet.ones(2, device=device).sum().item()
    assert (munet.ones(2, device="webgpu:0") + 1).cpu().tolist() == [2.0, 2.0]


def test_restore_gives_an_old_buffer_fresh_memory(lost_vulkan):
    """backend.read_storage/restore: what munet.compile(recover='rebuild') uses for its state."""
    device, _ = lost_vulkan
    backend = munet._device.get_backend(device)
    host = np.arange(10, dtype=np.float32)
    t = munet.tensor(host, device=device)
    view = t[2:7]
    saved = backend.read_storage(t._storage.data)
    munet.vulkan.reset(device)
    backend.restore(t._storage.data, saved)
    np.testing.assert_array_equal(view.cpu().numpy(), host[2:7])
    np.testing.assert_array_equal((t + 1).cpu().numpy(), host + 1)


def test_bad_injection_value_is_named(lost_vulkan, monkeypatch):
    device, _ = lost_vulkan
    monkeypatch.setenv("MUNET_TEST_INJECT_DEVICE_LOST", "soon")
    with pytest.raises(ValueError, match="MUNET_TEST_INJECT_DEVICE_LOST: expected submission numbers.*'soon'"):
        munet.ones(2, device=device).sum().item()


def test_injection_counts_the_process_submissions_from_one(vulkan):
    """The variable set before the process starts: its N-th submission reports the loss."""
    code = (
        "import munet\n"
        f"x = munet.ones(2, device='{vulkan}')\n"
        "print((x + 1).sum().item())\n"  # submission 1
        "try:\n"
        "    (x * 3).sum().item()\n"  # submission 2: lost
        "except munet.DeviceLostError as e:\n"
        "    print('lost:', e)\n"
        "munet.vulkan.reset()\n"
        f"print((munet.ones(2, device='{vulkan}') * 4).sum().item())\n"  # 3: a fresh device
    )
    env = dict(os.environ, MUNET_TEST_INJECT_DEVICE_LOST="2")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "4.0" and lines[2] == "8.0"
    assert "injected by MUNET_TEST_INJECT_DEVICE_LOST=2" in lines[1]
