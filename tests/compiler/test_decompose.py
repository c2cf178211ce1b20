"""passes/decompose.py: composites replaced by their decompositions before fusion; ``standardize``
(LayerNorm forward) as fused reductions on cpu.

Tolerance: the fused sums accumulate in float64, so the compiled mean and variance differ from
the eager kernel's float32 ones in the last bits: relative 1e-5 (the issue's CPU tolerance).
"""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet.compiler.codegen import build
from tests.reference import assert_close_to_reference

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))


def _names(compiled):
    return [n.name for n in compiled.graph.nodes]


def _layer_norm_step(w, b):
    def step(x):
        x.requires_grad_(True)
        y = F.layer_norm(x, (x.shape[-1],), w, b)
        (y * y).sum().backward()
        return y, x.grad

    return step


@needs_cc
@pytest.mark.parametrize("shape", [(4, 7, 32), (3, 1), (2, 5, 1)])
def test_layer_norm_forward_and_backward_match_eager_without_a_standardize_kernel(shape):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 5).astype(np.float32)  # a mean far from 0
    w = munet.tensor(rng.standard_normal(shape[-1:]).astype(np.float32), requires_grad=True)
    b = munet.tensor(rng.standard_normal(shape[-1:]).astype(np.float32), requires_grad=True)
    step = _layer_norm_step(w, b)
    compiled = munet.compile(step)
    got = compiled(munet.tensor(x))
    w.grad = b.grad = None
    want = step(munet.tensor(x))
    w64, b64 = (munet.tensor(p.detach().numpy().astype(np.float64)) for p in (w, b))
    exact = _layer_norm_step(w64, b64)(munet.tensor(x.astype(np.float64)))
    for what, g, e, r in zip(("output", "grad of x"), got, want, exact):
        assert_close_to_reference(g, e, r, what=what)
    assert "standardize" not in _names(compiled)
    assert compiled.stats()["passes"]["decompose"] == 1


@needs_cc
def test_the_forward_is_two_reductions_and_one_elementwise_kernel():
    x = munet.tensor(np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32))
    compiled = munet.compile(lambda x: F.layer_norm(x, (64,)) * 2)
    compiled(x)
    fused = [n for n in compiled.graph.nodes if n.name == "fused"]
    reductions = [n for n in fused if n.attrs["group"].reduce_dims]
    kernels = [n for n in compiled.graph.nodes if n.name != "constant"]  # rstd's 1.0 is a folded constant
    assert len(fused) == 3 and len(reductions) == 2 and len(kernels) == 3


def test_without_fusion_the_standardize_kernel_stays():
    x = munet.tensor(np.random.default_rng(2).standard_normal((8, 64)).astype(np.float32))
    compiled = munet.compile(lambda x: F.layer_norm(x, (64,)), fuse=False)
    np.testing.assert_array_equal(compiled(x).numpy(), F.layer_norm(x, (64,)).numpy())
    assert "standardize" in _names(compiled)


def _fast_kernel_composites(x):
    """Every composite that cpu and vulkan give a fast kernel, each fed by and feeding elementwise ops."""
    return (
        F.softmax(x * 2, -1) + 1,
        F.log_softmax(x * 2, -1) + 1,
        munet.logsumexp(x * 2, -1) + 1,
        munet.nansum(x * 2, -1) + 1,
        F.layer_norm(x * 2, (x.shape[-1],)) + 1,
    )


_FAST_KERNEL_OPS = ("softmax", "log_softmax", "logsumexp", "nansum", "standardize")


@pytest.mark.parametrize("device", ["cpu", "vulkan"])
def test_a_fusing_plan_decomposes_every_fast_kernel_composite_on_every_device(device, request):
    """No compile target keeps a composite's eager kernel in a fusing plan: the decomposition is what
    fuses with the ops around it; an unfused plan keeps the kernels (eager's bits)."""
    if device == "vulkan":
        device = request.getfixturevalue("vulkan")
    elif build.find_compiler() is None:
        pytest.skip("no C compiler on this machine")
    x = munet.tensor(np.random.default_rng(3).standard_normal((6, 16)).astype(np.float32)).to(device)
    fused = munet.compile(_fast_kernel_composites)
    got = fused(x)
    assert not set(_names(fused)) & set(_FAST_KERNEL_OPS), _names(fused)
    assert fused.stats()["passes"]["decompose"] == len(_FAST_KERNEL_OPS)
    unfused = munet.compile(_fast_kernel_composites, fuse=False)
    kept = unfused(x)
    assert set(_FAST_KERNEL_OPS) <= set(_names(unfused))
    for g, k, e in zip(got, kept, _fast_kernel_composites(x)):
        np.testing.assert_array_equal(k.cpu().numpy(), e.cpu().numpy())
        np.testing.assert_allclose(g.cpu().numpy(), e.cpu().numpy(), rtol=1e-5, atol=1e-5)
