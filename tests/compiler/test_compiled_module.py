"""A compiled module's outputs carry a grad_fn: loss.backward() outside runs the compiled backward program."""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn
from tests.compiler.test_attention_views import ViTBlock
from tests.compiler.test_compile_vulkan import VULKAN_RTOL

RTOL, ATOL = 1e-5, 1e-6


def _mlp():
    return nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.Linear(7, 7), nn.Tanh(), nn.Linear(7, 3))


def _cnn():
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3)
    )


def _assert_close(a, b, name):
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=name)


def _train(model, forward, opt, x, y, steps=3):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize(
    "make, shape, optimizer",
    [
        (_mlp, (8, 5), lambda p: munet.optim.SGD(p, lr=0.1, momentum=0.9)),
        (_mlp, (8, 5), lambda p: munet.optim.AdamW(p, lr=0.01)),
        (_cnn, (4, 2, 6, 6), lambda p: munet.optim.SGD(p, lr=0.05)),  # BatchNorm's running stats: forward writes
    ],
)
def test_compiled_module_with_eager_backward_and_optimizer_trains_as_eager(make, shape, optimizer):
    rng = np.random.default_rng(0)
    x = munet.tensor(rng.standard_normal(shape).astype(np.float32))
    y = munet.tensor(rng.integers(0, 3, shape[0]))
    munet.manual_seed(0)
    eager = make()
    munet.manual_seed(0)
    model = make()
    compiled = munet.compile(model)
    expected = _train(eager, eager, optimizer(eager.parameters()), x, y)
    got = _train(model, compiled, optimizer(model.parameters()), x, y)
    np.testing.assert_allclose(got, expected, rtol=RTOL)
    for (name, a), b in zip(eager.state_dict().items(), model.state_dict().values()):
        _assert_close(a, b, name)
    for (name, p), q in zip(eager.named_parameters(), model.parameters()):
        _assert_close(p.grad, q.grad, f"{name}.grad")
    stats = compiled.stats()
    assert stats["traces"] == 1 and stats["passes"]["saved_for_backward"] > 0


def test_transformer_block_compiled_as_a_module_trains_as_eager():
    rng = np.random.default_rng(1)
    x = munet.tensor(rng.standard_normal((2, 5, 16)).astype(np.float32))
    target = munet.tensor(rng.standard_normal((2, 5, 16)).astype(np.float32))
    models = []
    for compile_it in (False, True):
        munet.manual_seed(0)
        model = ViTBlock()
        if compile_it:
            model.compile()
        opt = munet.optim.SGD(model.parameters(), lr=0.05)
        for _ in range(3):
            opt.zero_grad()
            F.mse_loss(model(x), target).backward()
            opt.step()
        models.append(model)
    for (name, p), q in zip(models[0].named_parameters(), models[1].parameters()):
        _assert_close(p, q, name)
        _assert_close(p.grad, q.grad, f"{name}.grad")


def test_gradients_reach_arguments_and_each_call_keeps_its_own_saved_values():
    munet.manual_seed(0)
    model = _mlp()
    compiled = munet.compile(model)
    rng = np.random.default_rng(2)
    xs = [munet.tensor(rng.standard_normal((4, 5)).astype(np.float32), requires_grad=True) for _ in range(2)]
    outs = [compiled(x) for x in xs]  # the second call replays the plan over the first one's memory
    (outs[0] * outs[0]).sum().backward()
    got = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    reference = xs[0].detach().requires_grad_()
    (model(reference) ** 2).sum().backward()
    for g, p in zip(got, model.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(xs[0].grad.numpy(), reference.grad.numpy(), rtol=RTOL, atol=ATOL)
    assert xs[1].grad is None
    assert compiled.stats()["traces"] == 1


def test_gradients_flow_into_the_history_of_a_non_leaf_argument():
    munet.manual_seed(0)
    model = _mlp()
    compiled = munet.compile(model)
    leaf = munet.randn(4, 5, requires_grad=True)
    compiled(leaf * 3.0).sum().backward()
    got = leaf.grad.numpy().copy()
    leaf.grad = None
    model(leaf * 3.0).sum().backward()
    np.testing.assert_allclose(got, leaf.grad.numpy(), rtol=RTOL, atol=ATOL)


def test_inference_under_no_grad_has_no_backward_and_higher_order_gradients_raise():
    munet.manual_seed(0)
    model = _mlp()
    compiled = munet.compile(model)
    x = munet.randn(3, 5)
    with munet.no_grad():
        out = compiled(x)
    assert out.grad_fn is None and not out.requires_grad
    loss = compiled(x).pow(2).sum()
    assert loss.grad_fn is not None
    with pytest.raises(RuntimeError, match="higher-order gradients"):
        munet.autograd.grad(loss, list(model.parameters()), create_graph=True)


def test_a_compiled_training_step_still_compiles_its_own_backward():
    from tests.compiler.models import train_step

    munet.manual_seed(0)
    model = _mlp()
    opt = munet.optim.SGD(model.parameters(), lr=0.1)
    step = munet.compile(train_step)
    x, y = munet.randn(4, 5), munet.tensor([0, 1, 2, 0])
    step(model, opt, x, y)
    assert "saved_for_backward" not in step.stats()["passes"]


def test_compile_of_a_module_returns_a_module_around_it_as_pytorch():
    munet.manual_seed(0)
    model = _cnn()
    compiled = munet.compile(model)
    assert isinstance(compiled, nn.Module) and compiled._orig_mod is model
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]
    assert list(compiled.state_dict()) == [f"_orig_mod.{k}" for k in model.state_dict()]
    model.note = "kept"
    assert compiled.note == "kept"  # attributes it lacks come from the original
    compiled.eval()
    assert not model.training and not model[1].training
    x = munet.randn(2, 2, 6, 6)
    with munet.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=RTOL, atol=ATOL)
    assert compiled.stats()["traces"] == 1 and "plan on cpu" in compiled.describe()


def test_compiled_module_backward_on_vulkan_equals_eager_vulkan(vulkan):
    # tolerance of tests/compiler/test_compile_vulkan.py: VULKAN_RTOL of each tensor's largest magnitude
    rng = np.random.default_rng(3)
    x = munet.tensor(rng.standard_normal((8, 5)).astype(np.float32)).to(vulkan)
    y = munet.tensor(rng.integers(0, 3, 8)).to(vulkan)
    munet.manual_seed(0)
    eager = _mlp().to(vulkan)
    munet.manual_seed(0)
    model = _mlp().to(vulkan)
    F.cross_entropy(eager(x), y).backward()
    F.cross_entropy(munet.compile(model)(x), y).backward()
    for (name, p), q in zip(eager.named_parameters(), model.parameters()):
        assert q.grad.device == vulkan
        expected = p.grad.cpu().numpy()
        atol = VULKAN_RTOL * np.abs(expected).max()
        np.testing.assert_allclose(q.grad.cpu().numpy(), expected, rtol=0, atol=atol, err_msg=name)


def test_a_backward_that_reads_values_on_the_host_leaves_the_forward_compiled_and_says_so():
    class HostScaled(munet.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * float(grad.sum().item())  # a host read: not traceable

    x = munet.ones(3, requires_grad=True)
    compiled = munet.compile(lambda t: HostScaled.apply(t) + 1)
    out = compiled(x)
    np.testing.assert_array_equal(out.detach().numpy(), [3, 3, 3])
    assert "saved_for_backward" not in compiled.stats()["passes"]
    with pytest.raises(RuntimeError, match="gradients do not flow back"):
        out.sum().backward()
