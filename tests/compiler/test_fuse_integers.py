"""passes/fuse.py groups integer and bool elementwise chains where the device's renderer computes
them as eager does (``CompileTarget.fused_dtypes``): int64 and bool on cpu (generated C), bool only
on vulkan (int64 is held as int32 there). Results are bit-identical to eager and to PyTorch."""

import numpy as np
import pytest
import torch

import munet
from tests.compiler.integer_chains import assert_bit_identical, cases, fused_exact_ops, fused_ops

CASES = cases()


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))


def _torch_results(fn, arrays):
    out = fn(torch, *[torch.tensor(a) for a in arrays])
    return tuple(t.numpy() for t in (out if isinstance(out, tuple) else (out,)))


def _numpy(out):
    return tuple(t.cpu().numpy() for t in (out if isinstance(out, tuple) else (out,)))


@pytest.mark.parametrize("name, fn, arrays", CASES, ids=[c[0] for c in CASES])
def test_an_integer_chain_fuses_on_cpu_and_equals_eager_and_torch(name, fn, arrays):
    tensors = [munet.tensor(a) for a in arrays]
    compiled = munet.compile(lambda *a: fn(munet, *a))
    got = _numpy(compiled(*tensors))
    assert_bit_identical(got, _numpy(fn(munet, *tensors)), name)
    assert_bit_identical(got, _torch_results(fn, arrays), name)
    stats = compiled.stats()
    assert stats["generated_kernels"] >= 1 and stats["fallback"] is None, compiled.describe()
    assert fused_exact_ops(compiled), compiled.describe()


def test_an_int64_chain_is_one_group_with_its_comparison_and_where():
    i = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    compiled = munet.compile(lambda i: munet.where(i * 3 > 2, i << 2, -i) + 1)
    got = compiled(munet.tensor(i))
    assert [n.name for n in compiled.graph.nodes] == ["fused"], compiled.describe()
    assert fused_ops(compiled) == ["mul", "gt", "bitwise_left_shift", "neg", "where", "add"]
    np.testing.assert_array_equal(got.numpy(), np.where(i * 3 > 2, i << 2, -i) + 1)


def test_integer_division_stays_unfused_on_cpu_and_a_zero_divisor_raises():
    # C cannot report a zero divisor, so the division runs as eager's kernel (which raises)
    compiled = munet.compile(lambda i, d: (i + 1) // d * 2)
    i, d = munet.tensor([3, -7, 8]), munet.tensor([2, 2, -3])
    np.testing.assert_array_equal(compiled(i, d).numpy(), (np.array([3, -7, 8]) + 1) // np.array([2, 2, -3]) * 2)
    assert "div_floor" not in fused_ops(compiled)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(i, munet.tensor([1, 0, 1]))


def test_an_integer_literal_beyond_float64_precision_stays_exact():
    i = munet.tensor([1, 3, -5])
    compiled = munet.compile(lambda i: (i * (2**62 + 1)) + 1)
    np.testing.assert_array_equal(compiled(i).numpy(), (torch.tensor([1, 3, -5]) * (2**62 + 1) + 1).numpy())


def test_a_mask_chain_fuses_on_vulkan_and_int64_stays_unfused(vulkan):
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    i = np.arange(32, dtype=np.int64).reshape(4, 8) - 16

    def f(x, i):
        mask = ((x > 0) & (x < 1)) | munet.isnan(x)
        return munet.where(mask, x * 2, -x), mask, (i * 3) ^ 5

    tensors = [munet.tensor(x).to(vulkan), munet.tensor(i).to(vulkan)]
    compiled = munet.compile(f)
    got = _numpy(compiled(*tensors))
    assert_bit_identical(got, _numpy(f(*tensors)), "vulkan masks")
    members = fused_ops(compiled)
    assert {"gt", "lt", "bitwise_and", "where"} <= set(members), compiled.describe()
    assert "bitwise_xor" not in members  # int64 on vulkan: the eager int32 kernels run
    assert compiled.stats()["fallback"] is None, compiled.describe()
