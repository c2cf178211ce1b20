"""codegen/: kernel IR rendered as C, compiled, cached on disk, and the NumPy fallback."""

import ctypes
import math

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import nn
from munet.compiler.codegen import build, cache
from munet.compiler.codegen import kernel as kernel_ir
from munet.compiler.codegen.c import render_c
from munet.compiler.codegen.kernel import Apply, Const, Kernel, Load, Param, Reduce, Store, StoreFull
from munet.compiler.codegen.kernel import contiguous_strides as contiguous
from munet.compiler.passes import fuse

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "_loaded", {})


def _call(kernel, inputs, params=(), shapes=None):
    fn, hit = build.load_kernel(render_c(kernel), kernel.name)
    shapes = shapes or [kernel.shape] * len(kernel.outputs)
    outs = [np.empty(s, np.float32 if d == "f32" else np.float64) for s, d in zip(shapes, kernel.outputs)]
    ins = (ctypes.c_void_p * len(inputs))(*[a.ctypes.data for a in inputs])
    ps = (ctypes.c_double * max(len(params), 1))(*params)
    outs_p = (ctypes.c_void_p * len(outs))(*[o.ctypes.data for o in outs])
    fn(ctypes.addressof(ins), ctypes.addressof(outs_p), ctypes.addressof(ps), 2)
    return outs, hit


@needs_cc
def test_broadcast_strided_kernel_matches_numpy_exactly():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 7), np.float32)  # read transposed: index space (7, 6)
    b = rng.standard_normal(6, np.float32)  # broadcast over rows
    x = Load(0, (1, 7), 0, "f32")
    y = Load(1, (0, 1), 0, "f32")
    s = Apply("mul", (Apply("add", (x, y), "f32"), Param(0, "f32")), "f32")
    t = Apply("where", (Apply("gt", (s, Const(0.0, "f32")), "bool"), Apply("sqrt", (s,), "f32"), s), "f32")
    kernel = Kernel("k_bcast", (7, 6), (), ["f32", "f32"], ["f64"], ["f32", "f32"], [Store(0, s), Store(1, t)])
    (s_out, t_out), _ = _call(kernel, [a, b], [0.3])
    expected = (a.T + b) * np.float32(0.3)
    np.testing.assert_array_equal(s_out, expected)
    np.testing.assert_array_equal(t_out, np.where(expected > 0, np.sqrt(np.maximum(expected, 0)), expected))


@needs_cc
def test_large_kernel_runs_across_threads_and_matches():
    a = np.random.default_rng(1).standard_normal((300, 1000))
    kernel = Kernel(
        "k_big", (300, 1000), (), ["f64"], [], ["f64"], [Store(0, Apply("exp", (Load(0, (1000, 1), 0, "f64"),), "f64"))]
    )
    assert "omp parallel" in render_c(kernel)
    (out,), _ = _call(kernel, [a])
    np.testing.assert_allclose(out, np.exp(a), rtol=1e-15)


@needs_cc
@pytest.mark.parametrize(
    "shape,strides",
    [((1 << 17,), (1,)), ((300, 1000), (1000, 1)), ((1000, 300), (1, 1000))],
    ids=["flat-chunks", "rows", "transposed-tiles"],
)
def test_every_thread_runs_the_cloned_body_and_the_split_changes_no_bits(shape, strides):
    """gcc clones no OpenMP region: the region splits the outermost loop and calls the cloned part."""
    a = np.random.default_rng(2).standard_normal(int(np.prod(shape))).astype(np.float32)
    x = Load(0, strides, 0, "f32")
    gelu_like = Apply("mul", (x, Apply("add", (Const(1.0, "f32"), Apply("erf", (x,), "f32")), "f32")), "f32")
    kernel = Kernel("k_split", shape, (), ["f32"], [], ["f32"], [Store(0, Apply("exp", (gelu_like,), "f32"))])
    source = render_c(kernel)
    part = source[source.index("MUNET_CLONES static void k_split_part(") : source.index("void k_split(")]
    assert "omp" not in part and "#pragma omp parallel num_threads(threads)" in source
    fn, _ = build.load_kernel(source, kernel.name)
    results = []
    for threads in (1, 2, 3):
        out = np.empty(shape, np.float32)
        ins = (ctypes.c_void_p * 1)(a.ctypes.data)
        outs = (ctypes.c_void_p * 1)(out.ctypes.data)
        fn(ctypes.addressof(ins), ctypes.addressof(outs), None, threads)
        results.append(out)
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])
    reference = np.exp(np.float64(a) * (1 + np.vectorize(math.erf)(np.float64(a)))).reshape(shape)
    if strides != contiguous(shape):
        reference = reference.reshape(shape[::-1]).T  # the load walks the buffer transposed
    np.testing.assert_allclose(results[0], reference, rtol=1e-5)


@needs_cc
def test_second_build_hits_the_disk_cache_and_a_corrupt_entry_is_rebuilt(tmp_path, monkeypatch):
    kernel = Kernel(
        "k_cache", (3,), (), ["f32"], [], ["f32"], [Store(0, Apply("neg", (Load(0, (1,), 0, "f32"),), "f32"))]
    )
    x = np.arange(3, dtype=np.float32)
    (out,), hit = _call(kernel, [x])
    assert hit is False and list(out) == [0, -1, -2]
    monkeypatch.setattr(build, "_loaded", {})
    (_,), hit = _call(kernel, [x])
    assert hit is True
    (entry,) = cache.cache_dir().glob("*.so")
    assert cache.entry_valid(entry)
    assert entry.parent == tmp_path / "kernels"
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not a shared library")
    garbage.replace(entry)  # a new file: the old one may still be mapped by this process
    monkeypatch.setattr(build, "_loaded", {})
    assert not cache.entry_valid(entry)
    (out,), hit = _call(kernel, [x])
    assert hit is False and list(out) == [0, -1, -2] and cache.entry_valid(entry)


def _mlp_step_pair(cc=None, monkeypatch=None):
    def make():
        munet.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
        return model, munet.optim.AdamW(model.parameters(), lr=1e-2)

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    munet.manual_seed(1)
    x, y = munet.randn(8, 12), munet.randint(0, 3, (8,))
    (m1, o1), (m2, o2) = make(), make()
    compiled = munet.compile(step)
    for _ in range(4):
        step(m1, o1, x, y)
        compiled(m2, o2, x, y)
    return m1, m2, compiled.stats()


@needs_cc
def test_compiled_adamw_step_runs_generated_code_and_matches_eager():
    # exp/log/tanh come from the C library (within an ulp of NumPy's): relative 1e-6 after 4 steps
    m1, m2, stats = _mlp_step_pair()
    assert stats["generated_code"] is True and stats["fallback"] is None
    assert stats["elementwise_kernels"] == "generated C"
    assert stats["fused_groups"] == stats["generated_kernels"] > 0
    for a, b in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6, atol=1e-7)


@needs_cc
def test_fused_arithmetic_is_bit_identical_to_eager(monkeypatch):
    # reductions sum in another order than NumPy (tests/compiler/test_fuse_reduce.py) and a turned-around
    # matmul (fuse.transpose_matmul_outputs) in another BLAS order: neither is done here
    for op in ("exp", "log", "tanh"):
        monkeypatch.delitem(kernel_ir.ELEMENTWISE_RULES, op)
    for op in ("sum", "amax"):
        monkeypatch.delitem(kernel_ir.REDUCTIONS, op)
    monkeypatch.setattr(fuse, "transpose_matmul_outputs", lambda graph: 0)
    m1, m2, stats = _mlp_step_pair()
    assert stats["generated_kernels"] > 0
    for a, b in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(b.detach().numpy(), a.detach().numpy())


@needs_cc
def test_kernels_come_from_the_cache_on_a_second_compile():
    _, _, first = _mlp_step_pair()
    build._loaded.clear()
    _, _, second = _mlp_step_pair()
    assert first["kernel_cache_hits"] < first["generated_kernels"]
    assert second["kernel_cache_hits"] == second["generated_kernels"] > 0


def test_without_a_compiler_the_numpy_plan_runs_and_stats_say_so(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/bin/cc")
    monkeypatch.setattr(fuse, "transpose_matmul_outputs", lambda graph: 0)  # BLAS sums in another order
    m1, m2, stats = _mlp_step_pair()
    assert stats["generated_code"] is False and stats["fused_groups"] > 0 and stats["generated_kernels"] == 0
    assert "numpy kernels" in stats["fallback"] and "no C compiler" in stats["fallback"]
    assert stats["elementwise_kernels"].startswith("the NumPy rendering of the scalar formulas (no C compiler")
    for a, b in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


class _CountingNumpy:
    """Stands for ``numpy`` inside lower_cpu: counts the fresh outputs the fused steps allocate."""

    def __init__(self):
        self.empty_calls = 0

    def __getattr__(self, name):
        return getattr(np, name)

    def empty(self, *args, **kwargs):
        self.empty_calls += 1
        return np.empty(*args, **kwargs)


@needs_cc
def test_fused_adamw_step_writes_the_arena_and_updates_state_in_place(monkeypatch):
    from munet.compiler import lower_cpu

    counting = _CountingNumpy()
    monkeypatch.setattr(lower_cpu, "np", counting)
    m1, m2, stats = _mlp_step_pair()
    for a, b in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6, atol=1e-7)
    assert counting.empty_calls == 0  # every fused output went to its arena view or its state
    memory = stats["memory"]
    assert memory["inplace_updates"] == 16  # every state output, as in the unfused step (test_memory)
    assert 0 < stats["arena_bytes"] < memory["naive_bytes"]


def _state_update(fn, p, g):
    """Run ``fn(p, g)`` compiled, then replay its graph with the output donated to input ``p``."""
    from munet.compiler.executable import Executable

    compiled = munet.compile(fn)
    compiled(munet.tensor(p), munet.tensor(g))
    graph = compiled.graph
    assert [n.name for n in graph.nodes] == ["fused"]
    exe = Executable(graph, "cpu", donors={graph.outputs[0]: graph.inputs[0]})
    state = p.copy()
    (out,) = exe.run([state, g.copy()])
    return exe.arena.plan, state, out


@needs_cc
def test_a_fused_state_update_read_at_its_own_index_is_written_in_place():
    rng = np.random.default_rng(3)
    p, g = rng.standard_normal((4, 5), np.float32), rng.standard_normal((4, 5), np.float32)
    plan, state, out = _state_update(lambda p, g: p * 0.9 + g * 0.1, p, g)
    assert len(plan.inplace) == 1 and out is state
    np.testing.assert_array_equal(out, p * np.float32(0.9) + g * np.float32(0.1))


@needs_cc
def test_a_fused_state_update_reading_its_input_elsewhere_does_not_clobber_it():
    # out[i, j] reads p[j, i]: writing over p row by row would read already-updated elements
    rng = np.random.default_rng(4)
    p, g = rng.standard_normal((6, 6), np.float32), rng.standard_normal((6, 6), np.float32)
    plan, state, out = _state_update(lambda p, g: p.t() * 0.5 + p * 0.25 + g, p, g)
    assert plan.inplace == {} and out is not state
    np.testing.assert_array_equal(state, p)
    np.testing.assert_array_equal(out, p.T * np.float32(0.5) + p * np.float32(0.25) + g)


def test_loads_only_at_write_index_rejects_broadcast_offset_and_transposed_loads():
    def kernel(load):
        return Kernel("k", (2, 3), (), ["f32"], [], ["f32"], [Store(0, Apply("add", (load, Const(1.0, "f32")), "f32"))])

    assert kernel_ir.loads_only_at_write_index(kernel(Load(0, (3, 1), 0, "f32")), 0)
    assert not kernel_ir.loads_only_at_write_index(kernel(Load(0, (0, 1), 0, "f32")), 0)
    assert not kernel_ir.loads_only_at_write_index(kernel(Load(0, (3, 1), 1, "f32")), 0)
    assert not kernel_ir.loads_only_at_write_index(kernel(Load(0, (1, 2), 0, "f32")), 0)
    assert not kernel_ir.loads_only_at_write_index(kernel(Load(0, (3, 1), 0, "f32")), 1)


class _ReadsAtWriteIndex:
    """An opted-in op claiming it reads its inputs at the written index (as a fused kernel may)."""

    name = "opted_in"
    view = None
    writes_planned_outputs = True

    @staticmethod
    def reads_at_write_index(node, source):
        return True


def test_no_in_place_update_when_the_node_also_reads_the_state_through_a_view():
    from munet.compiler.arena import overwrites, writes_into
    from munet.compiler.ir import Graph
    from munet.compiler.passes.memory import plan_memory
    from munet.ops._registry import OPS

    f32, cpu = munet.float32, munet.device("cpu")
    g = Graph()
    p = g.add_input((3, 3), f32, cpu, label="state")
    pt = g.add_node(OPS["permute"], [p], {"dims": (1, 0)}, [((3, 3), f32, cpu, "tensor")]).outputs[0]
    direct = g.add_node(_ReadsAtWriteIndex(), [p], {}, [((3, 3), f32, cpu, "tensor")]).outputs[0]
    both = g.add_node(_ReadsAtWriteIndex(), [p, pt], {}, [((3, 3), f32, cpu, "tensor")]).outputs[0]
    g.outputs = [both]
    assert plan_memory(g, writes_into, {both: p}, overwrites).inplace == {}
    g.nodes.remove(direct.producer)
    g.nodes.remove(both.producer)
    g.nodes.append(direct.producer)
    g.outputs = [direct]
    assert plan_memory(g, writes_into, {direct: p}, overwrites).inplace == {direct: p}


# reduction kernels (the fusion side: tests/compiler/test_fuse_reduce.py) -------------------------------


@needs_cc
@pytest.mark.parametrize("rows", [True, False])
def test_reduction_kernel_sums_rows_or_columns_with_epilogue_and_full_store(rows):
    # x (37, 300) seen as kept x reduced: rows=True reduces the contiguous dim (lanes), else the
    # outer one (the column loop); offset 300 skips x's first row
    rng = np.random.default_rng(5)
    x = rng.standard_normal((38, 300), np.float32)
    b = rng.standard_normal(300 if not rows else 37, np.float32)
    kept, red = ((37, 300), (300, 1)) if rows else ((300, 37), (1, 300))
    v = Load(0, red, 300, "f32")
    relu = Apply("maximum", (v, Const(0.0, "f32")), "f32")
    total = Reduce("sum", relu, "f32")
    peak = Reduce("max", v, "f32")
    epilogue = Apply("add", (Apply("mul", (total, Param(0, "f32")), "f32"), Load(1, (1,), 0, "f32")), "f32")
    full = (300, 1) if rows else (1, 300)  # relu written in x's own layout, (37, 300)
    kernel = Kernel(
        f"k_red_{rows}", (kept[0],), (kept[1],), ["f32", "f32"], ["f64"], ["f32", "f32", "f32"],
        [Store(0, epilogue), Store(1, peak), StoreFull(2, full, relu)],
    )  # fmt: skip
    source = render_c(kernel)
    assert ("lane0" in source) is rows and "omp parallel" not in source  # 11100 elements: one thread
    (out, mx, stored), _ = _call(kernel, [x, b], [0.5], [(kept[0],), (kept[0],), (37, 300)])
    body = x[1:]
    axis = 1 if rows else 0
    r = np.maximum(body, 0)
    np.testing.assert_array_equal(stored, r)
    want = (r.astype(np.float64).sum(axis).astype(np.float32) * np.float32(0.5)) + b
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(mx, body.max(axis))


@needs_cc
def test_reduction_kernel_over_several_dims_to_a_scalar_and_an_empty_sum():
    x = np.random.default_rng(6).standard_normal((5, 6, 7))
    # reduce dims (0, 2), keep dim 1: index space (6,), reduction space (5, 7)
    kernel = Kernel(
        "k_red_02", (6,), (5, 7), ["f64"], [], ["f64"], [Store(0, Reduce("sum", Load(0, (7, 42, 1), 0, "f64"), "f64"))]
    )
    (out,), _ = _call(kernel, [x])
    np.testing.assert_allclose(out, x.sum((0, 2)), rtol=1e-14)
    kernel = Kernel(
        "k_red_all",
        (),
        (5, 6, 7),
        ["f64"],
        [],
        ["f64"],
        [Store(0, Reduce("sum", Load(0, (42, 7, 1), 0, "f64"), "f64"))],
    )
    (out,), _ = _call(kernel, [x])
    np.testing.assert_allclose(out, x.sum(), rtol=1e-14)
    kernel = Kernel("k_red_empty", (3,), (0,), ["f64"], [], ["f64", "f64"], [
        Store(0, Reduce("sum", Load(0, (0, 1), 0, "f64"), "f64")), Store(1, Reduce("max", Load(0, (0, 1), 0, "f64"), "f64"))
    ])  # fmt: skip
    (total, peak), _ = _call(kernel, [x])
    assert list(total) == [0.0] * 3 and list(peak) == [-np.inf] * 3


@needs_cc
def test_large_reduction_runs_across_threads_with_the_same_result():
    x = np.random.default_rng(7).standard_normal((512, 1024)).astype(np.float32)
    kernel = Kernel(
        "k_red_big",
        (512,),
        (1024,),
        ["f32"],
        [],
        ["f32"],
        [Store(0, Reduce("sum", Load(0, (1024, 1), 0, "f32"), "f32"))],
    )
    assert "omp parallel" in render_c(kernel)
    fn, _ = build.load_kernel(render_c(kernel), kernel.name)
    results = []
    for threads in (1, 2):
        out = np.empty(512, np.float32)
        ins = (ctypes.c_void_p * 1)(x.ctypes.data)
        outs = (ctypes.c_void_p * 1)(out.ctypes.data)
        ps = (ctypes.c_double * 1)()
        fn(ctypes.addressof(ins), ctypes.addressof(outs), ctypes.addressof(ps), threads)
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])  # the order does not depend on threads
    np.testing.assert_array_equal(results[0], x.astype(np.float64).sum(1).astype(np.float32))


def test_loads_inside_a_reduction_never_allow_writing_in_place():
    inside = Load(0, (1, 4), 0, "f32")
    outside = Load(0, (1,), 0, "f32")
    kernel = Kernel(
        "k", (4,), (3,), ["f32"], [], ["f32"], [Store(0, Apply("add", (Reduce("sum", inside, "f32"), outside), "f32"))]
    )
    assert not kernel_ir.loads_only_at_write_index(kernel, 0)
    kernel = Kernel(
        "k",
        (4,),
        (3,),
        ["f32", "f32"],
        [],
        ["f32"],
        [Store(0, Apply("add", (Reduce("sum", inside, "f32"), Load(1, (1,), 0, "f32")), "f32"))],
    )
    assert kernel_ir.loads_only_at_write_index(kernel, 1) and not kernel_ir.loads_only_at_write_index(kernel, 0)


@needs_cc
def test_a_transposed_load_is_read_through_tiles_with_partial_edges():
    # out (100, 300) = a.T * b with a (300, 100): 16 x 256 tiles, the last ones partial
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((300, 100), np.float32), rng.standard_normal((100, 300), np.float32)
    expr = Apply("mul", (Load(0, (1, 100), 0, "f32"), Load(1, (300, 1), 0, "f32")), "f32")
    kernel = Kernel("k_tiled", (100, 300), (), ["f32", "f32"], [], ["f32"], [Store(0, expr)])
    assert "tile0[" in render_c(kernel)
    (out,), _ = _call(kernel, [a, b])
    np.testing.assert_array_equal(out, a.T * b)


@needs_cc
def test_a_value_per_row_is_not_tiled():
    # a per-channel bias over (N, C, HW): stride 1 along C but 0 along the last dim, one value per
    # row; tiling it copied each value 256 times (the conv bias add ran 2.4x slower)
    rng = np.random.default_rng(10)
    x, b = rng.standard_normal((4, 32, 300), np.float32), rng.standard_normal((1, 32, 1), np.float32)
    expr = Apply("add", (Load(0, (9600, 300, 1), 0, "f32"), Load(1, (0, 1, 0), 0, "f32")), "f32")
    kernel = Kernel("k_bias", (4, 32, 300), (), ["f32", "f32"], [], ["f32"], [Store(0, expr)])
    assert "tile" not in render_c(kernel)
    (out,), _ = _call(kernel, [x, b])
    np.testing.assert_array_equal(out, x + b)


@needs_cc
def test_float32_exp_is_correctly_rounded_with_nan_inf_and_underflow():
    rng = np.random.default_rng(9)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, 88.73, -87.3, -103.9, -104.0, -200.0, 1e-30]
    x = np.concatenate([rng.uniform(-110, 95, 200_000), rng.standard_normal(200_000), special]).astype(np.float32)
    kernel = Kernel(
        "k_expf", (x.size,), (), ["f32"], [], ["f32"], [Store(0, Apply("exp", (Load(0, (1,), 0, "f32"),), "f32"))]
    )
    assert "munet_expf(" in render_c(kernel)
    (out,), _ = _call(kernel, [x])
    with np.errstate(over="ignore"):
        exact = np.exp(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(exact))
    finite = ~np.isnan(exact)
    ulps = np.abs(out[finite].view(np.int32).astype(np.int64) - exact[finite].view(np.int32).astype(np.int64))
    assert ulps.max() <= 1 and np.mean(ulps == 0) > 0.999999


@needs_cc
def test_column_reduction_wider_than_one_block():
    from munet.compiler.codegen import c as c_renderer

    width = c_renderer.COLUMNS + 52  # a full block and a partial one
    x = np.random.default_rng(10).standard_normal((20, width)).astype(np.float32)
    total = Reduce("sum", Load(0, (1, width), 0, "f32"), "f32")
    kernel = Kernel("k_cols_wide", (width,), (20,), ["f32"], [], ["f32"], [Store(0, total)])
    assert "acc0[c]" in render_c(kernel)  # the column loop
    (out,), _ = _call(kernel, [x])
    np.testing.assert_array_equal(out, x.astype(np.float64).sum(0).astype(np.float32))
