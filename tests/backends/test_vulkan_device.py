"""munet/backends/vulkan/adapters.py and munet/vulkan.py: device listing, errors, public module."""

import subprocess
import sys

import pytest

import munet
from munet.backends.vulkan import adapters


def test_devices_lists_vulkan_and_webgpu(vulkan):
    labels = munet.devices()
    entry = next(d for d in labels if d.startswith("vulkan:0  "))
    name, kind = entry.split("  ")[1:]
    assert name and kind
    assert any(d.startswith("webgpu:0  ") for d in labels)
    assert munet.vulkan.is_available() and munet.vulkan.device_count() >= 1


def test_webgpu_device_runs_kernels(vulkan):
    x = munet.arange(6.0, device="webgpu") * 2
    assert x.device == munet.device("webgpu:0")
    assert x.cpu().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def test_missing_index_says_how_many_exist(vulkan):
    n = munet.vulkan.device_count()
    with pytest.raises(munet.DeviceError, match=rf"vulkan:{n}' is not available; this machine has {n} Vulkan"):
        munet.zeros(2, device=f"vulkan:{n}")


def test_missing_wgpu_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "wgpu", None)
    adapters.reset()
    try:
        assert adapters.list_devices("vulkan") == []
        entry = munet._device._BACKENDS["vulkan"]
        saved = dict(entry.instances)
        entry.instances.clear()
        try:
            with pytest.raises(
                munet.DeviceError, match=r"wgpu package is not available.*pip install 'munet\[vulkan\]'"
            ):
                munet.zeros(2, device="vulkan")
        finally:
            entry.instances.update(saved)
    finally:
        monkeypatch.undo()
        adapters.reset()


def test_no_adapter_names_the_driver_packages(monkeypatch):
    monkeypatch.setitem(adapters._state, "adapters", [])
    monkeypatch.setitem(adapters._state, "error", None)
    message = adapters.explain_unavailable("vulkan", 0)
    assert "no Vulkan adapter" in message and "mesa-vulkan-drivers" in message


def test_import_munet_does_not_import_wgpu():
    code = "import sys, munet; assert 'wgpu' not in sys.modules; print(munet.vulkan.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "munet.vulkan"


def test_mixing_devices_raises(vulkan):
    with pytest.raises(munet.DeviceError, match="same device"):
        munet.ones(2) + munet.ones(2, device=vulkan)


def test_error_classes_are_exported():
    assert issubclass(munet.OutOfMemoryError, RuntimeError)
    assert issubclass(munet.DeviceLostError, RuntimeError)


def test_lost_device_raises_and_stays_lost(vulkan):
    import numpy as np

    from munet.backends.vulkan.backend import VulkanBackend

    backend = VulkanBackend("vulkan", 0)  # a wgpu device of its own: the shared one is untouched
    data = backend.from_numpy(np.arange(4, dtype=np.float32))
    backend.runtime.device.destroy()
    with pytest.raises(munet.DeviceLostError, match="vulkan:0: the device was lost"):
        backend.to_numpy(backend.view(data, (4,), (1,), 0))
    with pytest.raises(munet.DeviceLostError, match="its tensors are gone"):
        backend.from_numpy(np.zeros(3, dtype=np.float32))
    assert backend.runtime.lost_reason


def test_threads_opening_a_device_share_one_backend(monkeypatch):
    """Regression (munet/_device.py's registry): threads opening a device at once each built a backend,
    and their tensors clashed ('expected all tensors on the same device, got vulkan:0 and vulkan:0')."""
    import threading
    import time

    from munet import _device

    built = []

    def factory(index):
        time.sleep(0.05)  # opening a real device takes a while: long enough for the others to arrive
        built.append(object())
        return built[-1]

    monkeypatch.setitem(_device._BACKENDS, "slowdev", _device._BackendEntry(lambda: [(0, "slow", "test")], factory))
    got = []

    def open_device():
        got.append(_device.get_backend(munet.device("slowdev")))

    threads = [threading.Thread(target=open_device) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and len(built) == 1 and all(b is built[0] for b in got)
