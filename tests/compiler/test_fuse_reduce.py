"""passes/fuse.py reduction groups: prologues, epilogues, full-shape stores, and their C kernels.

Tolerance: a fused float32 sum accumulates in float64 (codegen/c.py), so it is compared with
the float64 sum of the same values at relative 1e-6 (it is the exact sum rounded to float32),
and with eager (NumPy's pairwise float32 sum) at relative 1e-5 plus 1e-6 * sum(|x|) absolute.
"""

import numpy as np
import pytest

import munet
from munet.compiler.codegen import build
from munet.compiler.codegen.kernel import Reduce, Store, StoreFull
from munet.compiler.ir import verify

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))


def _compiled(fn, *arrays):
    compiled = munet.compile(fn)
    out = compiled(*[munet.tensor(a) for a in arrays])
    verify(compiled.graph)
    return compiled, out


def _fused(compiled):
    return [n for n in compiled.graph.nodes if n.name == "fused"]


def _ops(node):
    return [m.name for m in node.attrs["group"].members if m.op.view is None]


def _kernel(node):
    group = node.attrs["group"]
    assert group.kernel is not None, "the group ran no generated kernel"
    return group.kernel


def _close(got, want, magnitude=None, rtol=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    atol = 0.0 if magnitude is None else 1e-6 * float(np.max(magnitude))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@needs_cc
def test_prologue_reduction_and_epilogue_are_one_kernel():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 40), np.float32), rng.standard_normal((3, 40), np.float32)
    compiled, out = _compiled(lambda x, y: (x * y + 1).sum(1) * 2 + 1, x, y)
    (node,) = _fused(compiled)
    assert [n.name for n in compiled.graph.nodes] == ["fused"]
    assert _ops(node) == ["mul", "add", "sum", "mul", "add"]
    kernel = _kernel(node)
    assert kernel.shape == (3,) and kernel.reduce_shape == (40,)
    (store,) = kernel.stores
    assert isinstance(store, Store) and isinstance(store.expr.args[0].args[0], Reduce)
    exact = (x.astype(np.float64) * y + 1).sum(1).astype(np.float32) * np.float32(2) + np.float32(1)
    np.testing.assert_allclose(out.numpy(), exact, rtol=1e-6)
    _close(out.numpy(), (x * y + np.float32(1)).sum(1) * np.float32(2) + np.float32(1))


@needs_cc
def test_a_prologue_value_used_elsewhere_is_stored_at_full_shape_in_the_same_pass():
    # the ReLU gradient feeds a matmul and its batch sum (the bias gradient): one pass writes both
    rng = np.random.default_rng(1)
    g, h, w = (rng.standard_normal(s, np.float32) for s in ((64, 300), (64, 300), (300, 5)))

    def fn(g, h, w):
        d = munet.where(h > 0, g, 0.0)
        return d @ w, d.sum(0)

    compiled, (mm, bias) = _compiled(fn, g, h, w)
    (node,) = _fused(compiled)
    kernel = _kernel(node)
    assert kernel.shape == (300,) and kernel.reduce_shape == (64,)
    assert sorted(type(s).__name__ for s in kernel.stores) == ["Store", "StoreFull"]
    d = np.where(h > 0, g, np.float32(0))
    np.testing.assert_array_equal(mm.numpy(), d @ w)  # the stored value is exact
    np.testing.assert_allclose(bias.numpy(), d.astype(np.float64).sum(0), rtol=1e-6, atol=1e-6)
    _close(bias.numpy(), d.sum(0), magnitude=np.abs(d).sum(0))


@needs_cc
def test_an_epilogue_reads_the_reduced_value_through_a_reshape():
    rng = np.random.default_rng(2)
    x, b = rng.standard_normal((50, 7), np.float32), rng.standard_normal(7, np.float32)
    compiled, out = _compiled(lambda x, b: x.sum(0, keepdim=True).view(-1) * 0.5 + b, x, b)
    assert [n.name for n in compiled.graph.nodes] == ["fused"]
    (node,) = _fused(compiled)
    assert _ops(node) == ["sum", "mul", "add"]
    _close(out.numpy(), x.sum(0, keepdims=True).reshape(-1) * np.float32(0.5) + b, magnitude=np.abs(x).sum(0))


@needs_cc
def test_reductions_over_the_same_dims_share_a_kernel():
    rng = np.random.default_rng(3)
    a, m = rng.standard_normal(200, np.float32), (rng.random(200) > 0.3).astype(np.float32)
    compiled, out = _compiled(lambda a, m: (a * m).sum() / m.sum(), a, m)
    (node,) = _fused(compiled)
    reduces = {e for st in _kernel(node).stores for e in st.expr.args if isinstance(e, Reduce)}
    assert len(reduces) == 2 and _ops(node).count("sum") == 2
    _close(out.numpy(), (a * m).sum() / m.sum(), rtol=2e-6)


@needs_cc
def test_a_node_reading_a_reduced_value_at_full_shape_starts_another_kernel():
    # x - max(x) needs the maximum before the first element: no second pass inside one kernel
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 33), np.float32)
    x[2, 5] = np.nan
    compiled, out = _compiled(lambda x: (x - x.amax(1, keepdim=True)).exp().sum(1), x)
    for node in _fused(compiled):
        kernel = _kernel(node)
        assert not any(isinstance(e, Reduce) for st in kernel.stores if isinstance(st, StoreFull) for e in [st.expr])
    assert (
        sum(_ops(n).count("amax") for n in _fused(compiled)) + [n.name for n in compiled.graph.nodes].count("amax") == 1
    )
    want = np.exp(x - x.max(1, keepdims=True)).sum(1)
    assert np.isnan(out.numpy()[2]) and np.isnan(want[2])
    _close(np.delete(out.numpy(), 2), np.delete(want, 2))


@needs_cc
def test_max_propagates_nan_like_numpy():
    x = np.random.default_rng(5).standard_normal((4, 300), np.float32)
    x[1, 17] = np.nan
    x[3, :] = -np.inf
    compiled, out = _compiled(lambda x: (x * 2).amax(1) + 1, x)
    (node,) = _fused(compiled)
    assert _ops(node) == ["mul", "amax", "add"]
    np.testing.assert_array_equal(out.numpy(), (x * np.float32(2)).max(1) + np.float32(1))
    compiled, out = _compiled(lambda x: (x * 2).amax(0) + 1, x)  # the column loop
    np.testing.assert_array_equal(out.numpy(), (x * np.float32(2)).max(0) + np.float32(1))


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [0, 1])  # the column loop, the row loop
def test_a_sum_reaching_infinity_is_infinite_like_numpy(dtype, dim):
    # the compensated total's correction is inf - inf = NaN there: found as "nan compiled vs inf eager"
    # by test_random_programs_with_reductions_match_eager
    x = np.random.default_rng(8).standard_normal((300, 300)).astype(dtype)
    x[5, 7] = x[9, 9] = np.inf
    x[7, 5] = -np.inf
    x[9, 1], x[1, 9] = np.inf, -np.inf  # inf and -inf in one row and in one column: NaN
    x[2, 2] = np.nan
    x[3, 4] = np.finfo(dtype).max
    compiled, out = _compiled(lambda x: (x * 2).sum(dim) + 1, x)
    (node,) = _fused(compiled)
    assert _ops(node) == ["mul", "sum", "add"]
    with np.errstate(over="ignore", invalid="ignore"):
        expected = (x * dtype(2)).sum(dim) + dtype(1)
    np.testing.assert_array_equal(np.isnan(out.numpy()), np.isnan(expected))
    np.testing.assert_array_equal(np.isposinf(out.numpy()), np.isposinf(expected))
    np.testing.assert_array_equal(np.isneginf(out.numpy()), np.isneginf(expected))
    finite = np.isfinite(expected)
    magnitude = np.abs(np.where(np.abs(x) < 1e30, x, 0) * 2).sum(dim)
    _close(out.numpy()[finite], expected[finite], magnitude=magnitude[finite])


@needs_cc
@pytest.mark.parametrize("dims", [(0,), (1,), (0, 2), (1, 2), (0, 1, 2)])
def test_sums_over_any_dims_match_float64(dims):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((9, 130, 11), np.float32)
    compiled, out = _compiled(lambda x: (x * 3).sum(dims) - 1, x)
    assert _ops(_fused(compiled)[0]) == ["mul", "sum", "sub"]
    exact = (x.astype(np.float64) * 3).sum(dims).astype(np.float32) - np.float32(1)
    np.testing.assert_allclose(out.numpy(), exact, rtol=1e-6, atol=1e-5)
    _close(out.numpy(), (x * np.float32(3)).sum(dims) - np.float32(1), magnitude=3 * np.abs(x).sum(dims))


@needs_cc
def test_a_long_float32_row_sums_more_accurately_than_numpy():
    # 2**20 values of mixed magnitude: NumPy's pairwise float32 sum drifts, float64 lanes do not
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(1 << 20) * 10.0 ** rng.integers(-3, 4, 1 << 20)).astype(np.float32) + 1
    compiled, out = _compiled(lambda x: (x * 1.5).sum(), x)
    assert _fused(compiled)
    exact = (x.astype(np.float64) * 1.5).sum()
    err = abs(float(out.numpy()) - exact)
    assert err <= abs(float(np.float32(exact)) - exact) * 1.0001 + 1e-30  # correctly rounded
    assert err <= abs(float((x * np.float32(1.5)).sum()) - exact)


@needs_cc
def test_float64_sums_are_at_least_as_accurate_as_numpy():
    import math

    rng = np.random.default_rng(10)
    x = rng.standard_normal(300_000) * 10.0 ** rng.integers(-8, 9, 300_000)
    compiled, out = _compiled(lambda x: (x * 2).sum(), x)  # * 2 is exact: a prologue to fuse
    assert _fused(compiled)
    exact = math.fsum(x) * 2
    assert abs(float(out.numpy()) - exact) <= abs(float((x * 2).sum()) - exact)
    # a column sum is compensated per column: 1e16 + 1 - 1e16 + 1 ... keeps every 1 (NumPy's loses them)
    col = np.tile(np.array([1e16, 1.0, -1e16, 1.0]), 1000)[:, None].repeat(2, axis=1)
    compiled, out = _compiled(lambda x: (x * 2).sum(0), col)
    assert _fused(compiled)
    np.testing.assert_array_equal(out.numpy(), [4000.0, 4000.0])


def test_without_a_compiler_reduction_groups_run_their_numpy_members(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/bin/cc")
    rng = np.random.default_rng(8)
    x = rng.standard_normal((5, 64), np.float32)
    compiled, out = _compiled(lambda x: x.relu().sum(1) / 64, x)
    assert _fused(compiled) and compiled.stats()["generated_code"] is False
    np.testing.assert_array_equal(out.numpy(), np.maximum(x, 0).sum(1) / np.float32(64))


@needs_cc
def test_a_bias_update_from_its_gradient_sum_is_written_in_place():
    # SGD on a bias from a batch sum: the epilogue reads the parameter at the written index
    rng = np.random.default_rng(9)
    g = rng.standard_normal((32, 20), np.float32)
    bias = munet.zeros(20, requires_grad=True)
    opt = munet.optim.SGD([bias], lr=0.1, momentum=0.9)

    def step(g):
        opt.zero_grad()
        (g * bias).sum().backward()
        opt.step()

    gt = munet.tensor(g)
    eager_bias = munet.zeros(20, requires_grad=True)
    eager_opt = munet.optim.SGD([eager_bias], lr=0.1, momentum=0.9)
    compiled = munet.compile(step)
    for _ in range(3):
        compiled(gt)
        eager_opt.zero_grad()
        (gt * eager_bias).sum().backward()
        eager_opt.step()
    _close(bias.detach().numpy(), eager_bias.detach().numpy(), magnitude=np.abs(g).sum(0))
    (node,) = _fused(compiled)  # gradient sum, momentum and parameter update: one kernel
    assert node.attrs["group"].reduce_dims == (0,) and _ops(node) == ["mul", "sum", "mul", "add", "mul", "add"]
    assert compiled.stats()["memory"]["inplace_updates"] == 2  # the parameter and its momentum buffer


# random programs mixing reductions over random dims, broadcasting and views --------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _broadcasts(a, b) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a.shape), reversed(b.shape)))


def _program(steps, x, w):
    values = [x, w, x * w]
    for kind, k, i, j, bits in steps:
        a, b = values[i % len(values)], values[j % len(values)]
        if kind == "unary":
            values.append([munet.exp, munet.relu, munet.tanh, lambda t: t * t, lambda t: -t][k % 5](a * 0.5))
        elif kind == "binary" and _broadcasts(a, b):
            values.append([munet.add, munet.sub, munet.mul, munet.maximum][k % 4](a, b))
        elif kind == "reduce" and a.ndim:
            dims = [d for d in range(a.ndim) if bits >> d & 1] or [a.ndim - 1]
            keep = bool(bits & 8)
            values.append(a.sum(dims, keepdim=keep) if k % 2 else a.amax(dims, keepdim=keep))
        elif kind == "view" and a.ndim >= 2:
            values.append(a.transpose(-1, -2) if k % 2 else a.reshape(-1))
    return sum((v.sum() for v in values[3:]), (x * w).sum())


_step = st.tuples(
    st.sampled_from(["unary", "binary", "reduce", "view"]),
    st.integers(0, 7),
    st.integers(0, 11),
    st.integers(0, 11),
    st.integers(0, 15),
)


@needs_cc
@settings(max_examples=30, deadline=None)
@given(steps=st.lists(_step, min_size=1, max_size=8), seed=st.integers(0, 1000))
def test_random_programs_with_reductions_match_eager(steps, seed):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((3, 4, 5)).astype(np.float32)
    ws = rng.standard_normal((4, 5)).astype(np.float32)

    def make_step(w):
        def step(x):
            loss = _program(steps, x, w)
            loss.backward()
            return loss

        return step

    w1 = munet.tensor(ws, requires_grad=True)
    eager = make_step(w1)(munet.tensor(xs))
    w2 = munet.tensor(ws, requires_grad=True)
    compiled = munet.compile(make_step(w2))
    out = compiled(munet.tensor(xs))
    verify(compiled.graph)
    scale = max(1.0, float(np.abs(eager.detach().numpy())))
    np.testing.assert_allclose(out.detach().numpy(), eager.detach().numpy(), rtol=1e-5, atol=1e-5 * scale)
    g1 = w1.grad.numpy()
    np.testing.assert_allclose(w2.grad.numpy(), g1, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(g1).max())))
