"""codegen/wgsl.py: kernels of the kernel IR rendered as WGSL and run on the vulkan device.

Each kernel is built by hand, dispatched the way ``lower_vulkan`` does it (outputs, then inputs,
at bindings 1..; input view offsets, then f32 parameters, in the parameter block) and compared
with NumPy, or bit for bit with the eager vulkan kernels where the renderer promises their
arithmetic.
"""

import numpy as np
import pytest

import munet
from munet import _dtype as D
from munet._device import get_backend
from munet.backends.vulkan.copies import new_view
from munet.backends.vulkan.views import VkView
from munet.backends.vulkan.wgsl import scalar_word
from munet.compiler.codegen import kernel as K
from munet.compiler.codegen.kernel import Apply, Const, Kernel, Load, Param, Reduce, Store
from munet.compiler.codegen.wgsl import UnsupportedKernelError, reduction_layout, render_wgsl, workgroups

_DTYPES = {"f32": D.float32, "bool": D.bool_}


def _kernel(shape, inputs, outputs, stores, params=(), reduce_shape=()):
    return Kernel("k", tuple(shape), tuple(reduce_shape), list(inputs), list(params), list(outputs), list(stores))


def _run(device, kernel, inputs, params=(), offsets=None):
    """Dispatch ``kernel`` on ``inputs`` (NumPy arrays, read flat from ``offsets``); its outputs."""
    backend = get_backend(munet.device(device))
    rt = backend.runtime
    offsets = offsets or [0] * len(inputs)
    views = []
    for array, offset, dt in zip(inputs, offsets, kernel.inputs):
        flat = np.concatenate([np.zeros(offset, array.dtype), np.ascontiguousarray(array).reshape(-1)])
        buffer = backend.from_numpy(flat)
        views.append(VkView(buffer, array.shape, (1,), offset, _DTYPES[dt]))
    outs = [new_view(rt, kernel.shape, _DTYPES[dt]) for dt in kernel.outputs]
    writable = [True] * len(outs) + [False] * len(views)
    words = [v.offset for v in views] + [scalar_word("f32", p) for p in params]
    source = render_wgsl(kernel)
    rt.dispatch(
        source, [o.buffer for o in outs] + [v.buffer for v in views], writable, words, rt.grid(workgroups(kernel))
    )
    return [backend.to_numpy(o) for o in outs]


def _f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _add(a, b):
    return Apply("add", (a, b), "f32")


def _mul(a, b):
    return Apply("mul", (a, b), "f32")


# rendering only ------------------------------------------------------------------------------------


def test_bindings_parameters_and_no_baked_scalars():
    x = Load(0, (1,), 0, "f32")
    k = _kernel(
        (8,),
        ["f32"],
        ["f32", "bool"],
        [Store(0, _mul(x, Param(0, "f64"))), Store(1, Apply("gt", (x, Param(0, "f64")), "bool"))],
        ["f64"],
    )
    src = render_wgsl(k)
    assert "@group(0) @binding(0) var<storage, read> P: array<u32>;" in src
    assert "@binding(1) var<storage, read_write> OUT0: array<f32>;" in src
    assert "@binding(2) var<storage, read_write> OUT1: array<u32>;" in src  # bool is u32 0/1
    assert "@binding(3) var<storage, read> IN0: array<f32>;" in src
    assert "bitcast<f32>(P[1])" in src and "IN0[P[0] + c0]" in src  # input offset, then the parameter
    assert "select(0u, 1u," in src and "fn main(" in src


def test_unsupported_kernels_raise_naming_the_problem():
    x64 = Load(0, (1,), 0, "f64")
    with pytest.raises(UnsupportedKernelError, match="f64"):
        render_wgsl(_kernel((4,), ["f64"], ["f64"], [Store(0, x64)]))
    x = Load(0, (1,), 0, "f32")  # every float32 scalar op renders (the vulkan backend's own forms)
    assert "sin(" in render_wgsl(_kernel((4,), ["f32"], ["f32"], [Store(0, Apply("sin", (x,), "f32"))]))
    rows = 1 << 17  # the eager kernel would split this row into chunks over two passes
    long_row = _kernel((), ["f32"], ["f32"], [Store(0, Reduce("sum", Load(0, (1,), 0, "f32"), "f32"))], [], (rows,))
    with pytest.raises(UnsupportedKernelError, match="two passes"):
        render_wgsl(long_row)


def test_reduction_layouts_follow_the_eager_kernel():
    row = Reduce("sum", Load(0, (40, 1), 0, "f32"), "f32")
    assert reduction_layout(_kernel((3,), ["f32"], ["f32"], [Store(0, row)], [], (40,))) == "tree"
    assert workgroups(_kernel((3,), ["f32"], ["f32"], [Store(0, row)], [], (40,))) == 3  # one per output
    short = Reduce("sum", Load(0, (8, 1), 0, "f32"), "f32")
    assert reduction_layout(_kernel((300,), ["f32"], ["f32"], [Store(0, short)], [], (8,))) == "serial"
    assert workgroups(_kernel((300,), ["f32"], ["f32"], [Store(0, short)], [], (8,))) == 2


# on the device -------------------------------------------------------------------------------------


def test_broadcast_add_relu(vulkan):
    x, b = _f32(4, 5), _f32(5, seed=1)
    expr = Apply("maximum", (_add(Load(0, (5, 1), 0, "f32"), Load(1, (0, 1), 0, "f32")), Const(0.0, "f32")), "f32")
    (got,) = _run(vulkan, _kernel((4, 5), ["f32", "f32"], ["f32"], [Store(0, expr)]), [x, b])
    np.testing.assert_array_equal(got, np.maximum(x + b, 0))


def test_transposed_and_offset_loads_and_view_offsets(vulkan):
    base = _f32(7, 5)
    # the kernel reads base[1:6].T (a folded transpose starting one row in) from a view at offset 3
    expr = _mul(Load(0, (1, 5), 5, "f32"), Const(2.0, "f32"))
    k = _kernel((5, 5), ["f32"], ["f32"], [Store(0, expr)])
    (got,) = _run(vulkan, k, [base], offsets=[3])
    np.testing.assert_array_equal(got, base[1:6].T * 2)


def test_parameters_are_data_one_pipeline_serves_every_value(vulkan):
    rt = get_backend(munet.device(vulkan)).runtime
    x = _f32(300)
    k = _kernel(
        (300,),
        ["f32"],
        ["f32"],
        [Store(0, _add(_mul(Load(0, (1,), 0, "f32"), Param(0, "f64")), Param(1, "f64")))],
        ["f64", "f64"],
    )
    (first,) = _run(vulkan, k, [x], params=[0.125, -3.0])
    pipelines = rt.stats()["pipelines"]
    (second,) = _run(vulkan, k, [x], params=[7.5, 1.0])
    assert rt.stats()["pipelines"] == pipelines
    np.testing.assert_array_equal(first, x * np.float32(0.125) + np.float32(-3.0))
    np.testing.assert_array_equal(second, x * np.float32(7.5) + np.float32(1.0))
    assert "0.125" not in render_wgsl(k) and "7.5" not in render_wgsl(k)


def test_where_cast_and_bool_outputs(vulkan):
    x = _f32(6, 3)
    mask = np.random.default_rng(2).random((6, 3)) > 0.5
    xs, ms = Load(0, (3, 1), 0, "f32"), Load(1, (3, 1), 0, "bool")
    stores = [
        Store(0, Apply("where", (ms, xs, Apply("neg", (xs,), "f32")), "f32")),
        Store(1, Apply("gt", (xs, Const(0.0, "f32")), "bool")),
        Store(2, Apply("cast", (ms,), "f32")),
        Store(3, Apply("cast", (xs,), "bool")),
    ]
    k = _kernel((6, 3), ["f32", "bool"], ["f32", "bool", "f32", "bool"], stores)
    got = _run(vulkan, k, [x, mask])
    np.testing.assert_array_equal(got[0], np.where(mask, x, -x))
    np.testing.assert_array_equal(got[1], x > 0)
    np.testing.assert_array_equal(got[2], mask.astype(np.float32))
    np.testing.assert_array_equal(got[3], x != 0)


def test_special_values_as_the_eager_kernels(vulkan):
    x = np.array([-1.0, 0.0, -0.0, 2.0, np.inf, -np.inf, np.nan, 1e-30], np.float32)
    xs = Load(0, (1,), 0, "f32")
    ops = ["log", "sqrt", "exp", "tanh", "abs"]
    stores = [Store(i, Apply(op, (xs,), "f32")) for i, op in enumerate(ops)]
    stores.append(Store(len(ops), Apply("maximum", (xs, Const(1.0, "f32")), "f32")))
    stores.append(Store(len(ops) + 1, Apply("div", (Const(1.0, "f32"), xs), "f32")))
    k = _kernel((8,), ["f32"], ["f32"] * len(stores), stores)
    got = _run(vulkan, k, [x])
    t = munet.tensor(x).to(vulkan)
    eager = [getattr(munet, op)(t) for op in ops] + [munet.maximum(t, munet.ones(8, device=vulkan)), 1.0 / t]
    for name, g, e in zip(ops + ["maximum", "reciprocal"], got, eager):
        np.testing.assert_array_equal(g, e.cpu().numpy(), err_msg=name)


@pytest.mark.parametrize("rows", [8, 40, 1000])
def test_sum_and_max_reductions_with_prologue_and_epilogue_equal_the_eager_kernels(vulkan, rows):
    x = _f32(3, rows)
    x[1, rows // 2] = np.nan  # max propagates NaN
    xs = Load(0, (rows, 1), 0, "f32")
    total = Reduce("sum", _mul(xs, xs), "f32")  # prologue x * x
    largest = Reduce("max", xs, "f32")
    stores = [Store(0, Apply("div", (total, Const(float(rows), "f32")), "f32")), Store(1, largest)]
    k = _kernel((3,), ["f32"], ["f32", "f32"], stores, [], (rows,))
    mean_sq, amax = _run(vulkan, k, [x])
    t = munet.tensor(x).to(vulkan)
    np.testing.assert_array_equal(mean_sq, ((t * t).sum(dim=1) / rows).cpu().numpy())  # the eager order
    np.testing.assert_array_equal(amax, t.amax(dim=1).cpu().numpy())
    np.testing.assert_allclose(mean_sq[[0, 2]], (x.astype(np.float64) ** 2).mean(1)[[0, 2]], rtol=1e-6)
    assert np.isnan(amax[1]) and np.isnan(mean_sq[1])


def test_reduction_over_a_leading_dim_reads_columns(vulkan):
    x = _f32(50, 4)
    col = Reduce("sum", Load(0, (1, 4), 0, "f32"), "f32")  # kept dim 1 (stride 1), reduced dim 0 (stride 4)
    k = _kernel((4,), ["f32", "f32"], ["f32"], [Store(0, _add(col, Load(1, (1,), 0, "f32")))], [], (50,))
    bias = _f32(4, seed=3)
    (got,) = _run(vulkan, k, [x, bias])
    t = munet.tensor(x).to(vulkan)
    np.testing.assert_array_equal(got, (t.sum(dim=0) + munet.tensor(bias).to(vulkan)).cpu().numpy())


def test_full_space_store_beside_its_reduction(vulkan):
    x = _f32(5, 40)
    xs = Load(0, (40, 1), 0, "f32")
    relu = Apply("maximum", (xs, Const(0.0, "f32")), "f32")
    stores = [Store(0, Reduce("sum", relu, "f32")), K.StoreFull(1, (40, 1), relu)]
    k = Kernel("k", (5,), (40,), ["f32"], [], ["f32", "f32"], stores)
    backend = get_backend(munet.device(vulkan))
    rt = backend.runtime
    inp = VkView(backend.from_numpy(x.reshape(-1)), (200,), (1,), 0, D.float32)
    sums, full = new_view(rt, (5,), D.float32), new_view(rt, (5, 40), D.float32)
    rt.dispatch(
        render_wgsl(k), [sums.buffer, full.buffer, inp.buffer], [True, True, False], [0], rt.grid(workgroups(k))
    )
    np.testing.assert_array_equal(backend.to_numpy(full), np.maximum(x, 0))
    t = munet.tensor(x).to(vulkan)
    np.testing.assert_array_equal(backend.to_numpy(sums), t.relu().sum(dim=1).cpu().numpy())


def test_float32_erf_renders_as_the_eager_erf(vulkan):
    x = np.concatenate([np.linspace(-5, 5, 1001, dtype=np.float32), np.array([np.nan, np.inf, -0.0], np.float32)])
    xs = Load(0, (1,), 0, "f32")
    expr = K.scalar.erf(xs)
    k = _kernel((x.size,), ["f32"], ["f32"], [Store(0, expr)])
    assert "erf_f(" in render_wgsl(k)
    (got,) = _run(vulkan, k, [x])
    np.testing.assert_array_equal(got, munet.erf(munet.tensor(x).to(vulkan)).cpu().numpy())


def test_in_place_update_reads_the_output_binding(vulkan):
    """``aliases``: input 0 is updated in place (a parameter step ``p - lr * g``)."""
    backend = get_backend(munet.device(vulkan))
    rt = backend.runtime
    p, g = _f32(1000), _f32(1000, seed=1)
    step = Apply("sub", (Load(0, (1,), 0, "f32"), _mul(Param(0, "f64"), Load(1, (1,), 0, "f32"))), "f32")
    k = _kernel((1000,), ["f32", "f32"], ["f32"], [Store(0, step)], ["f64"])
    src = render_wgsl(k, {0: 0})
    assert "var<storage, read> IN0" not in src and "OUT0[P[0] + c0]" in src and "in place: IN0 is OUT0" in src
    state = VkView(backend.from_numpy(p), (1000,), (1,), 0, D.float32)
    grad = VkView(backend.from_numpy(g), (1000,), (1,), 0, D.float32)
    rt.dispatch(
        src, [state.buffer, grad.buffer], [True, False], [0, 0, scalar_word("f32", 0.5)], rt.grid(workgroups(k))
    )
    np.testing.assert_array_equal(backend.to_numpy(state), p - np.float32(0.5) * g)
