"""munet.compile on vulkan: compiled training steps equal eager ones on the device, one command
buffer per call, state that stays in its device buffers, stats() and describe().

Tolerance on vulkan (docs/compiler.md, "Vulkan lowering"): each loss agrees with eager vulkan
to ``VULKAN_RTOL`` relative; after N steps every parameter, buffer and optimizer moment agrees
with eager vulkan to ``VULKAN_RTOL`` relative to the tensor's largest magnitude (SGD), or, under
AdamW, is as close to a float64 cpu run of the same steps as eager vulkan's is, plus the drift its
gradient errors explain (``tests.reference.AdamWErrorBudget``: AdamW turns the rounding of a
gradient that cancels to almost nothing into a full-size update). Fused WGSL kernels (composites
such as log_softmax and standardize decompose and fuse) do not round like the eager kernels: the
shader compiler may contract ``a * b + c`` into one rounding and fused sums add in another order.
"""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn
from tests.compiler.models import GPT
from tests.reference import AdamWErrorBudget, assert_training_close_to_reference

VULKAN_RTOL = 2e-5


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _assert_close(name, got, want, rtol=VULKAN_RTOL):
    if rtol == 0:
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    bound = rtol * max(np.abs(want).max(initial=0.0), 1e-30)
    worst = np.abs(got - want).max(initial=0.0)
    assert worst <= bound, f"{name}: max |compiled - eager| = {worst:.3g} > {bound:.3g}"


def _assert_same_training_state(m1, o1, m2, o2, rtol=VULKAN_RTOL):
    for (name, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items(), strict=True):
        _assert_close(name, b.cpu().numpy(), a.cpu().numpy(), rtol)
    for k, (s1, s2) in enumerate(zip(o1.state.values(), o2.state.values(), strict=True)):
        for key in s1:
            _assert_close(f"optimizer state {k} {key}", s2[key].cpu().numpy(), s1[key].cpu().numpy(), rtol)


def _run_pair(make, batches, steps, step=_step, seed_each_step=False, schedule=False, fuse=True):
    """Train two copies ``steps`` steps, eager and compiled, on ``batches``; compare losses and state.

    Unfused, a compiled step runs the eager kernels in the eager order: equal bit for bit. Fused
    under AdamW, a third copy trains in float64 on the cpu as the reference (see the module docstring).
    """
    rtol = VULKAN_RTOL if fuse else 0
    (m1, o1, s1), (m2, o2, s2) = make(), make()
    reference = None
    if fuse and isinstance(o1, munet.optim.AdamW):
        m64, o64, s64 = reference = make()
        m64.to("cpu", munet.float64)
        budget = AdamWErrorBudget(m1, m2, m64, o64)
    compiled = munet.compile(step, fuse=fuse)
    for i in range(steps):
        x, y = batches[i % len(batches)]
        if seed_each_step:
            munet.manual_seed(100 + i)  # the same dropout masks for both
        eager = step(m1, o1, x, y).item()
        if seed_each_step:
            munet.manual_seed(100 + i)
        got = compiled(m2, o2, x, y).item()
        assert got == pytest.approx(eager, rel=rtol, abs=0), (i, got, eager)
        if reference is not None:
            if seed_each_step:
                munet.manual_seed(100 + i)  # cpu and vulkan draw the same bits
            x64 = x.cpu().double() if x.dtype.is_floating_point else x.cpu()
            step(m64, o64, x64, y.cpu())
            budget.step()
        if schedule:
            s1.step()
            s2.step()
            if reference is not None:
                s64.step()
    if reference is not None:
        assert_training_close_to_reference((m1, o1), (m2, o2), (m64, o64), budget)
    else:
        _assert_same_training_state(m1, o1, m2, o2, rtol)
    return compiled, (m1, o1), (m2, o2)


def _mlp(device):
    def make():
        munet.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 5)).to(device)
        opt = munet.optim.AdamW(model.parameters(), lr=3e-2, weight_decay=0.05)
        return model, opt, munet.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

    return make


def test_mlp_adamw_with_scheduler_matches_eager(vulkan):
    munet.manual_seed(1)
    batch = (munet.randn(16, 12).to(vulkan), munet.randint(0, 5, (16,)).to(vulkan))
    compiled, (_, o1), (m2, o2) = _run_pair(_mlp(vulkan), [batch], steps=6, schedule=True)
    assert o2.param_groups[0]["lr"] == o1.param_groups[0]["lr"] < 3e-2
    stats = compiled.stats()
    assert stats["backend"] == "vulkan" and stats["traces"] == 2 and stats["cache_hits"] == 4
    assert stats["generated_code"] and stats["generated_kernels"] == stats["fused_groups"] > 0
    assert stats["fallback"] is None and stats["arena_bytes"] is None and "allocator" in stats["memory_plan"]
    # AdamW writes each parameter and both moments over their inputs (3 per parameter, at most)
    assert len(list(m2.parameters())) < stats["inplace_updates"] <= 3 * len(list(m2.parameters()))
    assert "in place: IN" in compiled.describe()
    for p in m2.parameters():
        assert p.device == vulkan and o2.state[p]["exp_avg"].device == vulkan
        assert o2.state[p]["step"].item() == 6  # the step count is a cpu tensor, as in PyTorch


def _cnn(device):
    def make():
        munet.manual_seed(0)
        model = nn.Sequential(
            nn.Conv2d(1, 4, 3, bias=False),  # a bias before BatchNorm has a zero gradient: pure rounding noise
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(4 * 3 * 3, 3),
        ).to(device)
        opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        return model, opt, None

    return make


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_batchnorm_cnn_sgd_matches_eager_including_running_stats(vulkan, fuse):
    munet.manual_seed(2)
    batch = (munet.randn(6, 1, 8, 8).to(vulkan), munet.randint(0, 3, (6,)).to(vulkan))
    compiled, (m1, _), (m2, _) = _run_pair(_cnn(vulkan), [batch], steps=5, fuse=fuse)
    assert compiled.stats()["traces"] == 2 and (compiled.stats()["fused_groups"] > 0) == fuse
    assert m2[1].num_batches_tracked.item() == m1[1].num_batches_tracked.item() == 5


def test_gpt_transformer_adamw_matches_eager(vulkan):
    def make():
        munet.manual_seed(0)
        model = GPT(layers=1).to(vulkan)
        return model, munet.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1), None

    gen = np.random.default_rng(3)
    batches = [
        (munet.tensor(gen.integers(0, 13, (3, 8))).to(vulkan), munet.tensor(gen.integers(0, 13, 24)).to(vulkan))
        for _ in range(2)
    ]
    compiled, _, _ = _run_pair(make, batches, steps=3)
    assert compiled.stats()["traces"] == 2 and compiled.stats()["generated_kernels"] > 0


def test_digits_demo_model_and_step_match_eager(vulkan):
    from munet.demo import build_model, split_digits

    (images, labels), _, _ = split_digits(seed=0)
    batches = [(images[k * 16 : (k + 1) * 16].to(vulkan), labels[k * 16 : (k + 1) * 16].to(vulkan)) for k in range(2)]

    def make():
        munet.manual_seed(0)
        model = build_model().to(vulkan)
        opt = munet.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=1e-4)
        return model, opt, munet.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-3, total_steps=3)

    def demo_step(model, optimizer, images, labels):  # munet.demo.train's loop body
        loss = F.cross_entropy(model(images), labels, label_smoothing=0.05)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    compiled, _, _ = _run_pair(make, batches, steps=3, step=demo_step, seed_each_step=True, schedule=True)
    assert compiled.stats()["backend"] == "vulkan"


def _runtime(device):
    return munet._device.get_backend(munet.device(device)).runtime


def test_one_command_buffer_per_call_and_state_stays_in_its_buffers(vulkan):
    munet.manual_seed(2)
    x, y = munet.randn(6, 1, 8, 8).to(vulkan), munet.randint(0, 3, (6,)).to(vulkan)
    model, opt, _ = _cnn(vulkan)()
    compiled = munet.compile(_step)
    runtime = _runtime(vulkan)
    # Earlier tests may have filled the LRU bind-group cache, whose evictions would recreate
    # groups this step needs: start it empty, so the step's working set fits.
    runtime.forget_bind_groups()
    for _ in range(3):  # the traces (the second creates no new state), then one call to fill the cache
        compiled(model, opt, x, y)
    buffers = [p._data.buffer for p in model.parameters()] + [b._data.buffer for b in model.buffers()]
    moments = [opt.state[p]["momentum_buffer"]._data.buffer for p in model.parameters()]
    runtime.max_pending = 4  # eager batches would submit every 4 dispatches; a compiled call lifts it
    try:
        munet.vulkan.synchronize()
        for _ in range(3):
            before = dict(runtime.stats())
            compiled(model, opt, x, y)
            after = runtime.stats()
            assert after["dispatches"] - before["dispatches"] > 4 * runtime.max_pending
            assert after["submits"] - before["submits"] == 1
            # nothing went through host memory: no reads, no uploads (hyperparameters are kernel parameters)
            assert after["readbacks"] == before["readbacks"] and after["uploads"] == before["uploads"]
            assert after["device_allocations"] == before["device_allocations"]  # the allocator reuses blocks
            assert after["bind_groups"] == before["bind_groups"]  # ... the same ones, so bind groups are reused
    finally:
        runtime.max_pending = 256
    assert [p._data.buffer for p in model.parameters()] + [b._data.buffer for b in model.buffers()] == buffers
    assert [opt.state[p]["momentum_buffer"]._data.buffer for p in model.parameters()] == moments


def test_describe_shows_the_wgsl_kernels_and_graph_prints(vulkan):
    x = munet.randn(4, 8).to(vulkan)
    b = munet.randn(8).to(vulkan)
    compiled = munet.compile(lambda x, b: ((x + b).relu() * 2.0).exp())
    got = compiled(x, b)
    np.testing.assert_allclose(got.cpu().numpy(), np.exp(np.maximum(x.cpu().numpy() + b.cpu().numpy(), 0) * 2), 1e-6)
    assert got.device == vulkan
    text = compiled.describe()
    assert text.startswith("plan on vulkan:0") and "fused(" in text
    assert "@compute @workgroup_size(256)" in text and "fn main(" in text and "max_f(" in text
    assert "fn pow_f(" not in text  # the shared helper functions are left out of the listing
    assert compiled.stats()["fused_groups"] == 1 and "fused" in str(compiled.graph)


def test_a_group_the_renderer_cannot_express_runs_unfused_and_says_so(vulkan, monkeypatch):
    from munet.compiler import lower_vulkan
    from munet.compiler.codegen.wgsl import UnsupportedKernelError

    def refuse(kernel):
        raise UnsupportedKernelError("render_wgsl: refused by the test")

    monkeypatch.setattr(lower_vulkan, "render_wgsl", refuse)
    x = munet.randn(5, 3).to(vulkan)
    compiled = munet.compile(lambda x: (x * 3.0 + 1.0).tanh())
    np.testing.assert_allclose(compiled(x).cpu().numpy(), (x * 3.0 + 1.0).tanh().cpu().numpy(), rtol=0, atol=0)
    stats = compiled.stats()
    assert stats["fused_groups"] == 1 and stats["generated_kernels"] == 0 and not stats["generated_code"]
    assert "refused by the test" in stats["fallback"]
    assert "unfused: member nodes run with the vulkan kernels" in compiled.describe()


def test_learning_rate_is_kernel_data_not_source(vulkan):
    """A new lr reuses the same pipelines: scalars are in the parameter block."""
    munet.manual_seed(0)
    model = nn.Linear(6, 3).to(vulkan)
    opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = munet.randn(4, 6).to(vulkan), munet.randint(0, 3, (4,)).to(vulkan)
    compiled = munet.compile(_step)
    for _ in range(2):
        compiled(model, opt, x, y)
    runtime = _runtime(vulkan)
    pipelines = runtime.stats()["pipelines"]
    before = model.weight.detach().cpu().numpy()
    opt.param_groups[0]["lr"] = 0.0
    opt.state[model.weight]["momentum_buffer"].zero_()
    opt.state[model.bias]["momentum_buffer"].zero_()
    compiled(model, opt, x, y)
    np.testing.assert_array_equal(model.weight.detach().cpu().numpy(), before)  # lr 0 and no momentum: no change
    assert runtime.stats()["pipelines"] == pipelines and compiled.stats()["traces"] == 2


def test_arguments_on_another_device_than_the_compile_device_raise(vulkan):
    compiled = munet.compile(lambda x: x * 2.0, device=vulkan)
    with pytest.raises(munet.DeviceError, match="argument 0 is on 'cpu'; move the tensors to the compile device"):
        compiled(munet.ones(3))
    assert compiled(munet.ones(3, device=vulkan)).device == vulkan


def test_transfers_inside_a_compiled_function_and_a_compiled_module(vulkan):
    x = munet.randn(4, 3).to(vulkan)
    compiled = munet.compile(lambda x: ((x * 2.0).cpu() + 1.0, (x.cpu() * 3.0).to(vulkan)))
    on_cpu, back = compiled(x)
    assert on_cpu.device == munet.device("cpu") and back.device == vulkan
    np.testing.assert_array_equal(on_cpu.numpy(), (x * 2.0).cpu().numpy() + 1.0)
    np.testing.assert_array_equal(back.cpu().numpy(), x.cpu().numpy() * 3.0)
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2)).to(vulkan).eval()
    with munet.no_grad():
        np.testing.assert_array_equal(munet.compile(model)(x).cpu().numpy(), model(x).cpu().numpy())
