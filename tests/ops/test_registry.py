"""apply's eager path (munet/ops/_registry.py): the one pass over the inputs keeps every semantic of
the general path: promotion, errors naming the op, history, versions, per-thread grad mode, and the
profiler, autocast and tracer taking the general path."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
import torch

import munet
import munet.nn.functional as F
from munet._memory_format import LayoutError
from munet.backends.cpu import kernels_linalg


def test_int_and_float_operands_promote():
    a = munet.tensor([1, 2, 3])
    b = munet.tensor([0.5, 1.5, 2.5])
    out = a + b
    assert out.dtype is munet.float32
    np.testing.assert_array_equal(out.numpy(), np.array([1.5, 3.5, 5.5], np.float32))
    assert (a * 2.5).dtype is munet.float32
    assert (a * 2).dtype is munet.int64


def test_bad_shapes_raise_naming_the_op():
    with pytest.raises(RuntimeError, match=r"matmul: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        munet.ones(2, 3) @ munet.ones(4, 5)
    with pytest.raises(RuntimeError, match=r"^add: the size of tensors must match or be 1 to broadcast"):
        munet.ones(2, 3) + munet.ones(4)
    with pytest.raises(RuntimeError, match=r"^mul: the size of tensors must match or be 1 to broadcast"):
        munet.ones(2, 3).mul_(munet.ones(4))  # in place
    with pytest.raises(RuntimeError, match=r"^where: .* got shapes \[2, 3\] and \[4\] and \[\]"):
        munet.where(munet.ones(2, 3) > 0, munet.ones(4), 0.0)  # a composite's rule, on the general path
    with pytest.raises(RuntimeError, match=r"^lt: the size of tensors must match"):
        munet.lt(munet.ones(2, 3), munet.ones(4))
    with pytest.raises(IndexError, match="sum: dimension out of range"):
        munet.ones(2, 3).sum(2)


def test_unsupported_inputs_raise_naming_the_op():
    with pytest.raises(TypeError, match="relu: not supported for complex64 tensors"):
        F.relu(munet.ones(2, dtype=munet.complex64))
    with pytest.raises(LayoutError, match="^exp: not supported on a sparse COO tensor"):
        munet.ones(2, 3).to_sparse().exp()


def test_history_is_recorded_for_kernels_and_views():
    a = munet.ones(3, 4, requires_grad=True)
    b = munet.ones(3, 4)
    assert (a * b).grad_fn.name() == "MulBackward0"
    assert a.t().grad_fn.name() == "PermuteBackward0"
    assert a[1:, ::2].grad_fn.name() == "SliceBackward0"
    assert a.sum(1).grad_fn.name() == "SumBackward0"
    assert (b * b).grad_fn is None and not (b * b).requires_grad
    (a[1:, ::2] * 2.0).sum().backward()
    expected = torch.zeros(3, 4)
    expected[1:, ::2] = 2.0
    np.testing.assert_array_equal(a.grad.numpy(), expected.numpy())


def test_view_of_a_view_records_its_base_and_history():
    base = munet.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    v = base[1:].t()
    assert v._base is base
    v.sum().backward()
    np.testing.assert_array_equal(base.grad.numpy(), np.array([[0] * 4, [1] * 4, [1] * 4], np.float32))


def test_stale_view_history_is_refreshed_after_an_in_place_write():
    x = munet.zeros(4, requires_grad=True)
    y = x * 1.0
    first, second = y[:2], y[2:]
    second.mul_(3.0)  # rebases y's history; ``first`` was made before
    (first * first).sum().backward()  # a fast-path op on a stale view
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(4, np.float32))
    y2 = munet.ones(4, requires_grad=True) * 1.0
    view = y2[:2]
    y2[2:].mul_(3.0)
    assert (view + 1.0).grad_fn is not None


def test_in_place_ops_bump_the_version_and_check_leaves():
    t = munet.ones(4)
    before = t._version
    t.add_(1.0)
    assert t._version == before + 1
    v = t[1:]
    v.mul_(2.0)
    assert t._version == before + 2
    leaf = munet.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        leaf.add_(1.0)


def test_saved_tensor_modified_in_place_is_detected():
    a = munet.ones(3, requires_grad=True)
    b = munet.ones(3)
    out = a * b
    b.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_no_grad_in_another_thread_leaves_this_thread_recording():
    a = munet.ones(2, requires_grad=True)
    seen = {}
    inside = threading.Event()
    release = threading.Event()

    def other():
        with munet.no_grad():
            seen["other"] = (a * 2.0).requires_grad
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(5)
    seen["main"] = (a * 2.0).requires_grad  # while the other thread is inside no_grad
    release.set()
    thread.join()
    assert seen == {"other": False, "main": True}


def test_profiler_autocast_and_tracer_take_the_general_path():
    a, b = munet.randn(4, 4, device="cpu"), munet.randn(4, 4, device="cpu")  # cpu autocast, on any default device
    with munet.profiler.profile() as prof:
        a + b
    assert "add" in [e.key for e in prof.key_averages()]
    with munet.autocast("cpu", dtype=munet.bfloat16):
        assert (a @ b).dtype is munet.bfloat16
    assert (a @ b).dtype is munet.float32

    def step(x, y):
        return (x * y).exp().sum(1) + x.t()[0]

    compiled = munet.compile(step)
    np.testing.assert_allclose(compiled(a, b).numpy(), step(a, b).numpy(), rtol=1e-6, atol=1e-6)


def test_formula_kernels_convert_numbers_and_half_precision():
    h = munet.tensor([1.0, 2.0, 3.0], dtype=munet.float16)
    np.testing.assert_array_equal(h.exp().numpy(), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16).exp().numpy())
    i = munet.tensor([250, 3], dtype=munet.uint8)
    np.testing.assert_array_equal((i + 10).numpy(), np.array([4, 13], np.uint8))  # PyTorch's wrapping
    assert (munet.tensor([1.0]) * 1e300).numpy()[0] == np.inf  # no overflow warning, as PyTorch


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_kernel_matches_numpy_bit_for_bit(dtype):
    """The 2-D product's ndarray.dot route (BLAS layouts) and np.matmul route (others) both give
    np.matmul's bits."""
    rng = np.random.default_rng(0)
    for m, k, n in ((4, 4, 4), (1, 7, 3), (5, 1, 6), (9, 8, 1), (0, 3, 2), (33, 17, 65)):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        wide_a = rng.standard_normal((m, 2 * k)).astype(dtype)[:, ::2]  # not a BLAS layout
        for x in (a, np.asfortranarray(a), wide_a):
            for y in (b, np.asfortranarray(b)):
                got = kernels_linalg.matmul(x, y)
                assert got.dtype == np.dtype(dtype) and got.flags.c_contiguous
                np.testing.assert_array_equal(got, np.matmul(x, y))
        np.testing.assert_array_equal(kernels_linalg.matmul(a, a.T), np.matmul(a, a.T))
    special = np.array([[np.inf, 1.0], [np.nan, -np.inf]], dtype)
    big = np.full((8, 8), np.finfo(dtype).max, dtype)
    for x in (special, big):
        with np.errstate(all="ignore"):
            want = np.matmul(x, x)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # PyTorch never warns about inf or NaN: ndarray.dot would
            np.testing.assert_array_equal(kernels_linalg.matmul(x, x), want)
    # np.matmul's routes too: a layout BLAS cannot read, a batch, half precision
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wide = np.array([[np.inf, 0.0, 1.0, 0.0], [np.nan, 0.0, -np.inf, 0.0]], dtype)[:, ::2]
        kernels_linalg.matmul(wide, special)
        kernels_linalg.matmul(np.stack([special, special]), special)
        kernels_linalg.matmul(special.astype(np.float16), special.astype(np.float16))


def test_basic_indexing_matches_pytorch():
    data = np.arange(60.0).reshape(3, 4, 5)
    m, t = munet.tensor(data), torch.tensor(data)
    for index in (
        (slice(1, None), slice(None, None, 2)),
        (Ellipsis, 1),
        (None, slice(0, 10, 3)),
        (slice(5, 1),),
        (slice(-2, None, 4),),
        2,
        (1, None, Ellipsis, slice(1, 3)),
        (np.int64(1), slice(None, None, 3)),
    ):
        got, want = m[index], t[index]
        assert tuple(got.shape) == tuple(want.shape) and tuple(got.stride()) == want.stride()
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert tuple(m[munet.tensor(2), 1:].shape) == (3, 5)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        m[::-1]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        m[::0]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 3"):
        m[0, 0, 0, 0]
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        m[3]
