"""munet.accelerator, munet.backends.mps and Tensor.pin_memory/is_pinned vs PyTorch's CPU-only build."""

import pytest
import torch

import munet


@pytest.fixture
def no_adapter(monkeypatch):
    monkeypatch.setattr(munet.vulkan, "device_count", lambda: 0)


def test_without_accelerator_answers_as_torch_cpu_build(no_adapter):
    assert not torch.accelerator.is_available()  # the reference is PyTorch's CPU-only build
    assert munet.accelerator.is_available() is torch.accelerator.is_available()
    assert munet.accelerator.current_accelerator() is torch.accelerator.current_accelerator() is None
    assert munet.accelerator.device_count() == torch.accelerator.device_count() == 0
    x, t = munet.ones(2), torch.ones(2)
    assert x.is_pinned() is t.is_pinned() is False
    with pytest.raises(RuntimeError) as expected:
        t.pin_memory()
    with pytest.raises(RuntimeError, match=str(expected.value)):
        x.pin_memory()


def test_vulkan_is_the_accelerator(monkeypatch):
    monkeypatch.setattr(munet.vulkan, "device_count", lambda: 2)
    assert munet.accelerator.is_available()
    assert munet.accelerator.device_count() == 2
    assert munet.accelerator.current_accelerator() == munet.device("vulkan")
    x = munet.arange(4.0)
    pinned = x.pin_memory()
    assert pinned.tolist() == x.tolist() and pinned.device == x.device and not pinned.is_pinned()
    pinned.add_(1)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]  # a new tensor, as PyTorch's


def test_mps_is_not_available():
    assert munet.backends.mps.is_available() is False
    assert munet.backends.mps.is_built() is False


def test_cuda_comes_before_vulkan(monkeypatch):
    monkeypatch.setattr(munet.vulkan, "device_count", lambda: 1)
    monkeypatch.setattr(munet.cuda, "device_count", lambda: 2)
    assert munet.accelerator.current_accelerator() == munet.device("cuda")
    assert munet.accelerator.device_count() == 2
