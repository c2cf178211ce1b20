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
