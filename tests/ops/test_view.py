"""View ops (munet/ops/view.py) and in-place writes through views, against PyTorch.

For each view: values and gradients, the geometry (shape, stride, storage_offset,
is_contiguous), and whether the result shares storage with its input.
"""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close, check, gradcheck, noncontiguous, randn


def _shares(lib_out, lib_in) -> bool:
    if isinstance(lib_out, torch.Tensor):
        return lib_out.untyped_storage().data_ptr() == lib_in.untyped_storage().data_ptr()
    return lib_out.untyped_storage() is lib_in.untyped_storage()


def check_geometry(fn, shape):
    """``fn`` gives the same shape, strides, offset, contiguity and storage sharing as in torch."""
    n = int(np.prod(shape))
    m_in = munet.arange(float(n)).reshape(shape)
    t_in = torch.arange(float(n)).reshape(shape)
    m, t = fn(m_in), fn(t_in)
    assert tuple(m.shape) == tuple(t.shape)
    assert tuple(m.stride()) == tuple(t.stride()), f"stride {m.stride()} != {t.stride()}"
    assert m.storage_offset() == t.storage_offset()
    assert m.is_contiguous() == t.is_contiguous()
    assert _shares(m, m_in) == _shares(t, t_in), "storage sharing differs from torch"
    np.testing.assert_array_equal(m.numpy(), t.numpy())
    if _shares(t, t_in) and t.numel():
        assert m.data_ptr() == m_in.data_ptr() + m.storage_offset() * m.element_size()


VIEWS_234 = [
    lambda x: x.view(6, 4),
    lambda x: x.view(-1),
    lambda x: x.view(2, -1, 2),
    lambda x: x.view(24, 1),
    lambda x: x.view((1, 2, 12)),
    lambda x: x.view_as(x.reshape(4, 6)),
    lambda x: x.transpose(0, 1).view(3, 2, 2, 2),
    lambda x: x.permute(2, 0, 1).view(4, 6),
    lambda x: x[:, 1:].view(2, 8),
    lambda x: x.reshape(4, 6),
    lambda x: x.reshape(-1, 3),
    lambda x: x.transpose(0, 2).reshape(-1),
    lambda x: x[:, :, ::2].reshape(2, 6),
    lambda x: x.permute(2, 0, 1).reshape(4, 6),
    lambda x: x.reshape(x.shape),
    lambda x: x.reshape_as(x.view(3, 8)),
    lambda x: x.transpose(0, 2),
    lambda x: x.transpose(-1, 0),
    lambda x: x.swapaxes(0, 1),
    lambda x: x.swapdims(1, 2),
    lambda x: x.permute(2, 0, 1),
    lambda x: x.permute(-1, -2, -3),
    lambda x: x.permute((1, 0, 2)),
    lambda x: x.movedim(0, -1),
    lambda x: x.movedim((0, 1), (2, 0)),
    lambda x: x.mT,
    lambda x: x[0].t(),
    lambda x: x[0].T,
    lambda x: x[:, 0].mT,
    lambda x: x[:, :1].expand(2, 5, 4),
    lambda x: x[:, :1].expand(-1, 3, -1),
    lambda x: x[0, 0].expand(3, 2, 4),
    lambda x: x[:, :1].expand(3, 2, 3, 4),
    lambda x: x[:, :1].expand_as(x),
    lambda x: x.unsqueeze(0),
    lambda x: x.unsqueeze(-1),
    lambda x: x.unsqueeze(2),
    lambda x: x.transpose(0, 1).unsqueeze(1),
    lambda x: x[:, :1].squeeze(),
    lambda x: x[:, :1].squeeze(1),
    lambda x: x[:1, :1].squeeze((0, 1)),
    lambda x: x[:1].squeeze((0, 2)),
    lambda x: x.squeeze(-1),
    lambda x: x.flatten(),
    lambda x: x.flatten(1),
    lambda x: x.flatten(0, 1),
    lambda x: x.flatten(-1, -1),
    lambda x: x.transpose(0, 1).flatten(1),
    lambda x: x.transpose(1, 2).flatten(0, 1),
    lambda x: x.unflatten(2, (2, 2)),
    lambda x: x.unflatten(-1, (-1, 2)),
    lambda x: x.narrow(1, 1, 2),
    lambda x: x.narrow(-1, 2, 2),
    lambda x: x.narrow(0, -1, 1),
    lambda x: x.narrow(1, 3, 0),
    lambda x: x.select(1, -1),
    lambda x: x.select(0, 1),
    lambda x: x.transpose(0, 2).select(1, 2),
    lambda x: x.as_strided((3, 3), (1, 2)),
    lambda x: x.as_strided((2, 2), (4, 1), 5),
    lambda x: x.as_strided((3, 3), (1, 1)),
    lambda x: x.unfold(2, 2, 1),
    lambda x: x.unfold(1, 2, 2),
    lambda x: x.unfold(-1, 3, 1).unfold(0, 1, 1),
    lambda x: x.transpose(0, 2).unfold(0, 2, 2),
    lambda x: x[1],
    lambda x: x[-1, ::2],
    lambda x: x[:, 1:],
    lambda x: x[None, :, None],
    lambda x: x[..., 1],
    lambda x: x[0, ..., None],
    lambda x: x[:, -2:, 1:4:2],
    lambda x: x[1:1],
    lambda x: x[:, 10:],
    lambda x: x[-5:5, ::5, -3],
    lambda x: x[...],
    lambda x: x[:, None, ..., None, 2],
    lambda x: x[1][2][3:],
    lambda x: x.transpose(1, 2)[:, 1:3, ::2],
    lambda x: x.contiguous(),
    lambda x: x.transpose(0, 1).contiguous(),
    lambda x: x.clone(),
    lambda x: x[:, 1:].contiguous(),
]


@pytest.mark.parametrize("case", range(len(VIEWS_234)))
def test_view_geometry(case):
    check_geometry(VIEWS_234[case], (2, 3, 4))


@pytest.mark.parametrize("case", range(len(VIEWS_234)))
def test_view_values_and_grads(case):
    fn = VIEWS_234[case]
    check(fn, fn, randn(2, 3, 4))


NONCONTIGUOUS_INPUT = [
    lambda x: x.reshape(6, 4),
    lambda x: x.transpose(0, 2),
    lambda x: x.permute(2, 0, 1),
    lambda x: x[:, :1].expand(2, 5, 4),
    lambda x: x.flatten(1),
    lambda x: x.narrow(-1, 2, 2),
    lambda x: x.select(1, -1),
    lambda x: x.unfold(2, 2, 1),
    lambda x: x[:, None, ..., None, 2],
    lambda x: x.contiguous().view(4, 6),
    lambda x: x.transpose(1, 2).squeeze(0).unsqueeze(1),
]


@pytest.mark.parametrize("case", range(len(NONCONTIGUOUS_INPUT)))
def test_view_of_noncontiguous_input(case):
    fn = NONCONTIGUOUS_INPUT[case]
    check(fn, fn, noncontiguous(randn(2, 3, 4)))


DTYPE_VIEWS = [
    lambda x: x.view(6, 4),
    lambda x: x.permute(2, 0, 1),
    lambda x: x[:, :1].expand(2, 5, 4),
    lambda x: x.unfold(2, 2, 1),
    lambda x: x[-1, ::2],
]


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16", "int64"])
def test_views_dtypes(dtype):
    a = np.arange(24).reshape(2, 3, 4).astype(np.int64) if dtype == "int64" else randn(2, 3, 4, dtype=dtype)
    for fn in DTYPE_VIEWS:
        check(fn, fn, a)


SMALL = [
    ((), lambda x: x.view(1)),
    ((), lambda x: x.view(())),
    ((), lambda x: x.reshape(1, 1)),
    ((), lambda x: x.unsqueeze(0)),
    ((), lambda x: x.expand(3, 2)),
    ((), lambda x: x.flatten()),
    ((), lambda x: x.t()),
    ((), lambda x: x.T),
    ((), lambda x: x.squeeze()),
    ((), lambda x: x.squeeze(0)),
    ((), lambda x: x[None]),
    ((), lambda x: x[...]),
    ((), lambda x: x.permute(())),
    ((), lambda x: x.transpose(0, -1)),
    ((1,), lambda x: x.view(())),
    ((1,), lambda x: x.squeeze()),
    ((4,), lambda x: x.t()),
    ((4,), lambda x: x.unfold(0, 2, 1)),
    ((4,), lambda x: x.unfold(0, 3, 3)),
    ((4,), lambda x: x.unfold(0, 4, 1)),
    ((0, 3), lambda x: x.view(3, 0)),
    ((0, 3), lambda x: x.view(-1, 3)),
    ((0, 3), lambda x: x.transpose(0, 1)),
    ((0, 3), lambda x: x[:, 1:]),
    ((0, 3), lambda x: x.unsqueeze(1).expand(0, 2, 3)),
    ((0, 3), lambda x: x.narrow(1, 1, 2)),
    ((0, 3), lambda x: x.flatten()),
    ((1, 3, 1), lambda x: x.squeeze()),
    ((1, 3, 1), lambda x: x.transpose(0, 2)),
    ((1, 3, 1), lambda x: x.view(3)),
    ((1, 3, 1), lambda x: x.permute(2, 1, 0).view(3, 1)),
    ((1, 3, 1), lambda x: x.expand(2, 3, 5)),
    ((3, 4), lambda x: x.T),
    ((3, 4), lambda x: x.t().reshape(2, 2, 3)),
    ((3, 4), lambda x: x[::2, ::3]),
    ((3, 4), lambda x: x.mT),
]


@pytest.mark.parametrize("case", range(len(SMALL)))
def test_view_rank0_size0_size1(case):
    shape, fn = SMALL[case]
    check_geometry(fn, shape)
    check(fn, fn, randn(*shape))


def test_unfold_overlapping_windows_accumulate_grads():
    a = randn(7)
    check(lambda x: x.unfold(0, 3, 1), lambda x: x.unfold(0, 3, 1), a)
    check(lambda x: x.unfold(0, 3, 2) * 2, lambda x: x.unfold(0, 3, 2) * 2, a)
    x = munet.tensor(np.ones(5), requires_grad=True)
    x.unfold(0, 3, 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 2, 3, 2, 1])
    gradcheck(lambda x: x.unfold(1, 2, 1) ** 2, randn(2, 4, dtype="float64"))


def test_as_strided_overlapping_grads_and_double_backward():
    a = randn(6)
    check(lambda x: x.as_strided((4, 3), (1, 1)), lambda x: x.as_strided((4, 3), (1, 1)), a)
    check(lambda x: x[1:].as_strided((2, 2), (2, 1), 2), lambda x: x[1:].as_strided((2, 2), (2, 1), 2), a)
    gradcheck(lambda x: x.as_strided((3, 2), (1, 2), 1) ** 2, randn(6, dtype="float64"))
    gradcheck(lambda x: x[1:, ::2].unsqueeze(0).expand(2, 2, 2) ** 2, randn(3, 4, dtype="float64"))


def test_view_double_backward():
    xm = munet.tensor(randn(2, 3, dtype="float64"), requires_grad=True)
    xt = torch.tensor(xm.detach().numpy(), requires_grad=True)
    outs = []
    for x in (xm, xt):
        y = (x.t()[1:].reshape(-1) ** 3).sum()
        (g,) = (munet if x is xm else torch).autograd.grad(y, x, create_graph=True)
        (g[:, 1:] ** 2).sum().backward()
        outs.append(x.grad)
    assert_close(outs[0], outs[1])


# storage sharing, writes through views, version counters -----------------------------------------------


def test_reshape_views_when_possible_and_copies_otherwise():
    x = munet.zeros(2, 3, 4)
    v = x.reshape(6, 4)
    assert v.data_ptr() == x.data_ptr() and v.untyped_storage() is x.untyped_storage()
    v[0, 0] = 5.0
    assert x[0, 0, 0].item() == 5.0
    c = x.transpose(0, 2).reshape(-1)
    assert c.untyped_storage() is not x.untyped_storage()
    c[1] = 7.0
    assert float(x.numpy().max()) == 5.0
    assert x.contiguous() is x
    assert x.clone().untyped_storage() is not x.untyped_storage()


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.view(4, 6),
        lambda x: x.transpose(0, 2),
        lambda x: x[1, ::2],
        lambda x: x.select(2, 3),
        lambda x: x.narrow(1, 1, 2).unsqueeze(0),
        lambda x: x.permute(1, 2, 0)[..., 1],
        lambda x: x.diagonal(0, 1, 2),
        lambda x: x.unflatten(-1, (2, 2)).mT,
        lambda x: x.as_strided((2, 3), (5, 2), 1),
        lambda x: x.unfold(2, 2, 2),
        lambda x: x.flatten(1),
        lambda x: x.squeeze(),
        lambda x: x[:, None, -1],
    ],
)
def test_writes_through_views_and_versions(fn):
    for lib in (munet, torch):
        x = lib.zeros(2, 3, 4)
        y = fn(x)
        before = x._version
        y.copy_(lib.arange(y.numel(), dtype=y.dtype).reshape(y.shape) + 1)
        assert x._version == y._version and x._version > before
        y.mul_(2)
        assert x._version == y._version
        if lib is munet:
            m_x = x.numpy().copy()
        else:
            t_x = x.numpy()
    np.testing.assert_array_equal(m_x, t_x)


def test_version_bumps_through_setitem_and_saved_tensor_check():
    x = munet.zeros(3, 4)
    v0 = x._version
    x[1] = 3.0
    assert x._version == v0 + 1
    x[:, 2] += 1.0
    assert x._version > v0 + 1
    a = munet.tensor(randn(3, 4), requires_grad=True)
    w = a.exp()  # saves its result
    w[0, 0] = 0.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation|modified in-place"):
        w.sum().backward()


# in-place ops through views with autograd ----------------------------------------------------------------


def _check_inplace(fn, *inputs):
    check(fn, fn, *inputs)


def test_setitem_slice_of_clone_grads():
    def fn(x, z):
        y = x.clone()
        y[:, 0] = z * 2
        return y * y

    _check_inplace(fn, randn(3, 4, seed=1), randn(3, seed=2))


def test_inplace_ops_on_views_with_grads():
    def mul_view(x, z):
        y = x * 1
        y.transpose(0, 1)[1].mul_(z)
        return y.exp()

    def add_broadcast(x, z):
        y = x.clone()
        y[1:, ::2] += z[:2]
        return y

    def chained(x, z):
        y = x + 0
        v = y[:, 1:]
        v[0] = z[:3]
        v.add_(1.5)
        return y.sum(0) * y[1]

    def into_fresh_zeros(x, z):
        y = (x * 0).detach()
        y[0, 1:3] = z[1:3]
        y[1] = x[2]
        return y * 3

    def unsqueezed_view(x, z):
        y = x.clone()
        y.unsqueeze(0)[0, :, 1].copy_(z[:3])
        return y

    for fn in (mul_view, add_broadcast, chained, into_fresh_zeros, unsqueezed_view):
        _check_inplace(fn, randn(3, 4, seed=1), randn(4 if fn is not mul_view else 3, seed=2))


def test_views_created_before_a_write_get_the_new_history():
    def fn(x, z):
        y = (x * 0).detach()
        col = y[:, 0]  # views made while y has no history
        row = y[1]
        y[1] = z
        return y * 2 + row.sum() + col.unsqueeze(1) ** 2  # col overlaps the written row

    def through_other_view(x, z):
        y = x.clone()
        t = y.t()
        y[:, 1] = z[:3]
        return t[1:] * t[1:]

    check(fn, fn, randn(3, 4, seed=1), randn(4, seed=2))
    check(through_other_view, through_other_view, randn(3, 4, seed=1), randn(4, seed=2))


def test_detached_view_is_not_a_differentiable_view():
    x = munet.tensor(randn(2, 3), requires_grad=True)
    z = munet.tensor(randn(3), requires_grad=True)
    y = x * 1
    fn = y.grad_fn
    d = y[0].detach()
    d.mul_(z)
    assert y.grad_fn is fn and d.grad_fn is not None
    assert d._version == y._version


def test_setitem_with_autograd_double_backward():
    def fn(x):
        y = x * x
        y[1:, 0] = x[:2, 1] ** 2
        return y

    gradcheck(fn, randn(3, 2, dtype="float64"))


def test_inplace_on_view_of_leaf_raises():
    x = munet.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[0] = 1.0
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with munet.no_grad():
        x[0] = 2.0
    assert x[0].item() == 2.0


@pytest.mark.parametrize(
    "index,value",
    [
        ((0,), 5.0),
        ((slice(None), 1), 2),
        ((Ellipsis, 0), "exact"),
        ((slice(1, 3),), "row"),
        ((slice(None), slice(None, None, 2)), "col"),
        ((1, slice(1, None)), "exact"),
        ((None, 1), "scalar_tensor"),
        ((slice(None),), "float64"),
    ],
)
def test_setitem_values_broadcasting(index, value):
    def make(lib, shape, seed):
        return lib.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))

    results = []
    for lib in (munet, torch):
        x = make(lib, (3, 4), 1)
        v = {
            "row": make(lib, (4,), 2),
            "col": make(lib, (3, 1), 3),
            "exact": make(lib, (3,), 4),
            "scalar_tensor": lib.tensor(7.5),
            "float64": lib.tensor(np.ones((3, 4))),
        }.get(value, value)
        x[index] = v
        results.append(x)
    assert_close(results[0], results[1])


def test_setitem_int_tensor_and_errors():
    for lib in (munet, torch):
        x = lib.zeros(2, 3, dtype=lib.int64)
        x[0] = 2.7
        x[1, 1:] = lib.tensor([5, 6])
        assert x.tolist() == [[2, 2, 2], [0, 5, 6]]
    x = munet.zeros(2, 3)
    with pytest.raises(RuntimeError, match="cannot be broadcast|must match|broadcast"):
        x[0] = munet.zeros(2)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x[:, 3] = 1.0


# error messages ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn,exc,match",
    [
        (
            lambda x: x.transpose(0, 1).view(-1),
            RuntimeError,
            "view size is not compatible with input tensor's size and stride",
        ),
        (lambda x: x.view(5, 5), RuntimeError, "shape '\\[5, 5\\]' is invalid for input of size 24"),
        (lambda x: x.view(-1, -1), RuntimeError, "only one dimension can be inferred"),
        (lambda x: x.reshape(7, -1), RuntimeError, "is invalid for input of size 24"),
        (
            lambda x: x.transpose(0, 3),
            IndexError,
            "dimension out of range \\(expected to be in range of \\[-3, 2\\], but got 3\\)",
        ),
        (lambda x: x.permute(0, 1), RuntimeError, "number of dims don't match in permute"),
        (lambda x: x.permute(0, 0, 1), RuntimeError, "repeated dim"),
        (
            lambda x: x.expand(3, 3, 4),
            RuntimeError,
            "expanded size of the tensor \\(3\\) must match the existing size \\(2\\)",
        ),
        (lambda x: x.expand(4), RuntimeError, "number of sizes provided \\(1\\) must be greater or equal"),
        (lambda x: x.squeeze(3), IndexError, "dimension out of range"),
        (lambda x: x.unsqueeze(4), IndexError, "dimension out of range"),
        (lambda x: x.narrow(1, 2, 2), IndexError, "exceeds dimension size"),
        (lambda x: x.select(1, 3), IndexError, "index 3 out of range"),
        (lambda x: x[2], IndexError, "index 2 is out of bounds for dimension 0 with size 2"),
        (lambda x: x[0, 0, 0, 0], IndexError, "too many indices for tensor of dimension 3"),
        (lambda x: x[::-1], ValueError, "step must be greater than zero"),
        (lambda x: x.t(), RuntimeError, "t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"),
        (lambda x: x.unfold(2, 5, 1), RuntimeError, "maximum size for tensor at dimension 2 is 4 but size is 5"),
        (lambda x: x.unfold(2, 2, 0), RuntimeError, "step is 0 but must be > 0"),
        (lambda x: x.flatten(2, 0), RuntimeError, "start_dim cannot come after end_dim"),
        (lambda x: x[0, 0].mT, RuntimeError, "only supported on matrices or batches of matrices"),
        (lambda x: x.unflatten(1, (2, 2)), RuntimeError, "is invalid for input of size 3"),
        (lambda x: x.as_strided((2, 2), (1,)), RuntimeError, "mismatch in length of strides"),
        (lambda x: x.as_strided((5, 5), (5, 1)), RuntimeError, "out of bounds for storage of size 24"),
    ],
)
def test_view_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn(munet.zeros(2, 3, 4))


INPLACE_VIEWS = [
    ((2, 3), lambda x: x.t_()),
    ((3,), lambda x: x.t_()),
    ((2, 3, 4), lambda x: x.transpose_(0, 2)),
    ((2, 3, 4), lambda x: x.swapdims_(1, -1)),
    ((2, 3, 4), lambda x: x.swapaxes_(0, 1)),
    ((2, 1, 3, 1), lambda x: x.squeeze_()),
    ((2, 1, 3, 1), lambda x: x.squeeze_(1)),
    ((2, 1, 3, 1), lambda x: x.squeeze_(0)),
    ((2, 3), lambda x: x.unsqueeze_(-1)),
    ((), lambda x: x.unsqueeze_(0)),
]


@pytest.mark.parametrize("case", range(len(INPLACE_VIEWS)))
def test_inplace_view_ops_match_torch(case):
    """The tensor itself takes the new geometry and history; its version is bumped; gradients flow."""
    shape, op = INPLACE_VIEWS[case]
    values = randn(*shape)
    seen = []
    for lib in (munet, torch):
        leaf = lib.tensor(values, requires_grad=True)
        x = leaf * 1
        version = x._version
        assert op(x) is x
        (x * lib.arange(float(x.numel())).reshape(x.shape)).sum().backward()
        seen.append((tuple(x.shape), x.stride(), x._version - version, leaf.grad.tolist(), x.tolist()))
    assert seen[0] == seen[1]


def test_inplace_view_ops_on_leaves_and_views_as_torch():
    for lib in (munet, torch):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            lib.ones(3, requires_grad=True).unsqueeze_(0)
        with lib.no_grad():
            leaf = lib.ones(3, requires_grad=True)
            leaf.unsqueeze_(0)
        assert leaf.shape == (1, 3) and leaf.is_leaf and leaf.requires_grad
        base = lib.zeros(2, 3)
        row = base[1]
        row.unsqueeze_(0)
        row[0, 2] = 5.0  # still writes through to the base
        assert row.shape == (1, 3) and base.shape == (2, 3) and base[1, 2].item() == 5.0
