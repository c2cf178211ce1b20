"""Generated kernels for primitive nodes on cpu: ``max_pool`` values and indices from one window
kernel (kernel IR ``argmax``), the gather form of its gradient's scatter, and the col2im of a
stride-1 transposed convolution.

Compiled results must equal eager bit for bit (values and int64 indices; NaN compared as NaN):
each kernel walks its elements in the eager kernel's order with its tie and NaN rules.
"""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet import ops
from munet.compiler import lower_cpu
from munet.compiler.codegen import build, c_im2col
from munet.compiler.codegen.c import render_c
from munet.compiler.codegen.kernel import Index, Kernel, Load, Reduce, Store
from munet.ops._registry import decompose
from tests.reference import assert_close_to_reference

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


@pytest.fixture
def column_path(monkeypatch):
    """Convolutions on their column (im2col/col2im) path: the direct kernel, which serves wide
    stride-1 float32 planes first (tests/backends/test_cpu_direct_conv.py), declines every call."""
    from munet.backends.cpu import kernels_conv

    monkeypatch.setattr(kernels_conv, "direct_conv2d", lambda *args, **kwargs: None)


def _pool(fn, x):
    compiled = munet.compile(fn)
    got = compiled(munet.tensor(x))
    want = fn(munet.tensor(x))
    return compiled, got, want


def _assert_same(got, want):
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def _max_pool_nodes(compiled):
    return [n for n in compiled.graph.nodes if n.name == "max_pool"]


CASES = [
    # (input shape, kernel_size, stride, dilation, ceil_mode)
    ((2, 3, 8, 8), 2, 2, 1, False),
    ((2, 3, 9, 7), 3, 2, 1, False),  # overlapping windows, a row and column left out
    ((1, 2, 10, 10), 3, 1, 2, False),  # dilation
    ((3, 1, 5, 6), (2, 3), (1, 2), 1, False),
    ((2, 4, 1, 1), 1, 1, 1, False),  # size-1 windows
]


@needs_cc
@pytest.mark.parametrize("shape, k, s, d, ceil", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_values_and_indices_equal_eager(shape, k, s, d, ceil, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)

    def fn(t):
        return F.max_pool2d(t, k, s, dilation=d, ceil_mode=ceil, return_indices=True)

    compiled, got, want = _pool(fn, x)
    _assert_same(got, want)
    assert compiled.stats()["generated_code"] is True


@needs_cc
def test_ties_nan_and_minus_inf_follow_the_eager_rules():
    # relu output: many tied zeros (the first maximum wins); NaN windows report their last NaN;
    # an all -inf window reports its first cell
    rng = np.random.default_rng(1)
    x = np.maximum(rng.standard_normal((2, 2, 6, 6)), 0).astype(np.float32)
    x[0, 0, :2, :2] = [[np.nan, 1.0], [np.nan, 2.0]]
    x[0, 1, :2, :2] = -np.inf
    x[1, 0, 2:4, 2:4] = [[5.0, 5.0], [5.0, np.nan]]
    x[1, 1, :2, 4:6] = [[-0.0, 0.0], [0.0, -0.0]]
    compiled, got, want = _pool(lambda t: F.max_pool2d(t, 2, return_indices=True), x)
    np.testing.assert_array_equal(np.isnan(got[0].numpy()), np.isnan(want[0].numpy()))
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    np.testing.assert_array_equal(np.nan_to_num(got[0].numpy()), np.nan_to_num(want[0].numpy()))
    assert got[1].numpy()[0, 0, 0, 0] == 6  # the last NaN of the window (row 1, column 0)
    # the generated kernel is the cpu target's fast kernel for the composite max_pool: it gives what
    # the decomposition (the op's meaning) gives, the chosen zero's sign included
    attrs = {k: v for k, v in _max_pool_nodes(compiled)[0].attrs.items()}
    meant = decompose(ops.OPS["max_pool"], (munet.tensor(x),), attrs)
    for g, m in zip(got, meant):
        np.testing.assert_array_equal(g.numpy(), m.numpy())
    np.testing.assert_array_equal(np.signbit(got[0].numpy()), np.signbit(meant[0].numpy()))
    assert compiled.stats()["generated_kernels"] == 1


@needs_cc
@pytest.mark.parametrize("nd", [1, 3])
def test_max_pool1d_and_3d(nd):
    rng = np.random.default_rng(2)
    shape = (2, 3) + (7,) * nd
    x = rng.standard_normal(shape).astype(np.float32)
    pool = {1: F.max_pool1d, 3: F.max_pool3d}[nd]
    _, got, want = _pool(lambda t: pool(t, 2, return_indices=True), x)
    _assert_same(got, want)


@needs_cc
@pytest.mark.parametrize("padding, ceil", [(1, False), (0, True)])
def test_windows_reaching_outside_the_input_decompose_and_fuse(padding, ceil):
    """No generated window kernel covers padding or a ceil_mode window past the edge: the plan
    decomposes max pooling like any composite and fuses its reductions (the same values)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 8, 8)).astype(np.float32)  # ceil_mode: a 4th window past the edge

    def fn(t):
        return F.max_pool2d(t, 3, 2, padding=padding, ceil_mode=ceil, return_indices=True)

    compiled, got, want = _pool(fn, x)
    _assert_same(got, want)
    assert compiled.stats()["passes"]["decompose"] >= 1


@needs_cc
@pytest.mark.parametrize(
    "size, k, generated",
    [
        (8, 2, 2),  # windows tile the input: the gradient's scatter is a generated gather too
        (9, 2, 1),  # a row and a column left over: the scatter stays NumPy's
        (8, 3, 1),  # stride 3 != ... (kernel 3, stride 3 on 8: cells left over)
    ],
)
def test_max_pool_gradient_equals_eager(size, k, generated):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3, size, size)).astype(np.float32)
    x[0, 0, :2, :2] = -0.0  # a -0.0 gradient cell must come out as the eager scatter's 0.0
    out = size // k
    w = munet.tensor(rng.standard_normal((4, 3, out, out)).astype(np.float32))

    def step(t):
        t.requires_grad_(True)
        loss = (F.max_pool2d(t.relu(), k) * w).sum()
        loss.backward()
        return t.grad

    compiled = munet.compile(step)
    got = compiled(munet.tensor(x))
    want = step(munet.tensor(x))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert not np.signbit(got.numpy()).any() or np.signbit(want.numpy()).any()
    stats = compiled.stats()
    assert stats["generated_kernels"] - stats["fused_groups"] == generated


def test_without_a_compiler_max_pool_runs_the_numpy_kernel(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/bin/cc")
    x = np.random.default_rng(5).standard_normal((2, 2, 4, 4)).astype(np.float32)
    compiled, got, want = _pool(lambda t: F.max_pool2d(t, 2, return_indices=True), x)
    _assert_same(got, want)
    assert compiled.stats()["generated_code"] is False


def test_argmax_over_a_large_space_is_refused_by_the_c_renderer():
    cells = Load(0, (64, 1), 0, "f32")
    kernel = Kernel(
        "k", (4,), (64 * 2,), ["f32"], [], ["i64"], [Store(0, Reduce("argmax", cells, "i64", Index((0, 1))))]
    )
    with pytest.raises(TypeError, match="argmax over 128 elements"):
        render_c(kernel)


@needs_cc
@pytest.mark.parametrize(
    "shape, weight, padding, dilation, groups, output_padding",
    [
        ((2, 4, 5, 6), (4, 3, 3, 3), 0, 1, 1, 0),
        ((2, 4, 5, 5), (4, 2, 3, 2), 1, 2, 2, 0),
        ((1, 3, 4, 4), (3, 2, 2, 2), 0, 1, 1, 0),
        ((2, 2, 7), (2, 3, 4), 1, 1, 1, 0),  # 1-D
    ],
)
def test_stride1_transposed_convolution_equals_eager(
    shape, weight, padding, dilation, groups, output_padding, record_calls, column_path
):
    built_col2im = record_calls(lower_cpu, "shifted_sum_kernel")
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype(np.float32)
    w = munet.tensor(rng.standard_normal(weight).astype(np.float32))
    fn = F.conv_transpose2d if len(shape) == 4 else F.conv_transpose1d

    def step(t):
        return fn(t, w, padding=padding, dilation=dilation, groups=groups, output_padding=output_padding) * 2

    compiled = munet.compile(step)
    np.testing.assert_array_equal(compiled(munet.tensor(x)).numpy(), step(munet.tensor(x)).numpy())
    assert built_col2im
    assert built_col2im


@needs_cc
def test_a_convolution_input_gradient_equals_eager(record_calls):
    built_col2im = record_calls(lower_cpu, "shifted_sum_kernel")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 4, 9, 8)).astype(np.float32)
    w = munet.tensor(rng.standard_normal((5, 4, 3, 3)).astype(np.float32))

    def step(t):
        t.requires_grad_(True)
        F.conv2d(t, w).relu().sum().backward()
        return t.grad

    compiled = munet.compile(step)
    np.testing.assert_array_equal(compiled(munet.tensor(x)).numpy(), step(munet.tensor(x)).numpy())
    assert built_col2im


@needs_cc
@pytest.mark.parametrize(
    "shape, weight, stride, padding, dilation, groups",
    [
        ((2, 4, 9, 8), (5, 4, 3, 3), 1, 1, 1, 1),  # ResNet's 3x3; few positions: images side by side
        ((2, 3, 20, 20), (4, 3, 3, 3), 1, 1, 1, 1),  # a GEMM per block of images
        ((4, 1, 4, 4), (1, 1, 2, 2), 2, 1, 1, 1),  # side by side with as many images as column rows
        ((1, 32, 40, 48), (3, 32, 3, 3), 1, 1, 1, 1),  # columns past 2 MiB: blocks of output rows
        ((2, 3, 17, 15), (6, 3, 7, 7), 2, 3, 1, 1),  # ResNet's stem: 7x7, stride 2, padding 3
        ((2, 4, 9, 9), (6, 4, 1, 1), 2, 0, 1, 1),  # a 1x1 downsample, stride 2
        ((1, 4, 8, 7), (4, 2, 3, 2), (2, 1), (2, 0), 2, 2),  # groups, dilation, unequal strides
        ((3, 2, 5, 6), (3, 2, 4, 4), 3, 4, 1, 1),  # padding wider than the input reaches
        ((2, 3, 6, 7), (4, 3, 2, 4), 1, "same", 1, 1),  # even kernel: padded more on one side
        ((2, 3, 11), (4, 3, 3), 2, 1, 1, 1),  # 1-D
        ((0, 3, 6, 6), (4, 3, 3, 3), 1, 1, 1, 1),  # no images
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_convolution_columns_from_generated_im2col(
    shape, weight, stride, padding, dilation, groups, dtype, record_calls, column_path
):
    """A forward convolution's columns come from the generated im2col (padding written as zeros,
    nothing padded or dropped); the GEMM after it is NumPy's, so results match PyTorch's to float
    rounding, and eager's (at two threads and more the blocks run on the OpenMP team, the columns
    still the generated im2col's)."""
    torch = pytest.importorskip("torch")
    built = record_calls(c_im2col, "load_im2col")
    rng = np.random.default_rng(8)
    x = rng.standard_normal(shape).astype(dtype)
    wv = rng.standard_normal(weight).astype(dtype)
    w = munet.tensor(wv)
    conv = F.conv2d if len(shape) == 4 else F.conv1d

    def step(t):
        return conv(t, w, stride=stride, padding=padding, dilation=dilation, groups=groups).relu()

    compiled = munet.compile(step)
    got = compiled(munet.tensor(x)).numpy()
    tconv = torch.nn.functional.conv2d if len(shape) == 4 else torch.nn.functional.conv1d

    def torch_step(dt):
        t, tw = (torch.from_numpy(a.astype(dt)) for a in (x, wv))
        return tconv(t, tw, stride=stride, padding=padding, dilation=dilation, groups=groups).relu().numpy()

    reference = torch_step(np.float64)
    if dtype == np.float64:  # the default float64 tolerances
        np.testing.assert_allclose(got, reference, rtol=1e-7, atol=1e-7)
    else:  # as close to it as PyTorch's float32 result (long float32 sums round per BLAS), and eager's
        assert_close_to_reference(got, torch_step(dtype), reference)
        assert_close_to_reference(got, step(munet.tensor(x)).numpy(), reference)
    assert built or shape[0] == 0


@needs_cc
def test_im2col_reads_a_non_contiguous_input_through_a_copy(record_calls):
    """A transposed view as the input: the convolution copies it contiguous before the generated
    im2col, which itself declines (returns False, writes nothing) what is not C-contiguous."""
    built = record_calls(c_im2col, "load_im2col")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 8, 6)).astype(np.float32)
    w = munet.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))

    def step(t):
        return F.conv2d(t.transpose(2, 3), w, padding=1)

    compiled = munet.compile(step)
    np.testing.assert_allclose(compiled(munet.tensor(x)).numpy(), step(munet.tensor(x)).numpy(), rtol=1e-5, atol=1e-5)
    im2col = lower_cpu.generated_im2col()
    cols = np.empty((2, 27, 48), np.float32)
    assert not im2col(cols, x.transpose(0, 1, 3, 2), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (6, 8))
    assert im2col(cols, np.ascontiguousarray(x.transpose(0, 1, 3, 2)), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (6, 8))
    assert built
