"""munet.compile end to end: compiled training steps equal eager ones, guards, errors, API forms."""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn
from munet.compiler import HostReadError
from tests.compiler.models import train_step

RTOL = 1e-5


def _assert_same_state(m1, m2):
    for (name, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items()):
        np.testing.assert_allclose(
            b.numpy().astype(np.float64), a.numpy().astype(np.float64), rtol=RTOL, atol=1e-7, err_msg=name
        )


def _run_pair(make, x, y, steps, schedule=False):
    m1, o1, s1 = make()
    m2, o2, s2 = make()
    compiled = munet.compile(train_step)
    for _ in range(steps):
        eager_loss = train_step(m1, o1, x, y).item()
        compiled_loss = compiled(m2, o2, x, y).item()
        assert compiled_loss == pytest.approx(eager_loss, rel=RTOL)
        if schedule:
            s1.step()
            s2.step()
    _assert_same_state(m1, m2)
    return compiled, o1, o2


def _mlp():
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 5))
    opt = munet.optim.AdamW(model.parameters(), lr=3e-2, weight_decay=0.05)
    return model, opt, munet.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)


def test_mlp_adamw_with_scheduler_matches_eager_without_retracing():
    munet.manual_seed(1)
    x, y = munet.randn(16, 12), munet.randint(0, 5, (16,))
    compiled, o1, o2 = _run_pair(_mlp, x, y, steps=7, schedule=True)
    assert o2.param_groups[0]["lr"] == o1.param_groups[0]["lr"] < 3e-2
    stats = compiled.stats()
    # one trace creates the optimizer state, the second is the steady step; lr changes don't retrace
    assert stats["traces"] == 2 and stats["cache_hits"] == 5
    assert stats["backend"] == "cpu" and stats["kernels"] > 0 and stats["fused_groups"] > 0
    for p1, p2 in zip(o1.state.values(), o2.state.values()):
        np.testing.assert_allclose(p2["exp_avg_sq"].numpy(), p1["exp_avg_sq"].numpy(), rtol=RTOL, atol=1e-12)
        assert p2["step"].item() == p1["step"].item() == 7


def _cnn():
    munet.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 3)
    )
    opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, opt, munet.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)


def test_batchnorm_cnn_sgd_matches_eager_including_running_stats():
    munet.manual_seed(2)
    x, y = munet.randn(6, 1, 8, 8), munet.randint(0, 3, (6,))
    compiled, _, _ = _run_pair(_cnn, x, y, steps=5, schedule=True)
    assert compiled.stats()["traces"] == 2


def test_digits_mlp_matches_eager():
    from munet.datasets import load_digits

    data = load_digits()
    images, labels = (data if isinstance(data, tuple) else (data.data, data.target))[:2]
    images = munet.as_tensor(np.asarray(images, dtype=np.float32)[:64].reshape(64, -1))
    labels = munet.as_tensor(np.asarray(labels, dtype=np.int64)[:64])

    def make():
        munet.manual_seed(0)
        model = nn.Sequential(nn.Linear(images.shape[1], 64), nn.ReLU(), nn.Linear(64, 10))
        opt = munet.optim.Adam(model.parameters(), lr=1e-2)
        return model, opt, None

    _run_pair(make, images, labels, steps=5)


def test_eval_mode_and_shape_changes_retrace_a_new_specialization():
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    compiled = munet.compile(model)
    x = munet.randn(8, 4)
    with munet.no_grad():
        a = compiled(x)
        compiled(x)
        model.eval()
        b = compiled(x)
        np.testing.assert_allclose(b.numpy(), model(x).numpy(), rtol=1e-6)
        compiled(munet.randn(3, 4))
    stats = compiled.stats()
    assert stats["traces"] == 3 and stats["cache_hits"] == 1  # train (the second call replays it), eval, new shape
    assert isinstance(a, munet.Tensor) and not a.requires_grad


def test_lru_cache_evicts_and_reports():
    compiled = munet.compile(lambda x: x * 2 + 1, cache_size=2)
    for n in (1, 2, 3, 1):
        out = compiled(munet.ones(n))
        np.testing.assert_array_equal(out.numpy(), np.full(n, 3.0, np.float32))
    stats = compiled.stats()
    assert stats["traces"] == 4 and stats["evictions"] == 2 and stats["cache_entries"] == 2


def test_dtype_and_requires_grad_are_guarded():
    compiled = munet.compile(lambda x: (x * x).sum())
    compiled(munet.ones(3))
    compiled(munet.ones(3, dtype=munet.float64))
    compiled(munet.ones(3, requires_grad=True))
    compiled(munet.ones(3))
    assert compiled.stats()["traces"] == 3 and compiled.stats()["cache_hits"] == 1


@pytest.mark.parametrize("read", ["item", "bool", "numpy", "tolist", "if"])
def test_host_read_raises_naming_the_line(read):
    def fn(x):
        s = x.sum()
        if read == "item":
            s.item()
        elif read == "bool":
            bool(s)
        elif read == "numpy":
            s.numpy()
        elif read == "tolist":
            s.tolist()
        elif s > 0:  # the line the error must name
            return x
        return x

    with pytest.raises(HostReadError) as info:  # fullgraph=False breaks the graph there instead (test_graph_breaks.py)
        munet.compile(fn, fullgraph=True)(munet.ones(3))
    message = str(info.value)
    assert "test_compile.py" in message and "Tensor-dependent Python control flow cannot be compiled" in message


def test_failed_trace_leaves_parameters_and_grads_untouched():
    munet.manual_seed(0)
    model = nn.Linear(3, 1)
    before = model.weight.detach().clone()

    def fn(x):
        loss = model(x).sum()
        loss.backward()
        return loss.item()

    with pytest.raises(HostReadError):
        munet.compile(fn, fullgraph=True)(munet.ones(2, 3))
    assert model.weight.grad is None
    np.testing.assert_array_equal(model.weight.detach().numpy(), before.numpy())
    model(munet.ones(2, 3)).sum().backward()  # eager still works on the same parameters
    assert model.weight.grad is not None


def test_decorator_forms_and_module():
    @munet.compile
    def plain(x):
        return x + 1

    @munet.compile(cache_size=3)
    def with_args(x):
        return x * 3

    called = munet.compile()(lambda x: x - 1)
    x = munet.arange(4.0)
    np.testing.assert_array_equal(plain(x).numpy(), [1, 2, 3, 4])
    np.testing.assert_array_equal(with_args(x).numpy(), [0, 3, 6, 9])
    np.testing.assert_array_equal(called(x).numpy(), [-1, 0, 1, 2])
    assert with_args.stats()["cache_size"] == 3
    assert munet.compile(lambda x: x, dynamic=True).stats()["dynamic"] is True  # tests/compiler/test_dynamic.py


def test_outputs_are_ordinary_tensors_in_structures():
    compiled = munet.compile(lambda x: {"a": x + 1, "b": (x * 2, 7)})
    out = compiled(munet.ones(2))
    assert set(out) == {"a", "b"} and out["b"][1] == 7
    out["a"].add_(1)  # owns its memory
    np.testing.assert_array_equal(compiled(munet.ones(2))["a"].numpy(), [2, 2])


def test_graph_printer_and_describe():
    model = nn.Linear(3, 2)
    compiled = munet.compile(model)
    compiled(munet.ones(4, 3))
    text = str(compiled.graph)
    assert "matmul(" in text and "state parameter tensor" in text
    plan = compiled.describe()
    assert "plan on cpu" in plan and "matmul" in plan


def test_dropout_draws_fresh_masks_each_call_like_eager():
    munet.manual_seed(5)
    eager = [F.dropout(munet.ones(64), 0.5).numpy() for _ in range(3)]
    munet.manual_seed(5)
    compiled = munet.compile(lambda x: F.dropout(x, 0.5))
    got = [compiled(munet.ones(64)).numpy() for _ in range(3)]
    for a, b in zip(eager, got):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(got[0], got[1])


def test_gradients_of_leaf_arguments_are_written_back_and_accumulate_as_in_eager():
    w = munet.tensor(np.array([1.0, -2.0, 3.0], np.float32), requires_grad=True)

    def step(x, scale):
        loss = ((x * w).sum() * scale).tanh()
        loss.backward()
        return loss

    compiled = munet.compile(step)
    xs = [munet.tensor(np.array([0.1, 0.2, 0.3], np.float32), requires_grad=True) for _ in range(2)]
    for x, call in zip(xs, (compiled, step)):
        w.grad = None
        for _ in range(3):  # the second and third calls accumulate into x.grad
            call(x, 2.0)
    np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-6)
    assert compiled.stats()["traces"] == 2  # without, then with an existing x.grad
    # a fresh argument without a gradient, and one that does not require grad
    fresh = munet.tensor(np.array([0.5, 0.5, 0.5], np.float32), requires_grad=True)
    compiled(fresh, 2.0)
    plain = munet.tensor(np.array([0.5, 0.5, 0.5], np.float32))
    compiled(plain, 2.0)
    assert fresh.grad is not None and plain.grad is None


def test_saving_a_step_that_writes_argument_gradients_is_refused(tmp_path):
    w = munet.tensor(np.ones(3, np.float32), requires_grad=True)

    def step(x):
        (x * w).sum().backward()
        return w.grad

    compiled = munet.compile(step)
    compiled(munet.tensor(np.ones(3, np.float32), requires_grad=True))
    with pytest.raises(RuntimeError, match=r"writes the .grad of tensor argument\(s\) \[0\]"):
        munet.save(compiled, tmp_path / "step.munet")


def test_outputs_of_a_step_that_ran_its_own_backward_explain_why_backward_cannot_go_through():
    # a compiled function that calls backward itself keeps no autograd graph for what it returns:
    # eager's output requires grad; the compiled one does too, and its backward names why it cannot run
    model = munet.nn.Linear(4, 3)

    def step(x):
        out = model(x)
        out.sum().backward()
        return out

    compiled = munet.compile(step)
    out = compiled(munet.ones(2, 4))
    assert out.requires_grad and model(munet.ones(2, 4)).requires_grad
    with pytest.raises(RuntimeError, match="gradients do not flow back through the outputs of this compiled function"):
        out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), model(munet.ones(2, 4)).detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("index", ["x[x > 0]", "munet.nonzero(x)", "munet.unique(x)"])
def test_data_dependent_shapes_raise_the_host_read_error_naming_the_line(index):
    fn = {
        "x[x > 0]": lambda x: x[x > 0],
        "munet.nonzero(x)": lambda x: munet.nonzero(x),
        "munet.unique(x)": lambda x: munet.unique(x),
    }[index]
    with pytest.raises(HostReadError) as info:
        munet.compile(fn, fullgraph=True)(munet.randn(5))
    message = str(info.value)
    assert "test_compile.py" in message and index in message
    assert "output shape depends on the values of a traced tensor" in message


@pytest.mark.parametrize(
    "name, fn, index, expected",
    [
        (
            "embedding",
            lambda w, i: F.embedding(i, w),
            [1, 7],
            "embedding: index out of range in self (indices must be in [0, 5), got 7)",
        ),
        (
            "embedding",
            lambda w, i: F.embedding(i, w),
            [1, -1],
            "embedding: index out of range in self (indices must be in [0, 5), got -1)",
        ),
        (
            "one_hot",
            lambda w, i: F.one_hot(i, 5) * 1.0,
            [1, 5],
            "one_hot: class values must be smaller than num_classes (5), got 5",
        ),
        ("one_hot", lambda w, i: F.one_hot(i, 5) * 1.0, [-2, 1], "one_hot: class values must be non-negative, got -2"),
        ("gather", lambda w, i: w.gather(0, i.unsqueeze(1).expand(2, 3)), [0, 5], "gather: index 5 is out of bounds"),
        ("index_select", lambda w, i: w.index_select(0, i), [9, 0], "index_select: index 9 is out of bounds"),
        ("take", lambda w, i: munet.take(w, i), [15, 0], "take: index 15 is out of bounds"),
        (
            "cross_entropy",
            lambda w, i: F.cross_entropy(w[:2], i),
            [0, 3],
            "cross_entropy: target 3 is out of bounds for 3 classes",
        ),
    ],
)
def test_out_of_range_indices_at_run_time_name_the_op(name, fn, index, expected):
    compiled = munet.compile(fn)
    w = munet.randn(5, 3)
    compiled(w, munet.tensor([0, 1]))  # traced with valid indices
    with pytest.raises((IndexError, RuntimeError)) as info:
        compiled(w, munet.tensor(index))  # the same specialization replays with bad ones
    assert expected in str(info.value)
    assert compiled.stats()["traces"] == 1
    # the note names the node and the user's line that traced it (the loss, for a target's gather)
    note = "\n".join(getattr(info.value, "__notes__", []))
    assert "munet.compile: raised by the compiled call's" in note and "test_compile.py" in note
    assert f"{name}(" in note
