"""munet.compile's PyTorch signature: backend, mode, options, disable, nn.Module.compile, munet.compiler.disable."""

import numpy as np
import pytest

import munet
from munet import nn
from munet.compiler import HostReadError
from tests.compiler.models import train_step


def _step_pair(**compile_kwargs):
    """(eager model, compiled model) after three SGD steps of the same MLP on the same data."""
    rng = np.random.default_rng(0)
    x = munet.tensor(rng.standard_normal((8, 5)).astype(np.float32))
    y = munet.tensor(rng.integers(0, 3, 8))
    models = []
    for compiled in (False, True):
        munet.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.Linear(7, 3))
        opt = munet.optim.SGD(model.parameters(), lr=0.1)
        step = munet.compile(train_step, **compile_kwargs) if compiled else train_step
        for _ in range(3):
            step(model, opt, x, y)
        models.append((model, step))
    return models


def _assert_same_parameters(a, b):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("mode", [None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_every_mode_trains_as_eager(mode):
    (eager, _), (compiled, step) = _step_pair(mode=mode)
    _assert_same_parameters(eager, compiled)
    assert step.stats()["cache_hits"] == 1 and step.stats()["mode"] == mode  # traced before and after .grad exists


def test_aot_eager_traces_without_fusion_and_inductor_fuses():
    (eager, _), (compiled, step) = _step_pair(backend="aot_eager")
    _assert_same_parameters(eager, compiled)
    assert step.stats()["cache_hits"] == 1 and step.stats()["fused_groups"] == 0
    (_, _), (_, fused) = _step_pair(backend="inductor")
    assert fused.stats()["fused_groups"] > 0


def test_eager_backend_captures_nothing_so_host_reads_work():
    calls = []

    @munet.compile(backend="eager")
    def f(x):
        calls.append(munet.compiler.is_compiling())
        return x * 2 if x.sum().item() > 0 else -x  # a host read: fine, nothing is traced

    x = munet.ones(3)
    np.testing.assert_array_equal(f(x).numpy(), [2, 2, 2])
    np.testing.assert_array_equal(f(-x).numpy(), [1, 1, 1])
    assert calls == [False, False] and f.stats()["traces"] == 0 and f.stats()["calls"] == 2


def test_decorator_with_and_without_arguments_and_disable():
    def double(x):
        return x * 2

    x = munet.arange(4.0)
    assert isinstance(munet.compile(double), munet.compiler.CompiledFunction)
    assert isinstance(munet.compile()(double), munet.compiler.CompiledFunction)
    np.testing.assert_array_equal(munet.compile(fullgraph=True, dynamic=False)(double)(x).numpy(), [0, 2, 4, 6])
    assert munet.compile(double, disable=True) is double
    assert munet.compile(disable=True)(double) is double


def test_options_set_munet_settings_and_old_keywords_still_work():
    (eager, _), (compiled, step) = _step_pair(options={"fuse": False, "cache_size": 2})
    _assert_same_parameters(eager, compiled)
    assert step.stats()["fused_groups"] == 0 and step.stats()["cache_size"] == 2
    (_, _), (_, old) = _step_pair(fuse=False, cache_size=3, optimize=True)
    assert old.stats()["fused_groups"] == 0 and old.stats()["cache_size"] == 3


@pytest.mark.parametrize(
    "kwargs, error, named",
    [
        (dict(backend="cudagraphs"), ValueError, "'cudagraphs'"),
        (dict(backend=lambda gm, inputs: gm), TypeError, "function"),
        (dict(mode="fastest"), ValueError, "'fastest'"),
        (dict(options={"epilogue_fusion": True}), ValueError, "'epilogue_fusion'"),
        (dict(options=[("fuse", False)]), TypeError, "list"),
        (dict(mode="default", options={"fuse": False}), ValueError, "mode or options"),
        (dict(backend="aot_eager", fuse=True), ValueError, "aot_eager"),
        (dict(fullgraph="yes"), TypeError, "fullgraph"),
        (dict(dynamic="auto"), TypeError, "dynamic"),
        (dict(disable=1), TypeError, "disable"),
        (dict(cache_size=0), ValueError, "cache_size"),
        (dict(unknown_keyword=1), TypeError, "unknown_keyword"),
    ],
)
def test_bad_keywords_and_values_raise_naming_them(kwargs, error, named):
    with pytest.raises(error, match=named):
        munet.compile(lambda x: x, **kwargs)


def test_module_compile_compiles_forward_in_place():
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    x = munet.randn(5, 4)
    with munet.no_grad():
        expected = model(x).numpy()
        keys = list(model.state_dict())
        assert model.compile(mode="reduce-overhead") is None
        np.testing.assert_allclose(model(x).numpy(), expected, rtol=1e-6, atol=1e-6)
        model(x)
    compiled = model._compiled_call
    assert compiled.stats()["traces"] == 1 and compiled.stats()["calls"] == 2
    assert list(model.state_dict()) == keys


def test_a_compiled_module_inside_a_compiled_step_is_traced_inline():
    (eager, _), _ = _step_pair()
    rng = np.random.default_rng(0)
    x = munet.tensor(rng.standard_normal((8, 5)).astype(np.float32))
    y = munet.tensor(rng.integers(0, 3, 8))
    munet.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.Linear(7, 3))
    model.compile()
    opt = munet.optim.SGD(model.parameters(), lr=0.1)
    step = munet.compile(train_step)
    for _ in range(3):
        step(model, opt, x, y)
    _assert_same_parameters(eager, model)
    assert model._compiled_call.stats()["calls"] == 0  # the outer trace ran the module inline


def test_disabled_function_runs_eagerly_at_trace_time_and_is_compiling_tells_where():
    seen = []

    @munet.compiler.disable
    def log(message):
        seen.append((message, munet.compiler.is_compiling()))
        return len(seen)

    @munet.compile(fullgraph=True)  # one graph: the call runs at trace time (fullgraph=False breaks there)
    def f(x):
        log(f"inside, compiling: {munet.compiler.is_compiling()}")
        return x + 1

    x = munet.zeros(2)
    f(x)
    f(x)  # replay: no Python runs
    assert seen == [("inside, compiling: True", False)] and f.stats()["cache_hits"] == 1
    assert log("outside") == 2 and not munet.compiler.is_compiling()


def test_disabled_function_meeting_traced_tensors_raises_naming_it():
    @munet.compiler.disable(reason="debug printing")
    def show(t):
        return t.numpy()

    weight = munet.ones(2)

    @munet.compiler.disable
    def make_noise():
        return munet.ones(2)

    with pytest.raises(HostReadError, match="show.*debug printing.*traced tensor"):
        munet.compile(lambda x: show(x * 2), fullgraph=True)(munet.ones(2))
    with pytest.raises(HostReadError, match="make_noise.*returned a tensor"):
        munet.compile(lambda x: x + make_noise(), fullgraph=True)(munet.ones(2))
    # a real tensor the trace has made symbolic (written in place inside the trace) is a traced tensor too
    step = munet.compile(lambda x: (weight.add_(x), munet.compiler.disable(lambda: weight.numpy())()), fullgraph=True)
    with pytest.raises(HostReadError, match="read a tensor the trace holds"):
        step(munet.ones(2))
    np.testing.assert_array_equal(weight.numpy(), [1, 1])  # the failed trace left it untouched
