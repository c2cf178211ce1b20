"""Integer and bool chains fused on the fake cuda devices: ``passes/fuse.py`` groups them (the cuda
target's ``fused_dtypes``), the rendered CUDA C runs under the CPU emulation, and every result is
bit-identical to eager on the cpu and to PyTorch (cases: ``tests/compiler/integer_chains.py``)."""

import pytest
import torch

import munet
from tests.backends import fake_cupy
from tests.compiler.integer_chains import assert_bit_identical, cases, fused_exact_ops

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")

CASES = cases(seed=1)


def _numpy(out):
    return tuple(t.cpu().numpy() for t in (out if isinstance(out, tuple) else (out,)))


@pytest.mark.parametrize("name, fn, arrays", CASES, ids=[c[0] for c in CASES])
def test_an_integer_chain_is_a_fused_cuda_kernel_equal_to_the_cpu_and_torch(name, fn, arrays):
    host = [munet.tensor(a) for a in arrays]
    compiled = munet.compile(lambda *a: fn(munet, *a))
    got = _numpy(compiled(*[t.cuda() for t in host]))
    assert_bit_identical(got, _numpy(fn(munet, *host)), name)
    want = fn(torch, *[torch.tensor(a) for a in arrays])
    assert_bit_identical(got, tuple(t.numpy() for t in want), name)
    assert fused_exact_ops(compiled), compiled.describe()
    fused = [launch for launch, _, _ in fake_cupy.LAUNCHES if launch.startswith("fused_")]
    assert fused, fake_cupy.LAUNCHES  # the rendered kernels ran, not only eager ones


def test_index_arithmetic_with_division_is_one_kernel():
    _, fn, arrays = next(c for c in CASES if c[0] == "index_arithmetic")
    compiled = munet.compile(lambda *a: fn(munet, *a))
    compiled(*[munet.tensor(a).cuda() for a in arrays])
    assert "div_floor" in fused_exact_ops(compiled) and "remainder" in fused_exact_ops(compiled), compiled.describe()
