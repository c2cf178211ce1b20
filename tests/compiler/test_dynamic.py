"""``munet.compile(dynamic=...)``: generated kernels take their leading size at run time.

``dynamic=True`` from the first call, ``dynamic=None`` (the default) once a call changes a dim of a
tensor argument, ``dynamic=False`` never. A new batch size traces and plans a new specialization
but compiles no kernel whose size is a run-time count (``render_c_sized``: merged leading kept
dims, or a column reduction's batch) or that slabs over its leading dim (``render_c_slabs``).
Results equal eager as with ``dynamic=False``: each such kernel runs the static kernel's loops,
so only the fused-kernel tolerances apply (a fused exp within an ulp of NumPy's: relative 1e-6;
a training step: relative 1e-5), and they are the same bits as the static kernels.
"""

import numpy as np
import pytest

import munet
import munet.nn as nn
import munet.nn.functional as F
from munet.compiler.codegen import build
from munet.compiler.codegen.c import render_c
from munet.compiler.codegen.c_slabs import render_c_sized, render_c_slabs, slab_kernel
from munet.compiler.codegen.kernel import Apply, Const, Index, Kernel, Load, Reduce, Store

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _elementwise(x, y):
    return ((x * 2 + y).relu() - y).exp()


@needs_cc
def test_a_new_batch_size_compiles_nothing_for_elementwise_kernels(record_calls):
    compiles = record_calls(build, "_compile")  # the C compilations of the test
    rng = np.random.default_rng(0)
    step = munet.compile(_elementwise, dynamic=True)
    for batch in (16, 5, 33):
        x, y = (rng.standard_normal((batch, 7, 12)).astype(np.float32) for _ in range(2))
        got = step(munet.tensor(x), munet.tensor(y))
        want = _elementwise(munet.tensor(x), munet.tensor(y)).numpy()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)  # a fused exp is within an ulp of NumPy's
        if batch == 16:
            first = len(compiles)
    assert first >= 1 and len(compiles) == first  # sizes 5 and 33 reused the binaries
    stats = step.stats()
    assert stats["dynamic"] is True and stats["traces"] == 3


@needs_cc
def test_without_dynamic_each_batch_size_compiles_its_kernels(record_calls):
    compiles = record_calls(build, "_compile")  # the C compilations of the test
    rng = np.random.default_rng(1)
    step = munet.compile(_elementwise, dynamic=False)
    for batch in (16, 5):
        x, y = (rng.standard_normal((batch, 7, 12)).astype(np.float32) for _ in range(2))
        step(munet.tensor(x), munet.tensor(y))
        if batch == 16:
            first = len(compiles)
    assert len(compiles) == 2 * first


@needs_cc
def test_dynamic_none_makes_a_changed_batch_dim_dynamic_after_the_second_size(record_calls):
    compiles = record_calls(build, "_compile")  # the C compilations of the test
    rng = np.random.default_rng(7)
    step = munet.compile(_elementwise)  # dynamic=None
    counts = []
    for batch in (16, 5, 33, 2):
        x, y = (rng.standard_normal((batch, 7, 12)).astype(np.float32) for _ in range(2))
        before = len(compiles)
        got = step(munet.tensor(x), munet.tensor(y))
        counts.append(len(compiles) - before)
        want = _elementwise(munet.tensor(x), munet.tensor(y)).numpy()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)  # a fused exp is within an ulp of NumPy's
        if batch == 16:
            assert step.stats()["dynamic_dims"] == []
    # size 16: static kernels; size 5: the dim is dynamic, size-generic kernels (run-time counts for the
    # batch, codegen/c_symbolic.py); 33 reuses them; 2 equals another int of the graph, so it is optimized on
    # its own and its kernels take the batch as their leading count (compiled once, c_slabs.py)
    assert counts[0] >= 1 and counts[1] >= 1 and counts[2] == 0 and counts[3] <= 1
    stats = step.stats()
    assert stats["dynamic"] is None and stats["dynamic_dims"] == ["argument 0 dim 0", "argument 1 dim 0"]


@needs_cc
def test_dynamic_none_reductions_over_the_dynamic_dim_equal_eager():
    def reduce_batch(x):
        return x.sum(0), x.mean(0), (x * x).amax(0), x.softmax(0).sum(1)

    rng = np.random.default_rng(8)
    step = munet.compile(reduce_batch)
    for batch in (6, 11, 3):
        x = rng.standard_normal((batch, 40)).astype(np.float32)
        for got, want in zip(step(munet.tensor(x)), reduce_batch(munet.tensor(x))):
            # float32 sums in a different order (the kernels accumulate in double): rounding of the result
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert step.stats()["dynamic_dims"] == ["argument 0 dim 0"]


def _mlp_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _mlp(seed):
    munet.manual_seed(seed)
    model = nn.Sequential(nn.Linear(20, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5))
    return model, munet.optim.AdamW(model.parameters(), lr=1e-2)


@needs_cc
def test_a_training_step_with_changing_batch_sizes_equals_eager(record_calls):
    compiles = record_calls(build, "_compile")  # the C compilations of the test
    rng = np.random.default_rng(2)
    model, opt = _mlp(3)
    ref_model, ref_opt = _mlp(3)
    step = munet.compile(_mlp_step(model, opt), dynamic=True)
    eager = _mlp_step(ref_model, ref_opt)
    counts = []
    for batch in (16, 16, 9, 9, 16, 25):
        x = rng.standard_normal((batch, 20)).astype(np.float32)
        y = rng.integers(0, 5, batch)
        before = len(compiles)
        got = step(munet.tensor(x), munet.tensor(y))
        want = eager(munet.tensor(x), munet.tensor(y))
        counts.append(len(compiles) - before)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    for p, q in zip(model.parameters(), ref_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    # a new size compiles nothing: elementwise kernels are slabs, the reductions over the batch (bias
    # and LayerNorm gradients, the loss) take their size at run time (render_c_sized)
    # (the first two calls trace the first optimizer step, which creates the state, and the steady step)
    assert counts[0] > 0 and counts[2:] == [0, 0, 0, 0]


def test_slab_kernels_qualify_only_with_a_kept_leading_dim_at_one_step_per_buffer():
    x = Load(0, (12, 1), 0, "f32")
    assert slab_kernel(Kernel("k", (5, 12), (), ["f32"], [], ["f32"], [Store(0, x)])) is not None
    # a sum over the batch (a bias gradient): slabs over the kept dim, but the batch is the
    # reduction's size, so each batch size has its own source
    col = Reduce("sum", Load(0, (12, 1, 36), 0, "f32"), "f32")
    five, nine = (render_c_slabs(Kernel("k", (3, 12), (n,), ["f32"], [], ["f32"], [Store(0, col)])) for n in (5, 9))
    assert five is not None and five != nine
    # one buffer read at two leading strides (x and its transpose)
    two = Apply("add", (Load(0, (12, 1), 0, "f32"), Load(0, (1, 12), 0, "f32")), "f32")
    assert slab_kernel(Kernel("k", (12, 12), (), ["f32"], [], ["f32"], [Store(0, two)])) is None
    # an index that varies along the leading dim
    key = Apply("cast", (Index((12, 1)),), "f32")
    assert slab_kernel(Kernel("k", (5, 12), (), [], [], ["f32"], [Store(0, key)])) is None
    # a column sum over one kept dim would be a row sum in its slab (another order): static
    column = Reduce("sum", Load(0, (1, 7), 0, "f64"), "f64")
    assert slab_kernel(Kernel("k", (7,), (40,), ["f64"], [], ["f64"], [Store(0, column)])) is None
    # the source holds no leading size
    a = render_c_slabs(Kernel("k", (5, 12), (), ["f32"], [], ["f32"], [Store(0, x)]))
    b = render_c_slabs(Kernel("k", (9, 12), (), ["f32"], [], ["f32"], [Store(0, x)]))
    assert a == b


@needs_cc
def test_a_row_reduction_slab_equals_the_static_kernel():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 300)).astype(np.float32)
    row = Reduce("sum", Apply("mul", (Load(0, (300, 1), 0, "f32"), Const(2.0, "f32")), "f32"), "f32")
    kernel = Kernel("k_rows", (6,), (300,), ["f32"], [], ["f32"], [Store(0, row)])
    static, _ = build.load_kernel(render_c(kernel), kernel.name)
    source, name = render_c_slabs(kernel)
    dynamic, _ = build.load_kernel(source, name)
    import ctypes

    outs = [np.empty(6, np.float32), np.empty(6, np.float32)]
    for fn, out, params in ((static, outs[0], [0.0]), (dynamic, outs[1], [6.0])):
        ins = (ctypes.c_void_p * 1)(x.ctypes.data)
        o = (ctypes.c_void_p * 1)(out.ctypes.data)
        p = (ctypes.c_double * 1)(*params)
        fn(ctypes.addressof(ins), ctypes.addressof(o), ctypes.addressof(p), 1)
    np.testing.assert_array_equal(outs[0], outs[1])


def _column_sum(n: int, load_strides=(1, 12)) -> Kernel:
    """A bias gradient: the sum over a batch of ``n`` rows of 12 columns."""
    return Kernel(
        "k", (12,), (n,), ["f32"], [], ["f32"], [Store(0, Reduce("sum", Load(0, load_strides, 0, "f32"), "f32"))]
    )


def test_a_reduction_over_the_batch_has_one_source_for_every_batch_size():
    five, nine = render_c_sized(_column_sum(5))[:2], render_c_sized(_column_sum(9))[:2]
    assert five is not None and five == nine and "n0" in five[0]
    # the batch is the inner dim of the buffer (a stride of 9 or 5 along the kept dim): still a
    # run-time count, but the source holds the stride, so each size has its own
    a, b = (render_c_sized(_column_sum(n, (n, 1))) for n in (5, 9))
    assert a is not None and a != b
    # a single reduced element is no count: the kept columns are counted instead
    assert render_c_sized(_column_sum(1))[2] == 12


@needs_cc
@pytest.mark.parametrize("n, strides", [(7, (1, 12)), (300, (1, 12)), (7, (7, 1)), (40, (40, 1))])
def test_a_sized_reduction_equals_the_static_kernel_bit_for_bit(n, strides):
    import ctypes

    rng = np.random.default_rng(n)
    x = rng.standard_normal(12 * n).astype(np.float32)
    kernel = _column_sum(n, strides)
    static, _ = build.load_kernel(render_c(kernel), kernel.name)
    source, name, count, _ = render_c_sized(kernel)
    assert count == (n if strides == (1, 12) else 12)  # a column sum counts the batch, a row sum its rows
    dynamic, _ = build.load_kernel(source, name)
    outs = [np.empty(12, np.float32), np.empty(12, np.float32)]
    for fn, out, params in ((static, outs[0], [0.0]), (dynamic, outs[1], [float(count)])):
        ins = (ctypes.c_void_p * 1)(x.ctypes.data)
        o = (ctypes.c_void_p * 1)(out.ctypes.data)
        p = (ctypes.c_double * 1)(*params)
        fn(ctypes.addressof(ins), ctypes.addressof(o), ctypes.addressof(p), 1)
    np.testing.assert_array_equal(outs[0], outs[1])
    want = x.reshape(n, 12).astype(np.float64).sum(0) if strides == (1, 12) else x.reshape(12, n).sum(1)
    np.testing.assert_allclose(outs[1], want, rtol=1e-6)  # a float32 sum correctly rounded (c.py)


@needs_cc
def test_dynamic_and_static_steps_give_the_same_bits():
    rng = np.random.default_rng(5)
    batches = [(rng.standard_normal((n, 20)).astype(np.float32), rng.integers(0, 5, n)) for n in (16, 16, 9, 16)]
    results = []
    for dynamic in (False, True):
        model, opt = _mlp(6)
        step = munet.compile(_mlp_step(model, opt), dynamic=dynamic)
        losses = [step(munet.tensor(x), munet.tensor(y)).item() for x, y in batches]
        results.append((losses, [p.detach().numpy().copy() for p in model.parameters()]))
    (static_losses, static_params), (dynamic_losses, dynamic_params) = results
    assert static_losses == dynamic_losses
    for a, b in zip(static_params, dynamic_params):
        np.testing.assert_array_equal(a, b)


@needs_cc
def test_dynamic_none_sequence_length_change_in_a_small_gpt_equals_eager():
    from tests.compiler.models import GPT, train_step

    rng = np.random.default_rng(9)
    munet.manual_seed(10)
    model, ref = GPT(context=12), GPT(context=12)
    ref.load_state_dict(model.state_dict())
    opt, ref_opt = (munet.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, ref))
    step = munet.compile(lambda x, y: train_step(model, opt, x, y))
    for t in (8, 8, 5, 12):
        x = rng.integers(0, 13, (3, t))
        y = rng.integers(0, 13, 3 * t)
        got = step(munet.tensor(x), munet.tensor(y)).item()
        want = train_step(ref, ref_opt, munet.tensor(x), munet.tensor(y)).item()
        np.testing.assert_allclose(got, want, rtol=1e-5)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    assert step.stats()["dynamic_dims"] == ["argument 0 dim 1", "argument 1 dim 0"]
