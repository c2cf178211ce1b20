"""Adding an op is one definition (docs/adding_ops.md): a toy elementwise op and a toy composite,
defined in a new module written at test time, run eagerly, differentiate, compile and fuse on cpu
and vulkan, and appear in the coverage table, with no kernel written anywhere."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import numpy as np
import pytest

import munet
from munet import ops
from munet._coverage import render_op_coverage

# The whole new module: an elementwise op (its formula) and a composite (its decomposition).
TOY_MODULE = """
from munet.ops._registry import Meta, apply, define
from munet.ops._scalar import scalar


def _same(x):
    return Meta(tuple(x.shape), x.dtype)


def _softsign_backward(ctx, grad):
    x = ctx.saved_tensor("self")
    return grad / (1 + x.abs()) ** 2


toy_softsign_op = define(
    "toy_softsign",
    meta=_same,
    backward=_softsign_backward,
    saves=("self",),
    formula=lambda args, dtype: scalar.div(args[0], scalar.add(1.0, scalar.abs(args[0]))),
)

toy_swish_op = define("toy_swish", meta=_same, decomposition=lambda x: x * x.sigmoid())


def toy_softsign(x):
    return apply(toy_softsign_op, x)


def toy_swish(x):
    return apply(toy_swish_op, x)
"""

NAMES = ("toy_softsign", "toy_swish")


@pytest.fixture
def toy(tmp_path):
    """Import the toy module; afterwards its ops leave the registry and every kernel table."""
    path = tmp_path / "toy_ops.py"
    path.write_text(textwrap.dedent(TOY_MODULE))
    spec = importlib.util.spec_from_file_location("toy_ops", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        yield module
    finally:
        _forget(NAMES)


def _forget(names) -> None:
    from munet.backends.cpu import kernels_formula
    from munet.backends.cpu.registry import KERNELS as CPU
    from munet.backends.cuda.registry import KERNELS as CUDA
    from munet.compiler.arena import OUT_KERNELS
    from munet.compiler.codegen.kernel import ELEMENTWISE_RULES

    tables = [CPU, CUDA, kernels_formula._RENDERED, OUT_KERNELS, ELEMENTWISE_RULES]
    if "munet.backends.vulkan.registry" in sys.modules:
        tables.append(sys.modules["munet.backends.vulkan.registry"].KERNELS)
        for backend in _open_vulkan_backends():
            tables.append(backend.kernels)
    for name in names:
        ops.OPS.pop(name, None)
        for table in tables:
            for key in (name, name + "_"):
                dict.pop(table, key, None)


def _open_vulkan_backends():
    from munet._device import _BACKENDS

    entry = _BACKENDS.get("vulkan")
    return [] if entry is None else list(entry.instances.values())


def _softsign(x):
    return x / (1 + np.abs(x))


def _devices():
    devices = ["cpu"]
    if munet.vulkan.is_available():
        devices.append("vulkan:0")
    return devices


@pytest.mark.parametrize("device", _devices())
def test_the_toy_ops_run_and_differentiate(toy, device):
    data = np.array([[-3.0, -0.5, 0.0], [0.25, 2.0, -0.0]], np.float32)
    x = munet.tensor(data, device=device, requires_grad=True)
    y = toy.toy_softsign(x)
    np.testing.assert_allclose(y.detach().cpu().numpy(), _softsign(data), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), 1 / (1 + np.abs(data)) ** 2, rtol=1e-6)

    x.grad = None
    z = toy.toy_swish(x)
    sig = 1 / (1 + np.exp(-data))
    np.testing.assert_allclose(z.detach().cpu().numpy(), data * sig, rtol=1e-6, atol=1e-7)
    z.sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), sig + data * sig * (1 - sig), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("device", _devices())
def test_the_toy_ops_compile_and_fuse(toy, device, tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))

    def f(x):
        return toy.toy_swish(toy.toy_softsign(x) * 2.0 + 1.0)

    x = munet.randn(64, 33, device=device)
    compiled = munet.compile(f)
    got = compiled(x)
    np.testing.assert_allclose(got.cpu().numpy(), f(x).cpu().numpy(), rtol=1e-5, atol=1e-6)
    stats = compiled.stats()
    assert stats["fused_groups"] >= 1
    assert stats["kernels"] == 1, compiled.describe()  # softsign, the arithmetic and swish's ops: one kernel


def test_the_toy_ops_appear_in_the_coverage_table(toy):
    import munet.backends.vulkan.registry  # noqa: F401 - the vulkan column is read from its table

    table = render_op_coverage()
    header = next(line for line in table.splitlines() if line.startswith("| op |"))
    softsign = next(line for line in table.splitlines() if line.startswith("| `toy_softsign` |"))
    cells = dict(zip(header.split("|"), softsign.split("|")))
    missing = [column.strip() for column, cell in cells.items() if "**missing**" in cell]
    assert missing == [] and softsign.count("yes") >= 3, softsign
    swish = next(line for line in table.splitlines() if line.startswith("| `toy_swish` |"))
    assert "decomposition" in swish and "fast kernel" not in swish, swish


def test_the_table_forgets_them_afterwards():
    assert "toy_softsign" not in render_op_coverage()
