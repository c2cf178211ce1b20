"""The compile target is part of the backend contract (munet/compiler/target.py).

A backend registered here, in a test module, with its own target compiles and runs a function:
adding a device touches no compiler file. The compiler imports no backend-private name.
"""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

import munet
from munet import _device
from munet._device import DeviceError, register_backend
from munet.backends.cpu.backend import CpuBackend
from munet.compiler.lower_cpu import CpuTarget


class CloneBackend(CpuBackend):
    """The cpu backend under another device type name."""

    def __init__(self, index: int = 0):
        super().__init__(index)
        self.device = munet.device("clonecpu", index)


class CloneTarget(CpuTarget):
    """The cpu target, counting the plans it lowers (so the test sees the compiler asked for it)."""

    built = 0

    def __init__(self, backend):
        super().__init__(backend)
        CloneTarget.built += 1


@pytest.fixture
def clone_device(monkeypatch):
    monkeypatch.setitem(_device._BACKENDS, "clonecpu", None)  # removed again after the test
    register_backend(
        "clonecpu", lambda: [(0, "clone", "CPU")], CloneBackend, package="cpu", compile_target=f"{__name__}:CloneTarget"
    )
    return munet.device("clonecpu", 0)


def test_a_backend_registered_outside_the_compiler_compiles_and_runs(clone_device):
    x = munet.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=clone_device)
    compiled = munet.compile(lambda t: (t * 2 + 1).relu().sum(dim=1))
    built = CloneTarget.built
    out = compiled(x)
    assert CloneTarget.built > built
    assert out.device == clone_device
    np.testing.assert_allclose(out.cpu().numpy(), (np.arange(6).reshape(2, 3) * 2 + 1).sum(axis=1))
    assert compiled.stats()["backend"] == "clonecpu"


def test_a_backend_without_a_target_is_refused_by_name(monkeypatch):
    monkeypatch.setitem(_device._BACKENDS, "notarget", None)
    register_backend("notarget", lambda: [(0, "bare", "CPU")], CloneBackend, package="cpu")
    with pytest.raises(DeviceError, match="'notarget' backend registered no compile target"):
        _device.compile_target("notarget:0")


def test_the_compiler_imports_no_backend_private_name():
    root = pathlib.Path(munet.__file__).parent
    private = []
    for path in sorted((root / "compiler").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("munet.backends"):
                private += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert private == []


def _device_names_in(tree: ast.AST, names: set) -> list[int]:
    """Lines where a device type name is compared with something or made into a device."""

    def names_a_device(node) -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(names_a_device(e) for e in node.elts)
        return isinstance(node, ast.Constant) and node.value in names

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(names_a_device(x) for x in [node.left, *node.comparators]):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and any(names_a_device(a) for a in node.args):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("as_device", "device", "get_backend", "compile_target", "to"):
                lines.append(node.lineno)
    return lines


def test_the_compiler_compares_no_device_by_name():
    names = set(_device._BACKENDS) | {"cuda", "webgpu"}
    root = pathlib.Path(munet.__file__).parent
    found = []
    for path in sorted((root / "compiler").rglob("*.py")):
        found += [f"{path.relative_to(root)}:{line}" for line in _device_names_in(ast.parse(path.read_text()), names)]
    assert found == []


def test_the_device_name_check_finds_a_comparison():
    names = {"cpu"}
    source = 'a = t.device.type == "cpu"\nb = x in ("cpu", "vulkan")\nc = as_device("cpu")\nd = print("cpu")\n'
    assert _device_names_in(ast.parse(source), names) == [1, 2, 3]


def test_the_cpu_target_passes_arguments_in_their_shape():
    # np.ascontiguousarray makes a 0-d array 1-d: a 0-d gradient passed straight through a compiled
    # backward came back as shape (1,) against its declared () (tests/compiler/test_graph_breaks.py)
    target = CpuTarget(_device.get_backend(munet.device("cpu")))
    scalar = munet.tensor(np.float32(2.5))
    assert target.argument(scalar).shape == ()
    base = munet.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert target.argument(base) is base._data  # contiguous: no copy
    view = base.t()
    arg = target.argument(view)
    assert arg.shape == (4, 3) and arg.flags.c_contiguous
    np.testing.assert_array_equal(arg, view.numpy())
    column = base[:, 1:2].t()[0]  # a strided 1-d view
    np.testing.assert_array_equal(target.argument(column), np.array([1.0, 5.0, 9.0], np.float32))


def test_a_0d_gradient_passed_through_a_compiled_backward_keeps_its_shape():
    x = munet.tensor(np.float32(1.5), requires_grad=True)
    y = munet.tensor(np.arange(3, dtype=np.float32), requires_grad=True)

    def f(a, b):
        return a * 1 + (b * 2).sum()  # the gradient of the 0-d output reaches a unchanged

    for fn in (f, munet.compile(f)):
        x.grad = y.grad = None
        out = fn(x, y)
        out.backward()
        assert x.grad.shape == () and float(x.grad) == 1.0
        np.testing.assert_array_equal(y.grad.numpy(), np.full(3, 2.0, np.float32))
