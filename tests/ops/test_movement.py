"""Movement ops (munet/ops/movement.py): forward and gradients against PyTorch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from tests.reference import check, gradcheck, noncontiguous, randn

DTYPES = ["float32", "float64", "float16", "bfloat16"]


def ints(*shape, seed=0):
    return np.random.default_rng(seed).integers(-5, 5, size=shape).astype(np.int64)


# cat / stack ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_dtypes(dtype):
    a, b = randn(2, 3, dtype=dtype, seed=1), randn(2, 5, dtype=dtype, seed=2)
    check(lambda x, y: munet.cat([x, y], 1), lambda x, y: torch.cat([x, y], 1), a, b)
    check(lambda x, y: munet.cat((x, y, x), -1), lambda x, y: torch.cat((x, y, x), -1), a, b)


def test_cat_aliases_noncontiguous_and_dims():
    a, b = noncontiguous(randn(2, 3, 4, seed=1)), randn(2, 1, 4, seed=2)
    check(lambda x, y: munet.concat([x, y], dim=1), lambda x, y: torch.concat([x, y], dim=1), a, b)
    check(lambda x, y: munet.concatenate([x, y], 1), lambda x, y: torch.concatenate([x, y], 1), a, b)
    c = randn(3, 3, 4, seed=3)
    check(lambda x, z: munet.cat([x, z]), lambda x, z: torch.cat([x, z]), a, c)


def test_cat_size_zero_and_legacy_empty():
    a, b = randn(2, 3, seed=1), randn(0, 3, seed=2)
    check(lambda x, y: munet.cat([x, y]), lambda x, y: torch.cat([x, y]), a, b)
    e = randn(0, seed=3)
    check(lambda x, y: munet.cat([y, x, y], 1), lambda x, y: torch.cat([y, x, y], 1), a, e)
    check(lambda y: munet.cat([y, y]), lambda y: torch.cat([y, y]), e)


def test_cat_promotes_dtypes():
    a, b = randn(2, 3, dtype="float32", seed=1), randn(2, 3, dtype="float64", seed=2)
    check(lambda x, y: munet.cat([x, y]), lambda x, y: torch.cat([x, y]), a, b)
    i = ints(2, 3)
    check(lambda x, y: munet.cat([y, x]), lambda x, y: torch.cat([y, x]), a, i)
    check(lambda y: munet.cat([y, y], 1), lambda y: torch.cat([y, y], 1), i)
    bools = np.array([[True, False, True]])
    check(lambda y, z: munet.cat([y, z]), lambda y, z: torch.cat([y, z]), i, bools)


def test_cat_errors():
    x = munet.zeros(2, 3)
    with pytest.raises(RuntimeError, match="expected a non-empty list"):
        munet.cat([])
    with pytest.raises(RuntimeError, match="sizes of tensors must match except in dimension 0"):
        munet.cat([x, munet.zeros(2, 4)])
    with pytest.raises(RuntimeError, match="same number of dimensions: got 2 and 3"):
        munet.cat([x, munet.zeros(2, 3, 1)])
    with pytest.raises(RuntimeError, match="zero-dimensional tensor \\(at position 1\\)"):
        munet.cat([x, munet.zeros(())])
    with pytest.raises(IndexError, match="cat: dimension out of range"):
        munet.cat([x, x], 2)
    with pytest.raises(TypeError, match="must be a tuple or list of Tensors"):
        munet.cat(x)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack(dim):
    a, b, c = randn(2, 3, seed=1), randn(2, 3, seed=2), noncontiguous(randn(2, 3, seed=3))
    check(lambda *t: munet.stack(t, dim), lambda *t: torch.stack(t, dim), a, b, c)


def test_stack_rank0_and_errors():
    check(lambda x, y: munet.stack([x, y]), lambda x, y: torch.stack([x, y]), randn(seed=1), randn(seed=2))
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        munet.stack([munet.zeros(2), munet.zeros(3)])


@pytest.mark.parametrize("name", ["hstack", "vstack", "dstack", "column_stack", "row_stack"])
@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (2, 3)), ((), ()), ((2, 3, 2), (2, 3, 2))])
def test_hvd_stack(name, shapes):
    a, b = randn(*shapes[0], seed=1), randn(*shapes[1], seed=2)
    check(lambda x, y: getattr(munet, name)([x, y]), lambda x, y: getattr(torch, name)([x, y]), a, b)


def test_column_stack_mixed():
    check(
        lambda x, y: munet.column_stack((x, y)), lambda x, y: torch.column_stack((x, y)), randn(3, seed=1), randn(3, 2)
    )


@pytest.mark.parametrize("name", ["atleast_1d", "atleast_2d", "atleast_3d"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4)])
def test_atleast(name, shape):
    a = randn(*shape)
    check(getattr(munet, name), getattr(torch, name), a)
    check(lambda x, y: getattr(munet, name)(x, y), lambda x, y: getattr(torch, name)(x, y), a, randn(2, seed=3))


# split / chunk / unbind ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 5, [1, 3, 1], [0, 5]])
def test_split(size):
    a = randn(5, 3)
    check(lambda x: munet.split(x, size), lambda x: torch.split(x, size), a)
    check(lambda x: x.split(size, 0), lambda x: x.split(size, 0), noncontiguous(a))
    check(lambda x: munet.split(x, size, dim=-1), lambda x: torch.split(x, size, dim=-1), a.T.copy())


def test_split_views_and_errors():
    x = munet.arange(12.0).reshape(4, 3)
    parts = x.split(2)
    assert parts[1].data_ptr() == x.data_ptr() + 6 * x.element_size()
    parts[1][0, 0] = 100.0
    assert x[2, 0].item() == 100.0
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 4"):
        x.split([1, 2])
    with pytest.raises(RuntimeError, match="split expects split_size be non-negative"):
        x.split(-1)


@pytest.mark.parametrize("chunks", [1, 2, 3, 4, 7])
def test_chunk(chunks):
    a = randn(6, 2)
    check(lambda x: munet.chunk(x, chunks), lambda x: torch.chunk(x, chunks), a)
    check(lambda x: x.chunk(chunks, dim=1), lambda x: x.chunk(chunks, dim=1), a.T.copy())
    check(lambda x: munet.chunk(x, chunks), lambda x: torch.chunk(x, chunks), randn(0, 2), grad=False)
    with pytest.raises(RuntimeError, match="chunk expects `chunks` to be greater than 0"):
        munet.chunk(munet.zeros(3), 0)


@pytest.mark.parametrize("arg", [1, 3, 4, 8, [1, 4], [2, -1], [0, 0, 9], [4, 2]])
def test_tensor_split(arg):
    a = randn(7, 2)
    check(lambda x: munet.tensor_split(x, arg), lambda x: torch.tensor_split(x, arg), a)
    check(lambda x: x.tensor_split(arg, dim=1), lambda x: x.tensor_split(arg, dim=1), a.T.copy())


@pytest.mark.parametrize(
    "name,shape,arg",
    [("hsplit", (2, 4), 2), ("hsplit", (6,), [1, 3]), ("vsplit", (4, 2), [1]), ("dsplit", (2, 2, 4), 2)],
)
def test_hvd_split(name, shape, arg):
    check(lambda x: getattr(munet, name)(x, arg), lambda x: getattr(torch, name)(x, arg), randn(*shape))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unbind(dim):
    a = randn(3, 2, 4)
    check(lambda x: munet.unbind(x, dim), lambda x: torch.unbind(x, dim), a)
    check(lambda x: x.unbind(dim), lambda x: x.unbind(dim), noncontiguous(a))
    x = munet.zeros(2, 3)
    assert x.unbind(1)[2].data_ptr() == x.data_ptr() + 2 * x.element_size()


def test_narrow_copy_ravel_moveaxis():
    a = noncontiguous(randn(4, 3, 2))
    check(lambda x: munet.narrow_copy(x, 1, 1, 2), lambda x: torch.narrow_copy(x, 1, 1, 2), a)
    x = munet.zeros(4, 3)
    assert x.narrow_copy(0, 1, 2).data_ptr() != x.data_ptr() + 3 * x.element_size()
    check(munet.ravel, torch.ravel, a)
    check(lambda x: munet.moveaxis(x, 0, -1), lambda x: torch.moveaxis(x, 0, -1), a)


# flip / roll / rot90 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES + ["int64"])
@pytest.mark.parametrize("dims", [(0,), (1,), (0, 2), (-1, 0, 1)])
def test_flip(dtype, dims):
    a = ints(2, 3, 4) if dtype == "int64" else randn(2, 3, 4, dtype=dtype)
    check(lambda x: munet.flip(x, dims), lambda x: torch.flip(x, dims), a)
    check(lambda x: x.flip(*dims), lambda x: x.flip(*dims), noncontiguous(a))


def test_flip_lr_ud_and_errors():
    a = randn(3, 4, 2)
    check(munet.fliplr, torch.fliplr, a)
    check(munet.flipud, torch.flipud, a)
    check(lambda x: x.flip(0), lambda x: x.flip(0), randn(0, 3))
    check(lambda x: x.flip(()), lambda x: x.flip(()), randn())
    with pytest.raises(RuntimeError, match="fliplr: input tensor must be >= 2-d"):
        munet.fliplr(munet.zeros(3))
    with pytest.raises(RuntimeError, match="flip: dim .* appears multiple times"):
        munet.flip(munet.zeros(3, 2), (0, 0))
    x = munet.zeros(3)
    assert munet.flip(x, 0).data_ptr() != x.data_ptr()


@pytest.mark.parametrize(
    "shifts,dims", [(1, None), (-7, None), (2, 0), (-1, 1), ((1, 2), (0, 1)), ((5, -3), (1, -1)), ((1, 1), (0, 0))]
)
def test_roll(shifts, dims):
    a = randn(3, 4, 2)
    check(lambda x: munet.roll(x, shifts, dims), lambda x: torch.roll(x, shifts, dims), a)
    check(lambda x: x.roll(shifts, dims), lambda x: x.roll(shifts, dims), noncontiguous(a))


def test_roll_dtypes_and_errors():
    check(lambda x: munet.roll(x, 1, 0), lambda x: torch.roll(x, 1, 0), ints(4, 2))
    check(lambda x: munet.roll(x, 1, 0), lambda x: torch.roll(x, 1, 0), randn(4, 2, dtype="bfloat16"))
    check(lambda x: munet.roll(x, 3), lambda x: torch.roll(x, 3), randn(0, 2), grad=False)
    with pytest.raises(RuntimeError, match="roll: shifts and dimensions must align"):
        munet.roll(munet.zeros(3, 2), (1, 2), 0)


@pytest.mark.parametrize("k", [-3, -1, 0, 1, 2, 3, 5])
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (2, 0)])
def test_rot90(k, dims):
    check(lambda x: munet.rot90(x, k, dims), lambda x: torch.rot90(x, k, dims), randn(2, 3, 4))


def test_rot90_errors():
    with pytest.raises(RuntimeError, match="expected total rotation dims == 2"):
        munet.rot90(munet.zeros(2, 2), 1, (0, 1, 2))
    with pytest.raises(RuntimeError, match="expected rotation dims to be different"):
        munet.rot90(munet.zeros(2, 2), 1, (1, 1))
    with pytest.raises(RuntimeError, match="expected total dims >= 2"):
        munet.rot90(munet.zeros(2), 1)


# repeat / tile / repeat_interleave --------------------------------------------------------------------


@pytest.mark.parametrize("reps", [(1, 1), (2, 3), (3, 1, 2), (2, 0), (1, 2, 1, 1)])
def test_repeat(reps):
    a = randn(2, 3)
    check(lambda x: x.repeat(*reps), lambda x: x.repeat(*reps), a)
    check(lambda x: x.repeat(reps), lambda x: x.repeat(reps), noncontiguous(a))


def test_repeat_copies_rank0_and_errors():
    x = munet.zeros(2, 3)
    y = x.repeat(1, 1)
    y[0, 0] = 1.0
    assert x[0, 0].item() == 0.0
    check(lambda x: x.repeat(3), lambda x: x.repeat(3), randn())
    check(lambda x: x.repeat(2, 2), lambda x: x.repeat(2, 2), ints(3))
    with pytest.raises(RuntimeError, match="can not be smaller than number of dimensions"):
        x.repeat(2)


@pytest.mark.parametrize("dims", [(2,), (2, 1), (1, 1, 3), ()])
def test_tile(dims):
    a = randn(2, 3)
    check(lambda x: munet.tile(x, dims), lambda x: torch.tile(x, dims), a)
    check(lambda x: x.tile(dims), lambda x: x.tile(dims), a)


@pytest.mark.parametrize("repeats,dim", [(2, None), (3, 0), (2, 1), (0, 1), (1, -1)])
def test_repeat_interleave_int(repeats, dim):
    a = randn(2, 3)
    check(lambda x: munet.repeat_interleave(x, repeats, dim), lambda x: torch.repeat_interleave(x, repeats, dim), a)
    check(lambda x: x.repeat_interleave(repeats, dim=dim), lambda x: x.repeat_interleave(repeats, dim=dim), a)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_repeat_interleave_tensor(dtype):
    a = randn(3, 2, dtype=dtype)
    reps = [2, 0, 3]
    check(
        lambda x: munet.repeat_interleave(x, munet.tensor(reps), 0),
        lambda x: torch.repeat_interleave(x, torch.tensor(reps), 0),
        a,
    )
    check(
        lambda x: x.repeat_interleave(munet.tensor([1, 3]), dim=1),
        lambda x: x.repeat_interleave(torch.tensor([1, 3]), dim=1),
        noncontiguous(a),
    )
    check(lambda x: x.repeat_interleave(munet.tensor([2])), lambda x: x.repeat_interleave(torch.tensor([2])), a)
    check(
        lambda x: munet.repeat_interleave(x, munet.tensor(reps), 0),
        lambda x: torch.repeat_interleave(x, torch.tensor(reps), 0),
        ints(3, 2),
    )


def test_repeat_interleave_indices_and_errors():
    out = munet.repeat_interleave(munet.tensor([1, 0, 3]))
    assert out.dtype is munet.int64 and out.tolist() == [0, 2, 2, 2]
    with pytest.raises(RuntimeError, match="repeats must have the same size as input along dim"):
        munet.repeat_interleave(munet.zeros(3), munet.tensor([1, 2]), 0)
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        munet.repeat_interleave(munet.zeros(3), -1)


# tril / triu / diagonals ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tril", "triu"])
@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3])
@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 3), (0, 3)])
def test_tril_triu(name, diagonal, shape):
    a = randn(*shape)
    check(lambda x: getattr(munet, name)(x, diagonal), lambda x: getattr(torch, name)(x, diagonal), a)
    check(
        lambda x: getattr(x, name)(diagonal=diagonal), lambda x: getattr(x, name)(diagonal=diagonal), noncontiguous(a)
    )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int64"])
def test_tril_triu_dtypes(dtype):
    a = ints(3, 3) if dtype == "int64" else randn(3, 3, dtype=dtype)
    check(munet.tril, torch.tril, a)
    check(lambda x: munet.triu(x, 1), lambda x: torch.triu(x, 1), a)
    check(munet.triu, torch.triu, np.ones((3, 3), dtype=bool))


def test_tril_triu_inplace():
    def run(lib, x):
        y = x * 2
        y.tril_(-1)
        z = x + 1
        z.triu_(1)
        return y + z

    check(lambda x: run(munet, x), lambda x: run(torch, x), randn(3, 4))
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        munet.tril(munet.zeros(3))


@pytest.mark.parametrize(
    "offset,dim1,dim2", [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (2, 1, 2), (-1, 2, 0), (0, -1, -2), (9, 0, 1)]
)
def test_diagonal(offset, dim1, dim2):
    a = randn(3, 4, 5)
    check(lambda x: munet.diagonal(x, offset, dim1, dim2), lambda x: torch.diagonal(x, offset, dim1, dim2), a)
    check(lambda x: x.diagonal(offset, dim1, dim2), lambda x: x.diagonal(offset, dim1, dim2), noncontiguous(a))
    m, t = munet.zeros(3, 4, 5), torch.zeros(3, 4, 5)
    mv, tv = m.diagonal(offset, dim1, dim2), t.diagonal(offset, dim1, dim2)
    assert mv.stride() == tv.stride() and mv.storage_offset() == tv.storage_offset()


def test_diagonal_is_view_and_double_backward():
    x = munet.zeros(3, 3)
    x.diagonal().fill_(1.0)
    np.testing.assert_array_equal(x.numpy(), np.eye(3))
    gradcheck(lambda x: x.diagonal(1) ** 2, randn(3, 4, dtype="float64"))
    xm = munet.tensor(randn(3, 3, dtype="float64"), requires_grad=True)
    (g,) = munet.autograd.grad((xm.diagonal() ** 3).sum(), xm, create_graph=True)
    g.sum().backward()
    expected = np.diag(6 * np.diag(xm.detach().numpy()))
    np.testing.assert_allclose(xm.grad.numpy(), expected)
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical"):
        munet.diagonal(x, 0, 1, -1)


@pytest.mark.parametrize("offset,dim1,dim2", [(0, -2, -1), (1, 0, 2), (-2, 1, 0), (0, 2, 1)])
def test_diag_embed(offset, dim1, dim2):
    a = randn(2, 3)
    check(lambda x: munet.diag_embed(x, offset, dim1, dim2), lambda x: torch.diag_embed(x, offset, dim1, dim2), a)
    check(lambda x: x.diag_embed(offset, dim1, dim2), lambda x: x.diag_embed(offset, dim1, dim2), noncontiguous(a))


@pytest.mark.parametrize(
    "shape,k", [((3,), 0), ((3,), 2), ((3,), -1), ((3, 4), 0), ((3, 4), 2), ((3, 4), -1), ((0,), 1)]
)
def test_diag(shape, k):
    a = randn(*shape)
    check(lambda x: munet.diag(x, k), lambda x: torch.diag(x, k), a)
    check(lambda x: x.diag(k), lambda x: x.diag(k), ints(*shape))


def test_diag_trace_errors_and_values():
    with pytest.raises(RuntimeError, match="diag\\(\\): Supports 1D or 2D tensors. Got 3D"):
        munet.diag(munet.zeros(2, 2, 2))
    with pytest.raises(RuntimeError, match="trace: expected a matrix"):
        munet.trace(munet.zeros(2))
    for shape in [(3, 3), (2, 5), (4, 1)]:
        check(munet.trace, torch.trace, randn(*shape))
        check(lambda x: x.trace(), lambda x: x.trace(), noncontiguous(randn(*shape)))
    x = munet.zeros(3, 3)
    assert x.diag().data_ptr() != x.data_ptr()


# broadcasting / meshgrid ------------------------------------------------------------------------------


def test_broadcast_to_and_tensors():
    a = randn(3, 1)
    check(lambda x: munet.broadcast_to(x, (2, 3, 4)), lambda x: torch.broadcast_to(x, (2, 3, 4)), a)
    check(lambda x: x.broadcast_to((-1, 5)), lambda x: x.broadcast_to((-1, 5)), a)
    b, c = randn(4, seed=2), randn(seed=3)
    check(lambda *t: munet.broadcast_tensors(*t), lambda *t: torch.broadcast_tensors(*t), a, b, c)
    x = munet.zeros(3, 1)
    y = munet.broadcast_to(x, (3, 4))
    assert y.stride() == (1, 0) and y.data_ptr() == x.data_ptr()
    assert munet.broadcast_shapes((3, 1), (4,), 1) == torch.broadcast_shapes((3, 1), (4,), 1)
    with pytest.raises(RuntimeError, match="broadcast_tensors: the size of tensors must match"):
        munet.broadcast_tensors(munet.zeros(2), munet.zeros(3))
    with pytest.raises(RuntimeError, match="expanded size of the tensor \\(4\\) must match the existing size \\(3\\)"):
        munet.broadcast_to(x, (4, 2))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
    a, b, c = randn(3, seed=1), randn(2, seed=2), randn(4, seed=3)
    check(lambda *t: munet.meshgrid(*t, indexing=indexing), lambda *t: torch.meshgrid(*t, indexing=indexing), a, b)
    check(lambda *t: munet.meshgrid(t, indexing=indexing), lambda *t: torch.meshgrid(t, indexing=indexing), a, b, c)
    check(lambda *t: munet.meshgrid(*t, indexing=indexing), lambda *t: torch.meshgrid(*t, indexing=indexing), a)
    check(
        lambda *t: munet.meshgrid(*t, indexing=indexing), lambda *t: torch.meshgrid(*t, indexing=indexing), randn(), b
    )
    mx, _ = munet.meshgrid(munet.zeros(3), munet.zeros(2), indexing=indexing)
    tx, _ = torch.meshgrid(torch.zeros(3), torch.zeros(2), indexing=indexing)
    assert mx.stride() == tx.stride()


def test_meshgrid_errors():
    with pytest.raises(RuntimeError, match="Expected 0D or 1D tensor"):
        munet.meshgrid(munet.zeros(2, 2))
    with pytest.raises(RuntimeError, match="indexing must be one of"):
        munet.meshgrid(munet.zeros(2), indexing="ab")


# pad ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pad", [(1, 2), (0, 0, 1, 1), (2, 0, 0, 1, 1, 1), (-1, 1), (1, -2, -1, 0), (0, 0, 0, 0, 1, 0)])
@pytest.mark.parametrize("value", [0.0, 2.5])
def test_pad_constant(pad, value):
    a = randn(2, 3, 4)
    check(lambda x: F.pad(x, pad, value=value), lambda x: TF.pad(x, pad, value=value), a)
    check(lambda x: F.pad(x, pad, "constant", value), lambda x: TF.pad(x, pad, "constant", value), noncontiguous(a))


def test_pad_constant_dtypes_rank_and_copy():
    for dtype in DTYPES:
        check(lambda x: F.pad(x, (1, 1), value=1.0), lambda x: TF.pad(x, (1, 1), value=1.0), randn(3, dtype=dtype))
    check(lambda x: F.pad(x, (1, 0), value=7), lambda x: TF.pad(x, (1, 0), value=7), ints(2, 2))
    check(lambda x: F.pad(x, (1, 1)), lambda x: TF.pad(x, (1, 1)), randn(0, 2))
    x = munet.zeros(2)
    assert F.pad(x, (0, 0)).data_ptr() != x.data_ptr()


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "shape,pad",
    [
        ((2, 5), (2, 1)),
        ((1, 2, 5), (0, 3)),
        ((1, 2, 3, 4), (1, 2, 2, 0)),
        ((2, 4, 3), (1, 1, 2, 2)),
        ((1, 1, 3, 3, 3), (1, 0, 0, 2, 1, 1)),
        ((1, 2, 5), (-1, 2)),
    ],
)
def test_pad_modes(mode, shape, pad):
    a = randn(*shape)
    check(lambda x: F.pad(x, pad, mode=mode), lambda x: TF.pad(x, pad, mode=mode), a)
    check(lambda x: F.pad(x, pad, mode), lambda x: TF.pad(x, pad, mode), noncontiguous(a))


def test_pad_errors():
    x = munet.zeros(1, 2, 3)
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        F.pad(x, (3, 3), mode="reflect")
    with pytest.raises(RuntimeError, match="Padding value causes wrapping around more than once"):
        F.pad(x, (4, 0), mode="circular")
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(
        RuntimeError, match="Padding length should be less than or equal to two times the input dimension"
    ):
        F.pad(x, (1,) * 8)
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode foo"):
        F.pad(x, (1, 1), mode="foo")
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 1D input tensor"):
        F.pad(munet.zeros(3), (1, 1), mode="reflect")
    with pytest.raises(RuntimeError, match="resulted in a negative output size"):
        F.pad(x, (-2, -2))


def test_pad_double_backward():
    gradcheck(lambda x: F.pad(x, (1, 2), mode="reflect") ** 2, randn(1, 2, 4, dtype="float64"))
    gradcheck(lambda x: F.pad(x, (1, -1, 0, 2), value=3.0) ** 2, randn(2, 3, dtype="float64"))


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x: lib.cat([x, x[:1] * 2], 0),
        lambda lib, x: lib.flip(x, (0, 1)),
        lambda lib, x: lib.roll(x, (1, -2), (0, 1)),
        lambda lib, x: lib.tril(x, 1),
        lambda lib, x: x.repeat(2, 1, 2),
        lambda lib, x: lib.diag_embed(x, 1),
        lambda lib, x: lib.stack(lib.split(x, 2, 1), 0),
        lambda lib, x: (F if lib is munet else TF).pad(x.unsqueeze(0), (2, 1), mode="reflect"),
    ],
)
def test_double_backward(fn):
    grads = []
    for lib in (munet, torch):
        x = lib.tensor(randn(3, 4, dtype="float64"), requires_grad=True)
        (g,) = lib.autograd.grad((fn(lib, x) ** 3).sum(), x, create_graph=True)
        (g**2).sum().backward()
        grads.append(x.grad)
    np.testing.assert_allclose(grads[0].numpy(), grads[1].numpy(), rtol=1e-10)


@pytest.mark.parametrize(("n", "dim"), [(1, -1), (2, 0), (3, 1), (0, 1), (7, -1)])
def test_diff(n, dim):
    x = randn(4, 5, 3)
    check(lambda a: munet.diff(a, n, dim), lambda a: torch.diff(a, n, dim), x)
    check(lambda a: a.diff(n=n, dim=dim), lambda a: a.diff(n=n, dim=dim), noncontiguous(x))


def test_diff_prepend_append_bool_and_errors():
    x, before, after = randn(3, 4), randn(3, 1, seed=2), randn(3, 2, seed=3)
    check(
        lambda a, p, q: munet.diff(a, 2, prepend=p, append=q),
        lambda a, p, q: torch.diff(a, 2, prepend=p, append=q),
        x,
        before,
        after,
    )
    check(lambda a: munet.diff(a), lambda a: torch.diff(a), np.array([True, False, False, True]))
    check(lambda a: munet.diff(a, dim=0), lambda a: torch.diff(a, dim=0), np.array([[1, 4], [9, 2]]))
    with pytest.raises(RuntimeError, match="at least one-dimensional"):
        munet.diff(munet.tensor(1.0))
    with pytest.raises(RuntimeError, match="non-negative"):
        munet.diff(munet.ones(3), n=-1)
