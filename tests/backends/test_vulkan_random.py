"""Random kernels on vulkan reproduce the cpu stream (Philox4x64-10) for the same seed.

uniform, randint, randperm, bernoulli (so dropout) and multinomial are compared exactly;
normal and exponential are float32 transforms of the same bits (the cpu uses float64), so
they compare with rtol 1e-5 / atol 1e-5. Each test also checks the generators advanced alike.
"""

import numpy as np
import pytest

import munet
import munet.nn.functional as F


def pair(seed=123):
    return munet.Generator("cpu").manual_seed(seed), munet.Generator("vulkan").manual_seed(seed)


def same(gpu, cpu, rtol=0.0, atol=0.0):
    assert gpu.device.type == "vulkan" and gpu.dtype is cpu.dtype and tuple(gpu.shape) == tuple(cpu.shape)
    np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=rtol, atol=atol)


def check(draw, vulkan, rtol=0.0, atol=0.0, seed=123):
    gc, gv = pair(seed)
    for _ in range(2):  # two draws: the second starts where the first left the offset
        same(draw(gv, vulkan), draw(gc, "cpu"), rtol, atol)
    assert gc._offset == gv._offset


@pytest.mark.parametrize("n", [1, 7, 1000, 4099])
def test_uniform_exact(vulkan, n):
    check(lambda g, d: munet.rand(n, generator=g, device=d), vulkan)
    check(lambda g, d: munet.empty(3, n, device=d).uniform_(-2.5, 7.0, generator=g), vulkan, seed=2**64 - 5)


def test_counter_carry(vulkan):
    gc, gv = pair(9)
    gc._offset = gv._offset = 2**32 - 3  # the 64-bit counter crosses a 32-bit word within the draw
    same(munet.rand(64, generator=gv, device=vulkan), munet.rand(64, generator=gc))


def test_normal_and_exponential(vulkan):
    check(lambda g, d: munet.randn(2, 501, generator=g, device=d), vulkan, 1e-5, 1e-5)
    check(lambda g, d: munet.empty(999, device=d).normal_(3.0, 0.5, generator=g), vulkan, 1e-5, 1e-5)
    mean, std = munet.arange(6.0).reshape(2, 3), munet.tensor([0.5, 1.0, 2.0])
    check(lambda g, d: munet.normal(mean.to(d), std.to(d), generator=g), vulkan, 1e-5, 1e-5)
    check(lambda g, d: munet.normal(mean.to(d), 2.0, generator=g), vulkan, 1e-5, 1e-5)
    check(lambda g, d: munet.empty(777, device=d).exponential_(1.5, generator=g), vulkan, 1e-5, 1e-5)


@pytest.mark.parametrize("low,high", [(0, 10), (-5, 3), (-(2**31), 2**31 - 1), (0, 7919)])
def test_randint_exact(vulkan, low, high):
    check(lambda g, d: munet.randint(low, high, (3, 333), generator=g, device=d), vulkan)
    check(lambda g, d: munet.randint(low, high, (50,), generator=g, device=d, dtype=munet.int32), vulkan)


def test_randint_int32_full_range_and_float(vulkan):
    check(lambda g, d: munet.randint(-(2**31), 2**31, (100,), generator=g, device=d, dtype=munet.int32), vulkan)
    check(lambda g, d: munet.randint(0, 1000, (100,), generator=g, device=d, dtype=munet.float32), vulkan)


@pytest.mark.parametrize("n", [0, 1, 2, 513, 5000])
def test_randperm_exact(vulkan, n):
    check(lambda g, d: munet.randperm(n, generator=g, device=d), vulkan)


def test_bernoulli_exact(vulkan):
    p = munet.tensor(np.random.default_rng(0).random((40, 33)).astype(np.float32))
    p[0, :5] = munet.tensor([0.0, 1.0, 1e-30, 0.5, 1 - 2**-24])
    check(lambda g, d: munet.bernoulli(p.to(d), generator=g), vulkan)
    check(lambda g, d: munet.empty(1000, device=d).bernoulli_(0.3, generator=g), vulkan)


@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial(vulkan, replacement):
    probs = munet.tensor(np.random.default_rng(1).random((6, 300)).astype(np.float32))
    probs[:, ::7] = 0.0
    check(lambda g, d: munet.multinomial(probs.to(d), 40, replacement=replacement, generator=g), vulkan)
    one = munet.tensor([0.1, 0.0, 0.6, 0.3])
    check(lambda g, d: munet.multinomial(one.to(d), 3, replacement=replacement, generator=g), vulkan)


def test_multinomial_distribution(vulkan):
    probs = munet.tensor([0.1, 0.2, 0.3, 0.4])
    draws = munet.multinomial(probs.to(vulkan), 20000, replacement=True, generator=pair(5)[1]).cpu().numpy()
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / 20000, probs.numpy(), atol=0.015)


def test_dropout_fixed_seed_matches_cpu(vulkan):
    x = munet.tensor(np.random.default_rng(2).standard_normal((8, 65)).astype(np.float32))
    munet.manual_seed(77)
    cpu = F.dropout(x, 0.3)
    munet.manual_seed(77)
    gpu = F.dropout(x.to(vulkan), 0.3)
    same(gpu, cpu, 1e-6, 1e-6)
    xg = x.to(vulkan).requires_grad_(True)
    munet.manual_seed(77)
    F.dropout(xg, 0.3).sum().backward()
    np.testing.assert_allclose(xg.grad.cpu().numpy(), (cpu.numpy() != 0) / 0.7, rtol=1e-6)


def test_default_generator_per_device(vulkan):
    munet.manual_seed(11)
    a = munet.rand(5, device=vulkan)
    munet.manual_seed(11)
    same(a, munet.rand(5))
