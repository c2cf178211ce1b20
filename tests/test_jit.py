"""munet.jit: script/trace return munet.compile's callable; save/load refuse TorchScript archives."""

import numpy as np
import pytest
import torch

import munet
from munet.compiler.compiled import CompiledFunction
from tests.reference import randn


def step(x, w):
    return (x @ w).relu().sum(dim=1)


@pytest.mark.parametrize("entry", ["script", "trace"])
def test_script_and_trace_compile(entry):
    x, w = randn(4, 3), randn(3, 5, seed=1)
    mx, mw = munet.tensor(x), munet.tensor(w)
    if entry == "script":
        compiled = munet.jit.script(step, example_inputs=[(mx, mw)])
    else:
        compiled = munet.jit.trace(step, (mx, mw))
    assert isinstance(compiled, CompiledFunction)
    assert compiled.stats()["traces"] == 1  # traced on the example inputs
    expected = step(torch.tensor(x), torch.tensor(w)).numpy()
    np.testing.assert_allclose(compiled(mx, mw).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_trace_module_with_one_tensor():
    model = munet.nn.Linear(3, 2)
    x = munet.tensor(randn(5, 3))
    compiled = munet.jit.trace(model, x)
    np.testing.assert_allclose(compiled(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "call", [lambda: munet.jit.save(munet.nn.Linear(2, 2), "m.pt"), lambda: munet.jit.load("m.pt")]
)
def test_save_and_load_refuse_torchscript(call):
    with pytest.raises(RuntimeError, match="TorchScript archives are not supported.*munet.save"):
        call()


def test_annotations_return_their_function():
    def fn(x):
        return x + 1

    for decorate in (munet.jit.ignore, munet.jit.ignore(drop=True), munet.jit.unused, munet.jit.export,
                     munet.jit.interface, munet.jit.script_if_tracing):  # fmt: skip
        assert decorate(fn) is fn
        assert decorate(fn)(1) == torch.jit.ignore(fn)(1) == 2
    assert munet.jit.annotate(list, []) == torch.jit.annotate(list[int], []) == []


@pytest.mark.parametrize(
    "obj, hint",
    [
        ([1, 2], "list[int]"),
        ([1, "a"], "list[int]"),
        ({"a": 1.0}, "dict[str, float]"),
        ({"a": 1}, "dict[str, float]"),
        ((1, "a"), "tuple[int, str]"),
        ((1, "a", 3), "tuple[int, str]"),
        ([[1], [2, 3]], "list[list[int]]"),
        (None, "Optional[int]"),
        (3, "Optional[int]"),
        ("x", "Optional[int]"),
        (3, "int"),
    ],
)
def test_isinstance_refines_like_torch(obj, hint):
    import typing

    namespace = {"Optional": typing.Optional}
    assert munet.jit.isinstance(obj, eval(hint, namespace)) is torch.jit.isinstance(obj, eval(hint, namespace))


def test_isinstance_variadic_tuples():  # TorchScript has none; MuNet checks every element
    assert munet.jit.isinstance((1, 2, 3), tuple[int, ...])
    assert not munet.jit.isinstance((1, "a"), tuple[int, ...])


def test_fork_and_wait():
    future = munet.jit.fork(lambda x, y=0: x * 2 + y, munet.ones(2), y=1)
    assert future.done() and munet.jit.wait(future).tolist() == [3.0, 3.0]
    assert isinstance(future, munet.jit.Future) and munet.jit.Future is munet.Future
    failing = munet.jit.fork(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        munet.jit.wait(failing)


def test_freeze_and_optimize_for_inference_compile_in_eval():
    model = munet.nn.Linear(3, 2)
    x = munet.tensor(randn(4, 3))
    with pytest.raises(RuntimeError, match="eval mode"):
        munet.jit.freeze(munet.jit.script(model))
    frozen = munet.jit.freeze(munet.jit.script(model.eval()))
    np.testing.assert_allclose(frozen(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    optimized = munet.jit.optimize_for_inference(munet.nn.Linear(3, 2).train())
    assert not optimized.training
    with pytest.raises(RuntimeError, match="expected a module"):
        munet.jit.freeze(lambda x: x)


def test_trace_module_traces_forward():
    model = munet.nn.Linear(3, 2)
    x = munet.tensor(randn(4, 3))
    traced = munet.jit.trace_module(model, {"forward": x})
    np.testing.assert_allclose(traced(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="forward only"):
        munet.jit.trace_module(model, {"forward": x, "other": x})


def test_no_torchscript_objects():
    compiled = munet.jit.script(lambda x: x * 2)
    assert not isinstance(compiled, munet.jit.ScriptFunction)
    assert not isinstance(munet.jit.script(munet.nn.Linear(1, 1)), munet.jit.ScriptModule)
    with pytest.raises(RuntimeError, match="no TorchScript objects"):
        munet.jit.ScriptModule()
    assert issubclass(munet.jit.Error, Exception)
    attribute = munet.jit.Attribute(3, int)
    assert attribute.value == torch.jit.Attribute(3, int).value == 3 and attribute.type is int


def test_fusion_switches_match_torch():
    assert munet.jit.onednn_fusion_enabled() is torch.jit.onednn_fusion_enabled() is False
    munet.jit.enable_onednn_fusion(True)
    assert munet.jit.onednn_fusion_enabled()
    munet.jit.enable_onednn_fusion(False)
    strategy = [("DYNAMIC", 3)]
    previous = munet.jit.set_fusion_strategy(strategy)
    assert previous == [("STATIC", 2), ("DYNAMIC", 10)]
    assert munet.jit.set_fusion_strategy(previous) == strategy
    with pytest.raises(RuntimeError, match="STATIC"):
        munet.jit.set_fusion_strategy([("FAST", 1)])
    with munet.jit.strict_fusion():
        assert (munet.ones(1) + 1).item() == 2.0
