"""Graph breaks (munet/compiler/breaks.py): with ``fullgraph=False`` a host read ends the graph.

Every case runs the same function eagerly on a copy of the model and compares: the compiled
segments are fused float32 kernels, so results agree within float32 rounding of reordered sums
(rtol 1e-5, atol 1e-6; the same bounds as the other compiled training tests).
"""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn
from munet.compiler import HostReadError

RTOL, ATOL = 1e-5, 1e-6


def _close(got, want, name=""):
    np.testing.assert_allclose(
        np.asarray(got.detach().numpy() if isinstance(got, munet.Tensor) else got),
        np.asarray(want.detach().numpy() if isinstance(want, munet.Tensor) else want),
        rtol=RTOL,
        atol=ATOL,
        err_msg=name,
    )


def _mlp(seed=0):
    munet.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))


def _data(rng, n=8):
    return munet.tensor(rng.standard_normal((n, 6)).astype(np.float32)), munet.tensor(rng.integers(0, 3, n))


def _step_with_item(model, opt, log):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        log.append(loss.item())  # a break in the middle of the step: backward and step come after it
        loss.backward()
        opt.step()
        return loss

    return step


@pytest.mark.parametrize("make_opt", [lambda p: munet.optim.SGD(p, lr=0.1, momentum=0.9), munet.optim.AdamW])
def test_item_in_the_middle_of_a_training_step_trains_as_eager(make_opt):
    rng = np.random.default_rng(0)
    eager_model, model = _mlp(), _mlp()
    eager_log, log = [], []
    eager = _step_with_item(eager_model, make_opt(eager_model.parameters()), eager_log)
    compiled = munet.compile(_step_with_item(model, make_opt(model.parameters()), log))
    for _ in range(4):
        x, y = _data(rng)
        _close(compiled(x, y), eager(x, y), "loss")
    np.testing.assert_allclose(log, eager_log, rtol=RTOL)
    for (name, a), b in zip(eager_model.named_parameters(), model.parameters()):
        _close(b, a, name)
        _close(b.grad, a.grad, name + ".grad")
    stats = compiled.stats()
    assert stats["graph_breaks"] == 1 and stats["graphs"] == 2
    assert "Tensor.item()" in stats["break_reasons"][0] and "log.append(loss.item())" in stats["break_reasons"][0]
    # one trace found the break; later calls run segmented (their Python records the segments), and
    # after the first step (which creates the optimizer state) the steady step's two segments are
    # compiled once and replayed
    assert stats["traces"] == 1
    compiled_before = stats["segments_compiled"]
    x, y = _data(rng)
    compiled(x, y)
    eager(x, y)
    assert compiled.stats()["segments_compiled"] == compiled_before and compiled.stats()["traces"] == 1


def _branchy(x, w):
    h = x @ w
    if h.sum() > 0:  # a data-dependent branch
        return (h * 2).relu().sum(1)
    return (h - 1).tanh().mean(1)


def test_data_dependent_branch_taken_both_ways_follows_eager():
    rng = np.random.default_rng(1)
    w = munet.tensor(np.abs(rng.standard_normal((4, 5))).astype(np.float32))
    compiled = munet.compile(_branchy)
    taken = set()
    for sign in (1, -1, 1, -1, -1):
        x = munet.tensor((sign * np.abs(rng.standard_normal((3, 4)))).astype(np.float32))
        taken.add(bool((x @ w).sum() > 0))
        _close(compiled(x, w), _branchy(x, w))
    assert taken == {True, False}
    stats = compiled.stats()
    assert stats["traces"] == 1 and stats["graph_breaks"] == 1
    assert stats["segments_compiled"] == 3  # the prefix and each branch, each compiled once
    assert "ran segmented (2 graphs" in compiled.describe() and "if h.sum() > 0:" in compiled.describe()


@pytest.mark.parametrize("index", ["mask", "masked_select", "nonzero"])
def test_boolean_mask_indexing_breaks_and_runs_eagerly(index):
    def f(x, w):
        y = x * w
        if index == "mask":
            picked = y[y > 0]
        elif index == "masked_select":
            picked = munet.masked_select(y, y > 0)
        else:
            picked = munet.nonzero(y > 0).float()
        return (picked * 3).sum() + w.sum()

    rng = np.random.default_rng(2)
    compiled = munet.compile(f)
    for _ in range(3):  # a different number of positives each time
        x = munet.tensor(rng.standard_normal((4, 5)).astype(np.float32))
        w = munet.tensor(rng.standard_normal((4, 5)).astype(np.float32))
        _close(compiled(x, w), f(x, w))
    stats = compiled.stats()
    assert stats["graph_breaks"] == 1 and "output shape that depends on the values" in stats["break_reasons"][0]


def test_mask_indexing_gradients_flow_through_the_break():
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((4, 5)).astype(np.float32)

    def f(x):
        y = x.exp()
        return (y[x > 0] ** 2).sum()

    compiled = munet.compile(f)
    for fn in (f, compiled):
        x = munet.tensor(xs, requires_grad=True)
        fn(x).backward()
        if fn is f:
            want = x.grad.numpy().copy()
    _close(x.grad, want)


class _BreakingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 12)
        self.b = nn.Linear(12, 3)

    def forward(self, x):
        h = F.gelu(self.a(x))
        if h.mean() > 0:  # a break in the middle of the forward
            h = h * 2
        return self.b(h)


def test_compiled_module_whose_forward_breaks_then_backward_outside():
    rng = np.random.default_rng(4)
    munet.manual_seed(5)
    eager = _BreakingNet()
    munet.manual_seed(5)
    model = _BreakingNet()
    compiled = munet.compile(model)
    eager_opt, opt = (munet.optim.SGD(m.parameters(), lr=0.1) for m in (eager, model))
    for _ in range(3):
        x, y = _data(rng)
        for m, fwd, o in ((eager, eager, eager_opt), (model, compiled, opt)):
            o.zero_grad()
            loss = F.cross_entropy(fwd(x), y)
            loss.backward()  # outside the compiled forward, through both segments
            o.step()
            if m is eager:
                want = loss
        _close(loss, want)
    for (name, a), b in zip(eager.named_parameters(), model.parameters()):
        _close(b, a, name)
        _close(b.grad, a.grad, name + ".grad")
    assert compiled.stats()["graph_breaks"] == 1


def test_fullgraph_true_raises_at_the_host_read():
    compiled = munet.compile(_branchy, fullgraph=True)
    x, w = munet.ones(3, 4), munet.ones(4, 5)
    with pytest.raises(HostReadError, match=r"_branchy|if h.sum\(\) > 0"):
        compiled(x, w)
    with pytest.raises(HostReadError, match="nonzero"):
        munet.compile(lambda x: x[x > 0].sum(), fullgraph=True)(x)


def test_disabled_function_called_with_traced_tensors_is_a_break():
    seen = []

    @munet.compiler.disable
    def log_norm(t):
        seen.append(float(t.norm()))
        return t * 1  # a tensor back: the next segment reads it

    def f(x):
        y = x + 1
        z = log_norm(y)
        return (z * 2).sum()

    x = munet.arange(6.0)
    compiled = munet.compile(f)
    _close(compiled(x), f(x))
    assert len(seen) == 2 and seen[0] == pytest.approx(seen[1])
    assert "munet.compiler.disable" in compiled.stats()["break_reasons"][0]


def test_explain_lists_graphs_and_breaks():
    def f(x):
        y = x.sin()
        if y.sum() > 0:
            y = y * 2
        n = int((y > 0).sum())
        return y + n

    out = munet.compiler.explain(f)(munet.arange(4.0))
    assert out.graph_count == 3 and out.graph_break_count == 2
    assert [r.reason.split(" read")[0] for r in out.break_reasons] == ["bool(tensor) (`if tensor:`)", "int(tensor)"]
    assert out.break_reasons[0].location[1] > 0 and "y.sum() > 0" in out.break_reasons[0].where
    assert len(out.ops_per_graph) == 3 and all(n > 0 for n in out.ops_per_graph)
    text = str(out)
    assert "Graph Count: 3" in text and "Graph Break Count: 2" in text and "if y.sum() > 0:" in text
    whole = munet.compiler.explain(lambda x: (x * 2).sum())(munet.arange(4.0))
    assert whole.graph_count == 1 and whole.graph_break_count == 0 and whole.break_reasons == []


def test_breaks_on_vulkan_train_as_eager_vulkan(vulkan):
    # fused WGSL float32 sums run in another order than eager vulkan's kernels: VULKAN_RTOL (2e-5)
    from tests.compiler.test_compile_vulkan import VULKAN_RTOL

    rng = np.random.default_rng(6)
    eager_model, model = _mlp().to(vulkan), _mlp().to(vulkan)
    eager_log, log = [], []
    eager = _step_with_item(eager_model, munet.optim.SGD(eager_model.parameters(), lr=0.1), eager_log)
    compiled = munet.compile(_step_with_item(model, munet.optim.SGD(model.parameters(), lr=0.1), log))
    for _ in range(3):
        x, y = _data(rng)
        compiled(x.to(vulkan), y.to(vulkan))
        eager(x.to(vulkan), y.to(vulkan))
    np.testing.assert_allclose(log, eager_log, rtol=VULKAN_RTOL)
    for (name, a), b in zip(eager_model.named_parameters(), model.parameters()):
        np.testing.assert_allclose(
            b.detach().cpu().numpy(), a.detach().cpu().numpy(), rtol=VULKAN_RTOL, atol=1e-6, err_msg=name
        )
    x = munet.tensor(rng.standard_normal((4, 5)).astype(np.float32)).to(vulkan)
    mask_sum = munet.compile(lambda t: (t[t > 0] * 2).sum())
    np.testing.assert_allclose(mask_sum(x).item(), (x[x > 0] * 2).sum().item(), rtol=VULKAN_RTOL)
    assert compiled.stats()["graph_breaks"] == 1 and compiled.stats()["backend"] == "vulkan"


def test_views_of_parameters_and_0d_values_cross_a_break_into_backward_outside():
    rng = np.random.default_rng(7)
    w = nn.Parameter(munet.tensor(rng.standard_normal((4, 3)).astype(np.float32)))

    def f(x):
        h = x @ w.t().t()  # a view of a real tensor made in the trace, saved for backward
        total = (x @ w.t().t()[:, :2]).sum()  # a 0-d value with history, crossing the break
        if h.sum() > -1e9:
            return (h * 2).sum() + total
        return h.sum()

    x = munet.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    grads = []
    for fn in (f, munet.compile(f), munet.compile(f)):
        w.grad = None
        out = fn(x)
        out.backward()
        grads.append((out.item(), w.grad.numpy().copy()))
    for value, grad in grads[1:]:
        np.testing.assert_allclose(value, grads[0][0], rtol=RTOL)
        np.testing.assert_allclose(grad, grads[0][1], rtol=RTOL, atol=ATOL)


def test_saving_a_function_that_ran_segmented_is_refused(tmp_path):
    compiled = munet.compile(_branchy)
    compiled(munet.ones(3, 4), munet.ones(4, 5))
    with pytest.raises(RuntimeError, match=r"munet.save: the last compiled call ran as 2 graphs.*if h.sum\(\) > 0"):
        munet.save(compiled, tmp_path / "step.munet")
