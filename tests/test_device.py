"""munet/_device.py: the default device of factories (set_default_device, ``with munet.device(...)``).

The cases that need a second device use vulkan (skipped without one, a failure under
MUNET_TEST_VULKAN=1, as in tests/backends); the PyTorch behaviour they mirror was read from
torch 2.13 (torch/__init__.py ``set_default_device``, torch/utils/_device.py).
"""

import threading

import numpy as np
import pytest

import munet

FACTORIES = {
    "tensor": lambda: munet.tensor([1.0, 2.0]),
    "as_tensor(list)": lambda: munet.as_tensor([1, 2]),
    "as_tensor(ndarray)": lambda: munet.as_tensor(np.ones(2, np.float32)),
    "scalar_tensor": lambda: munet.scalar_tensor(3.0),
    "zeros": lambda: munet.zeros(2, 3),
    "ones": lambda: munet.ones(2),
    "empty": lambda: munet.empty(4),
    "full": lambda: munet.full((2,), 7),
    "arange": lambda: munet.arange(5),
    "linspace": lambda: munet.linspace(0, 1, 5),
    "logspace": lambda: munet.logspace(0, 1, 3),
    "eye": lambda: munet.eye(3),
    "rand": lambda: munet.rand(3),
    "randn": lambda: munet.randn(2, 2),
    "randint": lambda: munet.randint(0, 5, (4,)),
    "randperm": lambda: munet.randperm(6),
    "normal(float, float, size)": lambda: munet.normal(0.0, 1.0, (3,)),
    "Tensor(2, 3)": lambda: munet.Tensor(2, 3),
}


def test_default_is_cpu():
    assert munet.get_default_device() == munet.device("cpu")
    assert munet.zeros(1).device.type == "cpu"


def test_unknown_devices_raise_and_leave_the_default_alone():
    with pytest.raises(munet.DeviceError, match="unknown device 'tpu'.*available devices: cpu"):
        munet.set_default_device("tpu")
    with pytest.raises(munet.DeviceError, match="unknown device 'tpu'"):
        with munet.device("tpu"):
            pass
    with pytest.raises(munet.DeviceError, match="device index 0 given without a type"):
        munet.set_default_device(0)
    assert munet.get_default_device().type == "cpu"
    assert munet.zeros(1).device.type == "cpu"


def test_an_explicit_device_wins(vulkan):
    with munet.device(vulkan):
        assert munet.zeros(2, device="cpu").device.type == "cpu"
        assert munet.tensor([1.0], device="cpu").device.type == "cpu"
        assert munet.randn(2, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("name", FACTORIES)
def test_factories_use_the_default_device(vulkan, name):
    munet.set_default_device(vulkan)
    try:
        assert FACTORIES[name]().device == vulkan
    finally:
        munet.set_default_device(None)
    assert FACTORIES[name]().device.type == "cpu"


def test_set_and_get(vulkan):
    munet.set_default_device("vulkan")
    try:
        assert munet.get_default_device() == vulkan
        assert munet.get_default_device().index == 0, "the index is filled in, as in PyTorch"
    finally:
        munet.set_default_device(None)
    assert munet.get_default_device() == munet.device("cpu")


def test_context_nests_and_restores(vulkan):
    dev = munet.device(vulkan)
    with dev as entered:
        assert entered is dev and munet.zeros(1).device == vulkan
        with munet.device("cpu"):
            assert munet.zeros(1).device.type == "cpu"
            with dev:  # the same device object entered twice
                assert munet.zeros(1).device == vulkan
            assert munet.zeros(1).device.type == "cpu"
        assert munet.zeros(1).device == vulkan
    assert munet.get_default_device().type == "cpu"


def test_context_restores_after_an_exception(vulkan):
    with pytest.raises(ValueError):
        with munet.device(vulkan):
            raise ValueError
    assert munet.get_default_device().type == "cpu"


def test_set_inside_a_block_lasts_until_the_block_ends(vulkan):
    """As torch 2.13: ``with torch.device('cpu'): torch.set_default_device('meta')`` ends back on cpu."""
    with munet.device("cpu"):
        munet.set_default_device(vulkan)
        assert munet.zeros(1).device == vulkan
    assert munet.get_default_device().type == "cpu"


def test_like_factories_keep_their_input_device(vulkan):
    x = munet.ones(2, 3)  # cpu
    with munet.device(vulkan):
        for like in (munet.zeros_like, munet.ones_like, munet.empty_like, munet.rand_like, munet.randn_like):
            assert like(x).device.type == "cpu", like.__name__
        assert munet.full_like(x, 2.0).device.type == "cpu"
        assert munet.randint_like(x, 5).device.type == "cpu"
        assert x.new_zeros(2).device.type == "cpu" and x.new_tensor([1.0]).device.type == "cpu"
        assert munet.zeros_like(x, device=vulkan).device == vulkan


def test_from_numpy_and_dlpack_stay_on_cpu(vulkan):
    a = np.arange(4, dtype=np.float32)
    with munet.device(vulkan):
        t = munet.from_numpy(a)
        assert t.device.type == "cpu"
        t[0] = 9.0
        assert a[0] == 9.0, "from_numpy still shares memory"
        assert munet.from_dlpack(a).device.type == "cpu"


def test_as_tensor_moves_a_tensor_only_when_a_default_is_set(vulkan):
    on_vulkan = munet.ones(2, device=vulkan)
    assert munet.as_tensor(on_vulkan) is on_vulkan
    x = munet.ones(2)
    with munet.device(vulkan):
        moved = munet.as_tensor(x)  # torch.as_tensor under a device context moves it too
    assert moved.device == vulkan and moved.tolist() == [1.0, 1.0]


def test_layers_built_in_the_context_live_there(vulkan):
    with munet.device(vulkan):
        model = munet.nn.Sequential(munet.nn.Linear(4, 8), munet.nn.LayerNorm(8), munet.nn.Linear(8, 2))
        x = munet.randn(3, 4)
        loss = model(x).square().mean()
    assert {p.device for p in model.parameters()} == {vulkan}
    loss.backward()
    assert all(p.grad.device == vulkan for p in model.parameters())
    with munet.device(vulkan):
        assert munet.nn.Linear(2, 2, device="cpu").weight.device.type == "cpu"


def test_rng_state_stays_on_cpu(vulkan):
    with munet.device(vulkan):
        assert munet.get_rng_state().device.type == "cpu"
        assert munet.Generator().device.type == "cpu", "a Generator is cpu unless told, as in PyTorch"
        with pytest.raises(RuntimeError, match="rand: expected a 'vulkan' generator, but got one for device 'cpu'"):
            munet.rand(2, generator=munet.Generator())
        assert munet.rand(2, generator=munet.Generator(vulkan)).device == vulkan


def test_the_default_is_per_thread(vulkan):
    seen = []
    with munet.device(vulkan):
        thread = threading.Thread(target=lambda: seen.append((munet.get_default_device(), munet.zeros(1).device)))
        thread.start()
        thread.join()
        assert munet.zeros(1).device == vulkan
    assert [(d.type, z.type) for d, z in seen] == [("cpu", "cpu")], "a new thread starts on cpu, as in PyTorch"


def test_compile_traces_factories_on_the_default_device(vulkan):
    def step(x):
        return x + munet.ones(3)

    with munet.device(vulkan):
        x = munet.arange(3.0)
        compiled = munet.compile(step, device=vulkan)
        assert compiled(x).cpu().tolist() == [1.0, 2.0, 3.0]


def test_ops_make_their_own_tensors_on_the_input_device(vulkan):
    """An op's internal tensors follow its input, not the default device (local_response_norm pads with zeros)."""
    import munet.nn.functional as F

    x = munet.randn(2, 4, 5)
    expected = F.local_response_norm(x, 3)
    got = F.local_response_norm(x.to(vulkan), 3)  # default cpu, input on vulkan
    assert got.device == vulkan
    np.testing.assert_allclose(got.cpu().numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    with munet.device(vulkan):  # default vulkan, input on cpu
        assert F.local_response_norm(x, 3).device.type == "cpu"
