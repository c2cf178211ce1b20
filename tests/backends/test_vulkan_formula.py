"""The vulkan kernels rendered from scalar formulas (munet/backends/vulkan/kernels_formula.py).

Special values against the cpu backend (same munet call on both devices): NaN and infinities
land where the cpu puts them, zeros keep their sign, and int32/bool follow the integer forms.
"""

from __future__ import annotations

import numpy as np
import pytest

import munet
from munet.backends.vulkan import registry  # noqa: F401 - loads the kernel modules in their order
from munet.backends.vulkan.kernels_formula import render_wgsl_function
from munet.ops._scalar import Apply, Arg, Const

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.25, -0.75, 2.5, np.inf, -np.inf, np.nan, 7.0, -0.5], np.float32)


def _check(cpu, gpu, rtol=2e-6):
    c, g = cpu.numpy(), gpu.cpu().numpy()
    assert g.dtype == c.dtype and g.shape == c.shape
    np.testing.assert_array_equal(np.isnan(g), np.isnan(c))
    finite = np.isfinite(c)
    np.testing.assert_array_equal(g[~finite & ~np.isnan(c)], c[~finite & ~np.isnan(c)])  # infinities
    np.testing.assert_allclose(g[finite], c[finite], rtol=rtol, atol=0)
    np.testing.assert_array_equal(np.signbit(g[c == 0]), np.signbit(c[c == 0]))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_binary_special_values_match_cpu(name, vulkan):
    a, b = munet.tensor(SPECIAL[:, None]), munet.tensor(SPECIAL[None, :])
    fn = getattr(munet, name)
    _check(fn(a, b), fn(a.to(vulkan), b.to(vulkan)))
    _check(fn(a, 0.5), fn(a.to(vulkan), 0.5))


@pytest.mark.parametrize("name", ["neg", "exp", "log", "sqrt", "tanh"])
def test_unary_special_values_match_cpu(name, vulkan):
    x = munet.tensor(SPECIAL)
    fn = getattr(munet, name)
    _check(fn(x), fn(x.to(vulkan)))


@pytest.mark.parametrize("weight", [0.25, 0.75, "tensor"])
def test_lerp_special_values_match_cpu(weight, vulkan):
    start, end = (munet.tensor(v) for v in np.broadcast_arrays(SPECIAL[:, None], SPECIAL[None, :]))
    w = munet.tensor(np.resize(SPECIAL, start.shape)) if weight == "tensor" else weight
    gw = w.to(vulkan) if weight == "tensor" else w
    _check(munet.lerp(start, end, w), munet.lerp(start.to(vulkan), end.to(vulkan), gw))


def test_integer_and_bool_arithmetic_match_cpu(vulkan):
    a = munet.tensor(np.array([-7, 0, 3, 100], np.int32))
    for fn in (munet.add, munet.sub, munet.mul):
        assert fn(a.to(vulkan), a.to(vulkan)).cpu().tolist() == fn(a, a).tolist()
    p = munet.tensor(np.array([True, False, True, False]))
    q = munet.tensor(np.array([True, True, False, False]))
    assert (p.to(vulkan) + q.to(vulkan)).cpu().tolist() == (p + q).tolist()
    assert (p.to(vulkan) * q.to(vulkan)).cpu().tolist() == (p * q).tolist()


def test_a_fractional_integer_literal_truncates_as_the_cpu_renderer_casts():
    half = Apply("mul", (Arg(0, "i32"), Const(-2.5, "i32")), "i32")
    assert "(a * i32(-2))" in render_wgsl_function(half, ["i32"])
    assert "(a * 0.5f)" in render_wgsl_function(Apply("mul", (Arg(0, "f32"), Const(0.5, "f32")), "f32"), ["f32"])


def _ulps(got, reference):
    """|got - reference| in units of the float32 spacing at the correctly rounded reference."""
    spacing = np.spacing(np.abs(reference.astype(np.float32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - reference) / spacing


_RNG = np.random.default_rng(7)
# inputs over each function's float32 range where results are normal (lavapipe flushes subnormals)
ACCURACY_CASES = {
    "exp": (np.exp, _RNG.uniform(-87, 88.7, 20000)),
    "exp2": (np.exp2, _RNG.uniform(-126, 127.9, 20000)),
    "expm1": (np.expm1, np.concatenate([_RNG.uniform(-1.5, 1.5, 20000), _RNG.uniform(-20, 60, 2000)])),
    "log": (np.log, np.concatenate([np.exp(_RNG.uniform(-87, 88, 20000)), _RNG.uniform(0.5, 2, 20000)])),
    "log2": (np.log2, np.concatenate([np.exp(_RNG.uniform(-87, 88, 20000)), _RNG.uniform(0.5, 2, 20000)])),
    "log1p": (np.log1p, np.concatenate([_RNG.uniform(-0.99, 3, 20000), _RNG.uniform(-1e-3, 1e-3, 2000)])),
}
# the error bounds derived in munet/backends/vulkan/wgsl.py (PRELUDE), rounded up to whole ulps
ACCURACY_ULPS = {"exp": 2, "exp2": 2, "expm1": 4, "log": 2, "log2": 2, "log1p": 4}


@pytest.mark.parametrize("name", sorted(ACCURACY_CASES))
def test_exp_and_log_are_within_their_derived_error_bounds(name, vulkan):
    reference_fn, x = ACCURACY_CASES[name]
    x = x.astype(np.float32)
    got = getattr(munet, name)(munet.tensor(x).to(vulkan)).cpu().numpy()
    errors = _ulps(got, reference_fn(x.astype(np.float64)))
    worst = int(np.argmax(errors))
    assert errors[worst] <= ACCURACY_ULPS[name], f"{name}({x[worst]!r}) = {got[worst]!r}: {errors[worst]:.2f} ulp"


def test_exp2_of_an_integer_and_log_of_a_subnormal_are_exact(vulkan):
    n = np.arange(-126, 128).astype(np.float32)
    got = munet.exp2(munet.tensor(n).to(vulkan)).cpu().numpy()
    np.testing.assert_array_equal(got, np.ldexp(np.float32(1), n.astype(np.int32)))  # NumPy's exp2(127) is an ulp off
    tiny = np.float32([1e-45, 1e-40, 2.0**-140, -1e-45])
    got = munet.log(munet.tensor(tiny).to(vulkan)).cpu().numpy()
    want = np.log(tiny.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.max(_ulps(got[:3], want[:3])) <= ACCURACY_ULPS["log"]
