"""DataParallel in one process: nn.DataParallel (PyTorch's replicas, scatter and gather) and
munet.DataParallel (one training step over several devices), both against single-device
training on the whole batch. Float64 on cpu, so the only difference is summation order."""

import copy

import numpy as np
import pytest

import munet
from munet import nn

TOL = 1e-10


@pytest.fixture
def float64():
    previous = munet.get_default_dtype()
    munet.set_default_dtype(munet.float64)
    yield
    munet.set_default_dtype(previous)


def mlp(seed=0):
    munet.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def batch(step, n):
    rng = np.random.default_rng(100 + step)
    return munet.tensor(rng.standard_normal((n, 5))), munet.tensor(rng.standard_normal((n, 3)))


def assert_close(a, b, what, tol=TOL):
    a, b = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    assert a.shape == b.shape, what
    assert np.allclose(a, b, rtol=0, atol=tol), f"{what}: max difference {np.abs(a - b).max():g}"


def train_reference(steps, n):
    model = mlp()
    opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        x, y = batch(step, n)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model


@pytest.mark.parametrize("n", [8, 5, 1])
def test_nn_data_parallel_trains_like_one_device(float64, n):
    reference = train_reference(3, n)
    model = nn.DataParallel(mlp(), device_ids=["cpu", "cpu"])
    opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        x, y = batch(step, n)
        opt.zero_grad()
        out = model(x)
        assert out.shape == (n, 3)
        nn.functional.mse_loss(out, y).backward()
        opt.step()
    for (name, p), (_, q) in zip(reference.named_parameters(), model.module.named_parameters()):
        assert_close(q, p, name)


def test_nn_data_parallel_module_state_dict_and_devices():
    inner = mlp()
    model = nn.DataParallel(inner, device_ids=[0, "cpu"], output_device="cpu")
    assert model.module is inner
    assert model.device_ids == [munet.device("cpu")] * 2 and model.output_device == munet.device("cpu")
    assert list(model.state_dict()) == ["module." + k for k in inner.state_dict()]
    assert nn.DataParallel(inner).device_ids == [munet.device("cpu")]
    with pytest.raises(TypeError, match="DataParallel: module must be"):
        nn.DataParallel(lambda x: x)


def test_nn_data_parallel_splits_containers_and_gathers_them():
    class Pair(nn.Module):
        def forward(self, x, scale, extra=None):
            return {"y": x * scale, "rows": munet.full((x.shape[0], 1), float(x.shape[0]))}, None

    model = nn.DataParallel(Pair(), device_ids=["cpu", "cpu", "cpu"])
    x = munet.arange(14.0).reshape(7, 2)
    out, nothing = model(x, 2.0, extra=[x])
    assert nothing is None
    assert_close(out["y"], x * 2.0, "scattered and gathered rows")
    assert out["rows"].flatten().tolist() == [3.0] * 3 + [3.0] * 3 + [1.0]  # chunk sizes 3, 3, 1


def test_nn_data_parallel_gathers_scalars_into_a_vector():
    class Total(nn.Module):
        def forward(self, x):
            return x.sum()

    with pytest.warns(UserWarning, match="unsqueeze and return a vector"):
        out = nn.DataParallel(Total(), device_ids=["cpu", "cpu"])(munet.ones(4, 2))
    assert out.tolist() == [4.0, 4.0]


def test_nn_data_parallel_threads_take_the_callers_modes():
    model = nn.DataParallel(nn.Linear(4, 4), device_ids=["cpu", "cpu"])
    x = munet.randn(6, 4)
    with munet.no_grad():
        assert model(x).grad_fn is None
    assert model(x).grad_fn is not None
    with munet.autocast("cpu", dtype=munet.bfloat16):
        assert model(x).dtype == munet.bfloat16


def test_nn_data_parallel_batchnorm_statistics_come_from_the_first_replica(float64):
    model = nn.DataParallel(nn.BatchNorm1d(3), device_ids=["cpu", "cpu"])
    x = munet.randn(8, 3)
    model(x)
    expected = nn.BatchNorm1d(3)
    expected(x[:4])
    assert_close(model.module.running_mean, expected.running_mean, "running_mean")
    assert_close(model.module.running_var, expected.running_var, "running_var")


def test_nn_data_parallel_errors_name_the_replica_and_the_device():
    class Fails(nn.Module):
        def forward(self, x):
            raise ValueError("bad shard")

    with pytest.raises(ValueError, match="bad shard") as info:
        nn.DataParallel(Fails(), device_ids=["cpu", "cpu"])(munet.ones(2, 1))
    assert "replica 0 on device cpu" in "".join(getattr(info.value, "__notes__", []))


def munet_step_training(devices, n, as_list=False):
    model = mlp()
    opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if as_list:
        params = list(model.parameters())

        def loss_fn(ps, x, y):
            h = x
            for i in range(0, len(ps) - 2, 2):
                h = munet.tanh(nn.functional.linear(h, ps[i], ps[i + 1]))
            return nn.functional.mse_loss(nn.functional.linear(h, ps[-2], ps[-1]), y)

        step = munet.DataParallel(loss_fn, params, opt, devices)
    else:
        step = munet.DataParallel(lambda m, x, y: nn.functional.mse_loss(m(x), y), model, opt, devices)
    losses = [step(*batch(s, n)) for s in range(3)]
    return model, losses


@pytest.mark.parametrize(
    ("devices", "n", "as_list"), [(["cpu", "cpu"], 8, False), (["cpu"] * 3, 5, True), (["cpu"] * 3, 2, False)]
)
def test_munet_data_parallel_step_trains_like_one_device(float64, devices, n, as_list):
    reference = mlp()
    opt = munet.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    reference_losses = []
    for s in range(3):
        x, y = batch(s, n)
        opt.zero_grad()
        loss = nn.functional.mse_loss(reference(x), y)
        loss.backward()
        opt.step()
        reference_losses.append(loss)
    model, losses = munet_step_training(devices, n, as_list)
    for a, b in zip(losses, reference_losses):
        assert_close(a, b, "loss")
    for (name, p), (_, q) in zip(reference.named_parameters(), model.named_parameters()):
        assert_close(q, p, name)
    again, _ = munet_step_training(devices, n, as_list)
    for p, q in zip(model.parameters(), again.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy()), "the same device list gives the same bits"


def test_munet_data_parallel_checks_its_arguments(float64):
    model = mlp()
    opt = munet.optim.SGD(model.parameters(), lr=0.1)
    step = munet.DataParallel(lambda m, x, y: m(x).sum(0), model, opt, ["cpu", "cpu"])
    with pytest.raises(RuntimeError, match="must return a scalar tensor, got \\(3,\\)"):
        step(*batch(0, 4))
    with pytest.raises(ValueError, match="same size on dim 0"):
        step(munet.ones(4, 5), munet.ones(3, 3))
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        munet.DataParallel(None, model, opt, ["cpu"])


def test_munet_data_parallel_batchnorm_buffers_follow_the_first_shard(float64):
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 3), nn.BatchNorm1d(3))
    expected = copy.deepcopy(model)
    opt = munet.optim.SGD(model.parameters(), lr=0.0)
    x, y = batch(0, 8)
    munet.DataParallel(lambda m, x, y: nn.functional.mse_loss(m(x), y), model, opt, ["cpu", "cpu"])(x, y)
    expected(x[:4])
    assert_close(model[1].running_mean, expected[1].running_mean, "running_mean")


def test_data_parallel_over_cpu_and_vulkan(vulkan):
    """float32 on two devices against a float64 reference: per-step errors of a few float32 ulps."""
    n, devices = 8, ["cpu", str(vulkan)]
    munet.set_default_dtype(munet.float64)
    reference = train_reference(3, n)
    munet.set_default_dtype(munet.float32)
    model = mlp().float()
    opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = munet.DataParallel(lambda m, x, y: nn.functional.mse_loss(m(x), y), model, opt, devices)
    for s in range(3):
        x, y = batch(s, n)
        step(x.float(), y.float())
    for (name, p), (_, q) in zip(reference.named_parameters(), model.named_parameters()):
        assert_close(q.double(), p, f"munet.DataParallel {name}", tol=1e-5)
    module = nn.DataParallel(mlp().float(), device_ids=devices)
    opt = munet.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    for s in range(3):
        x, y = batch(s, n)
        opt.zero_grad()
        out = module(x.float())
        assert out.device == munet.device("cpu")
        nn.functional.mse_loss(out, y.float()).backward()
        opt.step()
    for (name, p), (_, q) in zip(reference.named_parameters(), module.module.named_parameters()):
        assert_close(q.double(), p, f"nn.DataParallel {name}", tol=1e-5)
