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
