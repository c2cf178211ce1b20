"""passes/remat.py: fused kernels recompute cheap elementwise values from their producers' inputs.

Recomputed values come from the same member nodes rendered by the same code, so a plan with the
pass gives bit for bit the results of the plan without it (``options={"remat": False}``).
"""

import math

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn
from tests.compiler.models import train_step


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))


def _fused(graph):
    return [n for n in graph.nodes if n.name == "fused"]


def _compiled_pair(fn, *arrays):
    """``fn`` compiled with and without the pass, each called once on ``arrays``: ((compiled, out), ...)."""
    runs = []
    for remat in (True, False):
        compiled = munet.compile(fn, options={"remat": remat})
        runs.append((compiled, compiled(*[munet.tensor(a) for a in arrays])))
    return runs


def _three_factors(x, w, expensive=False):
    # one kernel computes a, b, c, a + b + c and b * c; the matmul splits off the kernel reading y,
    # which reads a and b * c
    a, b, c = x * 0.5, munet.exp(x) if expensive else x + 1.0, x * x
    y = (a + b + c) @ w
    return y * a + b * c


def test_values_only_the_next_kernel_reads_are_recomputed_there():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((32, 32), np.float32), rng.standard_normal((32, 32), np.float32)
    (with_pass, out), (without, reference) = _compiled_pair(_three_factors, x, w)
    x_value, w_value = with_pass.graph.inputs
    first, matmul, second = with_pass.graph.nodes
    assert [n.name for n in (first, matmul, second)] == ["fused", "matmul", "fused"]
    assert first.outputs == [matmul.args[0]]  # a + b + c only; without the pass a and b * c too
    assert [len(n.outputs) for n in _fused(without.graph)] == [3, 1]
    assert second.inputs() == [matmul.outputs[0], x_value]  # y and x instead of y, a and b * c
    assert second.attrs["group"].recomputed == 4  # x * 0.5, x + 1, x * x, b * c
    assert with_pass.stats()["passes"]["remat"] == 2 and "remat" not in without.stats()["passes"]
    assert "(4 recomputed)" in with_pass.describe()
    np.testing.assert_array_equal(out.numpy(), reference.numpy())


def test_an_expensive_op_the_producer_still_computes_is_not_computed_twice():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((32, 32), np.float32), rng.standard_normal((32, 32), np.float32)
    (with_pass, out), (_, reference) = _compiled_pair(lambda x, w: _three_factors(x, w, expensive=True), x, w)
    first, _, second = with_pass.graph.nodes
    assert len(first.outputs) == 2  # a + b + c, and b * c: exp(x) is in the first kernel's sum too
    assert [m.name for m in second.attrs["group"].members][:1] == ["mul"]  # x * 0.5 only
    assert with_pass.stats()["passes"]["remat"] == 1
    np.testing.assert_array_equal(out.numpy(), reference.numpy())


def test_a_value_is_stored_when_recomputing_it_reads_as_much_as_it_saves():
    def fn(x, z, w):
        a = x + z  # recomputing a reads x and z: two loads where storing a costs a store and a load
        return ((a * a) @ w) * a

    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((16, 16), np.float32) for _ in range(3)]
    (with_pass, out), (_, reference) = _compiled_pair(fn, *arrays)
    assert with_pass.stats()["passes"]["remat"] == 0
    assert all(n.attrs["group"].recomputed == 0 for n in _fused(with_pass.graph))
    np.testing.assert_array_equal(out.numpy(), reference.numpy())


def test_a_value_read_elsewhere_too_is_stored():
    def fn(x, w):
        a, b, c = x * 0.5, x + 1.0, x * x
        y = (a + b + c) @ w
        return y * a + b * c, b  # b is a result: it is stored anyway

    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((8, 8), np.float32), rng.standard_normal((8, 8), np.float32)
    (with_pass, (out, b)), (_, (reference, reference_b)) = _compiled_pair(fn, x, w)
    assert with_pass.stats()["passes"]["remat"] == 2  # a and b * c
    first = _fused(with_pass.graph)[0]
    assert len(first.outputs) == 2  # a + b + c and the result b
    np.testing.assert_array_equal(out.numpy(), reference.numpy())
    np.testing.assert_array_equal(b.numpy(), reference_b.numpy())


def _written_gelu(x):
    """GELU written out with elementwise ops, as model code often has it: autograd differentiates each
    op, so the backward reads x/2, 1 + erf(x/sqrt 2) and exp(-x^2/2). (``F.gelu`` has one backward
    formula: its fused forward kernel stores the derivative itself and leaves nothing to recompute.)"""
    return x * 0.5 * (1.0 + munet.erf(x * (1.0 / math.sqrt(2.0))))


class _GeluMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.out = nn.Linear(12, 48), nn.Linear(48, 5)

    def forward(self, x):
        return self.out(_written_gelu(self.fc(x)))


def _train(remat: bool, steps: int = 3, device="cpu"):
    munet.manual_seed(0)
    model = _GeluMLP().to(device)
    opt = munet.optim.AdamW(model.parameters(), lr=1e-2)
    compiled = munet.compile(train_step, options={"remat": remat})
    x, y = munet.randn(64, 12).to(device), munet.randint(0, 5, (64,)).to(device)
    losses = [compiled(model, opt, x, y).item() for _ in range(steps)]
    return compiled, losses, [p.detach().cpu().numpy().copy() for p in model.parameters()]


def test_a_gelu_training_step_recomputes_gelus_backward_factors_bit_for_bit():
    compiled, losses, params = _train(remat=True)
    _, reference_losses, reference_params = _train(remat=False)
    # GELU's forward kernel stored x/2, 1 + erf(x/sqrt 2) and exp(-x^2/2) for the backward: the
    # backward's kernel recomputes x/2 and the exp (which the forward no longer computes), not erf
    (forward_gelu,) = [n for n in _fused(compiled.graph) if "erf" in [m.name for m in n.attrs["group"].members]]
    assert len(forward_gelu.outputs) == 2  # GELU's output and 1 + erf
    assert "exp" not in [m.name for m in forward_gelu.attrs["group"].members]
    # GELU's x/2 and exp(-x^2/2); cross_entropy's exp(logits - max) is no longer a stored value on cpu,
    # where its integer target mask fuses into the same kernel (integer fusion, h/infra)
    assert compiled.stats()["passes"]["remat"] == 2
    assert "recomputed)" in compiled.describe()
    assert losses == reference_losses
    for got, want in zip(params, reference_params):
        np.testing.assert_array_equal(got, want)


def test_f_gelus_backward_reads_one_stored_factor_and_leaves_nothing_to_recompute():
    class Model(_GeluMLP):
        def forward(self, x):
            return self.out(F.gelu(self.fc(x)))

    munet.manual_seed(0)
    model = Model()
    opt = munet.optim.AdamW(model.parameters(), lr=1e-2)
    compiled = munet.compile(train_step)
    compiled(model, opt, munet.randn(64, 12), munet.randint(0, 5, (64,)))
    # gelu_backward's decomposition joins GELU's forward kernel: it writes GELU's output and
    # Phi(x) + x * phi(x), the one factor the backward multiplies the incoming gradient by
    (forward_gelu,) = [n for n in _fused(compiled.graph) if "erf" in [m.name for m in n.attrs["group"].members]]
    assert len(forward_gelu.outputs) == 2 and "exp" in [m.name for m in forward_gelu.attrs["group"].members]
    assert compiled.stats()["passes"]["remat"] == 0


def test_a_gelu_training_step_on_vulkan_recomputes_and_matches_the_plan_without(vulkan):
    # WGSL compilers may contract a * b + c differently in the two plans' kernels: not bitwise there
    compiled, losses, params = _train(remat=True, device=vulkan)
    _, reference_losses, reference_params = _train(remat=False, device=vulkan)
    assert compiled.stats()["backend"] == "vulkan" and compiled.stats()["passes"]["remat"] == 3
    np.testing.assert_allclose(losses, reference_losses, rtol=2e-5)
    for got, want in zip(params, reference_params):
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_remat_must_be_a_bool():
    with pytest.raises(TypeError, match=r"options\['remat'\] must be a bool, got str"):
        munet.compile(lambda x: x, options={"remat": "yes"})


def _module_gradients(remat: bool):
    munet.manual_seed(0)
    model = _GeluMLP()
    compiled = munet.compile(model, options={"remat": remat})
    x = munet.randn(64, 12)
    loss = compiled(x).square().mean()
    loss.backward()
    return compiled, loss.item(), [p.grad.numpy().copy() for p in model.parameters()]


def test_a_compiled_modules_backward_recomputes_gelu_from_the_saved_linear_output():
    compiled, loss, grads = _module_gradients(remat=True)
    without, reference_loss, reference_grads = _module_gradients(remat=False)
    report, reference_report = compiled.stats()["passes"], without.stats()["passes"]
    # without: GELU's output (for out's weight gradient, in its own layout), x / 2, 1 + erf and
    # exp(-x^2 / 2); with: fc's output and erf's (erf is not computed twice), besides the input and the weights
    assert report["recomputed_in_backward"] == 4 and "recomputed_in_backward" not in reference_report
    hidden = [
        [
            v
            for v in c._compiled._last.backward_graph.inputs
            if v.source[0] == "saved" and v.shape in ((64, 48), (48, 64))
        ]
        for c in (compiled, without)
    ]
    assert [len(h) for h in hidden] == [2, 4]
    assert loss == reference_loss
    for got, want in zip(grads, reference_grads):
        np.testing.assert_array_equal(got, want)
