"""Indexing ops vs PyTorch: advanced indexing, index_put, gather/scatter, index_*, masked_*, nonzero."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close, check, gradcheck, noncontiguous, randn


def both(arr):
    """The same integer/bool index array as a munet tensor and a torch tensor."""
    return munet.tensor(arr), torch.tensor(arr)


def check_index(x, make_index, **kw):
    """``x[index]`` forward and gradient, with ``make_index(lib_tensor)`` building the index per library."""
    check(lambda a: a[make_index(munet.tensor)], lambda a: a[make_index(torch.tensor)], x, **kw)


# advanced indexing --------------------------------------------------------------------------------

INDEXES = [
    lambda mk: mk([0, 2, 2, -1]),  # duplicates and a negative index
    lambda mk: (mk([[0], [1]]), mk([1, 2, 0])),  # broadcasting index tensors
    lambda mk: (0, slice(None), mk([1, 3])),  # int then tensor: the int is a select (PyTorch)
    lambda mk: (mk([0, 1]), slice(None), mk([1, 3])),  # non-adjacent advanced dims move to the front
    lambda mk: (slice(None), mk([1, 0]), mk([3, 2])),  # adjacent advanced dims stay in place
    lambda mk: (None, mk([0, 1]), None, slice(1, 3), mk([1, 2])),
    lambda mk: (Ellipsis, mk([3, 0])),
    lambda mk: (mk([1]), Ellipsis, None),
    lambda mk: (mk(1), slice(None), mk([0, 2])),  # 0-dim tensor index acts like an int
    lambda mk: mk(np.zeros((0,), np.int64)),  # empty index tensor
    lambda mk: (slice(None), mk(np.zeros((2, 0), np.int64))),
    lambda mk: mk(np.array([[2, 1], [0, 0]], np.int32)),  # int32 indices
    lambda mk: [0, 2],  # a list of ints is one index
    lambda mk: [[0, 1], [1, 2]],  # a list of lists is a tuple of indices
    lambda mk: np.array([1, 0]),
    lambda mk: (slice(None, None, 2), mk([[1, 2]]), 1),
]


@pytest.mark.parametrize("case", range(len(INDEXES)))
def test_advanced_index(case):
    x = randn(3, 4, 5)
    check_index(x, INDEXES[case])


def test_advanced_index_noncontiguous_and_dtypes():
    x = noncontiguous(randn(3, 4, 5))
    check_index(x, lambda mk: (mk([2, 0]), slice(None), mk([4, 1])))
    check_index(randn(3, 4, dtype="float64"), lambda mk: mk([[1, 2], [0, 0]]))
    for dtype in ("float16", "bfloat16"):
        check_index(randn(3, 4, dtype=dtype), lambda mk: (slice(None), mk([3, 3, 0])))
    xi = np.arange(12, dtype=np.int32).reshape(3, 4)
    check_index(xi, lambda mk: (mk([2, 0]), mk([1, 1])))
    check_index(np.array([True, False, True]), lambda mk: mk([2, 1]))


def test_bool_masks():
    x = randn(3, 4, 5)
    mask = np.random.default_rng(1).random((3, 4)) > 0.5
    check_index(x, lambda mk: mk(mask))
    check_index(x, lambda mk: (slice(None), mk(mask[0])))
    check_index(x, lambda mk: (mk(mask[:, 0]), 1))
    check_index(x, lambda mk: (mk([True, False, True]), slice(None), mk([0, 4])))
    check_index(x, lambda mk: mk(np.zeros((3, 4, 5), bool)))  # empty selection
    check_index(x, lambda mk: True)
    check_index(x, lambda mk: (False, 1))
    check_index(x, lambda mk: mk(True))
    check_index(randn(), lambda mk: mk(True))


def test_index_is_a_copy():
    x = munet.arange(6.0)
    y = x[munet.tensor([1, 2])]
    y += 10
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    z = x[munet.tensor([1])]
    assert z.item() == 1.0 and z.data_ptr() != x[1].data_ptr()


def test_index_with_python_and_numpy_scalars():
    """NumPy integers and 0-dim integer tensors select like ints (a view, as in PyTorch); a range is a
    list of indices; a NumPy bool is refused as PyTorch refuses it."""
    x = randn(3, 4, 5)
    for make_index in (
        lambda mk: np.int64(1),
        lambda mk: (slice(None), np.int32(-1)),
        lambda mk: (np.int64(2), np.int16(0), np.uint8(4)),
        lambda mk: range(2),
        lambda mk: range(0),
        lambda mk: (0, range(1, 4, 2)),
        lambda mk: (np.int64(1), range(3), mk([0, 1, 2])),
        lambda mk: [range(2)],
        lambda mk: mk(2),
        lambda mk: (mk(1), slice(None), mk(np.int32(3))),
    ):
        check_index(x, make_index)
    base = munet.arange(12.0).reshape(3, 4)
    for item in (np.int64(1), munet.tensor(1), munet.tensor(1, dtype=munet.int32)):
        assert base[item].data_ptr() == base[1].data_ptr()
    assert base[range(2)].data_ptr() != base.data_ptr()
    for lib in (torch, munet):
        with pytest.raises(IndexError, match="only integers, slices"):
            lib.zeros(3)[np.bool_(True)]


def test_setitem_with_python_and_numpy_scalars():
    def run(lib):
        x = lib.zeros(3, 4)
        x[np.int64(0)] = 7
        x[range(1, 2)] = 8
        x[:, range(2)] = lib.tensor([1.0, 2.0])
        x[lib.tensor(2), np.int64(3)] = -1
        x[np.int32(2), lib.tensor([0, 1])] = lib.tensor(5.0)
        return x

    assert_close(run(munet), run(torch))


def test_index_double_backward():
    gradcheck(lambda a: a[munet.tensor([0, 0, 2])] * a[munet.tensor([1, 0, 2])], randn(3, 2, dtype="float64"))
    x = munet.tensor(randn(3, dtype="float64"), requires_grad=True)
    (g,) = munet.autograd.grad((x[munet.tensor([0, 0, 1])] * x[munet.tensor([0, 0, 1])]).sum(), x, create_graph=True)
    (gg,) = munet.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [4.0, 2.0, 0.0])


def test_index_errors():
    x = munet.zeros(3, 4)
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for dimension 0 with size 3"):
        x[munet.tensor([0, 3])]
    with pytest.raises(IndexError, match=r"index -5 is out of bounds for dimension 1 with size 4"):
        x[:, munet.tensor([-5])]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool"):
        x[munet.tensor([0.0])]
    with pytest.raises(IndexError, match=r"shape of the mask \[4\] at index 0 does not match .* \[3, 4\] at index 0"):
        x[munet.ones(4, dtype=munet.bool)]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        x[munet.tensor([0]), 0, 0]
    with pytest.raises(IndexError, match=r"could not be broadcast together with shapes \[2\], \[3\]"):
        x[munet.tensor([0, 1]), munet.tensor([0, 1, 2])]


# setitem / index_put --------------------------------------------------------------------------------


SETITEM = [
    (lambda mk: mk([0, 2]), (2, 4)),
    (lambda mk: mk([0, 2]), (4,)),  # values broadcast
    (lambda mk: (mk([[0], [2]]), mk([1, 3])), (2, 2)),
    (lambda mk: (slice(None), mk([3, 1])), (3, 1)),
    (lambda mk: (mk([True, False, True]),), (1, 4)),
    (lambda mk: (mk([1, 2]), slice(1, 3)), (2, 2)),
    (lambda mk: (1, mk([0, 3])), ()),
    (lambda mk: (mk([0, 2]), None, mk([1, 1])), (1, 2, 1)),  # value has leading 1-dims to drop
]


@pytest.mark.parametrize("case", range(len(SETITEM)))
def test_setitem_forward_and_grad(case):
    make_index, vshape = SETITEM[case]

    def run(mk, lib):
        def fn(x, v):
            y = x * 1
            y[make_index(mk)] = v
            return y

        return fn

    check(run(munet.tensor, munet), run(torch.tensor, torch), randn(3, 4), randn(*vshape, seed=2))


def test_setitem_scalar_cast_and_version():
    x = munet.zeros(5)
    v0 = x._version
    x[munet.tensor([1, 3])] = 2
    x[[0]] = munet.tensor([7])  # int values are cast like PyTorch's setitem
    assert x.tolist() == [7.0, 2.0, 0.0, 2.0, 0.0]
    assert x._version == v0 + 2
    view = x[1:]
    view[munet.tensor([0])] = 5.0
    assert x.tolist() == [7.0, 5.0, 0.0, 2.0, 0.0]


def test_setitem_leaf_error():
    x = munet.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[munet.tensor([0])] = 1.0
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[munet.tensor([0, 1]), None] = 1.0


def test_setitem_view_of_leaf_error():
    x = munet.zeros(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0][munet.tensor([1])] = 1.0
    with munet.no_grad():
        x[0][munet.tensor([1])] = 1.0
    assert x.grad_fn is None and x.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]


def test_setitem_values_require_grad():
    def fn(lib, mk):
        def f(w):
            z = lib.zeros(2, 3, dtype=w.dtype)
            z[mk([True, False])] = w
            return z * z

        return f

    check(fn(munet, munet.tensor), fn(torch, torch.tensor), randn(3))


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_with_zeros(include_self):
    x = np.array([[0.0, 2.0, 3.0], [4.0, 5.0, 0.0]])
    src = np.array([[2.0, 0.0, 0.0], [3.0, 0.0, 0.5], [0.0, 1.5, 2.0]])
    mi, ti = both(np.array([[0, 0, 1], [0, 1, 1], [1, 1, 0]]))
    check(
        lambda a, s: a.scatter_reduce(0, mi, s, "prod", include_self=include_self),
        lambda a, s: a.scatter_reduce(0, ti, s, "prod", include_self=include_self),
        x,
        src,
    )


def test_scatter_reduce_ties_share_gradient():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    src = np.array([[1.0, 5.0], [3.0, 4.0], [3.0, 0.0]])
    mi, ti = both(np.array([[0, 0], [1, 1], [1, 0]]))
    for reduce in ("amax", "amin"):
        check(lambda a, s: a.scatter_reduce(0, mi, s, reduce), lambda a, s: a.scatter_reduce(0, ti, s, reduce), x, src)


def test_setitem_through_view_of_nonleaf_grad():
    def fn(lib, mk):
        def f(x, v):
            y = x * 2
            row = y[1]
            row[mk([0, 2])] = v
            return y * row.sum()

        return f

    check(fn(munet, munet.tensor), fn(torch, torch.tensor), randn(3, 4), randn(2, seed=4))


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate):
    i0, t0 = both([0, 2, 0, 1])
    i1, t1 = both([1, 1, 1, 3])
    v = randn(4, seed=2)
    x = randn(3, 4)
    if accumulate:  # duplicate positions add up
        check(
            lambda a, b: munet.index_put(a, (i0, i1), b, True), lambda a, b: torch.index_put(a, (t0, t1), b, True), x, v
        )
    else:
        v = randn(1, seed=2)  # duplicates write the same value, so the result is well defined
        check(lambda a, b: a.index_put((i0, i1), b), lambda a, b: a.index_put((t0, t1), b), x, v)
    m = munet.tensor(x.copy())
    t = torch.tensor(x)
    m.index_put_((i0,), munet.tensor(1.5), accumulate=accumulate)
    t.index_put_((t0,), torch.tensor(1.5), accumulate=accumulate)
    assert_close(m, t)


def test_index_put_low_precision_and_int_accumulate():
    for dtype in ("float16", "bfloat16"):
        x = randn(5, dtype=dtype)
        i, ti = both([0, 0, 3])
        check(
            lambda a, b: munet.index_put(a, (i,), b, True),
            lambda a, b: torch.index_put(a, (ti,), b, True),
            x,
            randn(3, dtype=dtype, seed=2),
        )
    xi = np.arange(5, dtype=np.int64)
    i, ti = both([4, 4, 4])
    assert_close(
        munet.index_put(munet.tensor(xi), (i,), munet.tensor([1, 2, 3]), True),
        torch.index_put(torch.tensor(xi), (ti,), torch.tensor([1, 2, 3]), True),
    )


def test_index_put_errors():
    x = munet.zeros(3, 4)
    with pytest.raises(
        RuntimeError,
        match=r"shape mismatch: value tensor of shape \[3\] cannot be broadcast to indexing result of shape \[2, 4\]",
    ):
        x[munet.tensor([0, 1])] = munet.ones(3)
    with pytest.raises(IndexError, match="index_put_: index 7 is out of bounds for dimension 0 with size 3"):
        x.index_put_((munet.tensor([7]),), munet.tensor(1.0))


# gather / scatter -------------------------------------------------------------------------------------


def test_gather():
    x = randn(3, 4, 5)
    idx = np.random.default_rng(2).integers(0, 3, size=(2, 4, 3))
    mi, ti = both(idx)
    check(lambda a: munet.gather(a, 0, mi), lambda a: torch.gather(a, 0, ti), x)
    idx = np.random.default_rng(2).integers(0, 4, size=(3, 6, 5))
    mi, ti = both(idx)
    check(lambda a: a.gather(-2, mi), lambda a: a.gather(-2, ti), noncontiguous(x))
    mi, ti = both(np.zeros((3, 0, 5), np.int64))
    check(lambda a: a.gather(1, mi), lambda a: a.gather(1, ti), x)
    mi, ti = both(np.array(2))
    check(lambda a: a.gather(0, mi), lambda a: a.gather(0, ti), randn(4))
    gradcheck(
        lambda a: (
            munet.gather(a, 1, munet.tensor([[0, 0], [2, 1]])) * munet.gather(a, 1, munet.tensor([[0, 0], [2, 1]]))
        ),
        randn(2, 3, dtype="float64"),
    )


def test_gather_errors():
    x = munet.zeros(3, 4)
    with pytest.raises(RuntimeError, match="gather: index 5 is out of bounds for dimension 1 with size 4"):
        x.gather(1, munet.tensor([[5]]))
    with pytest.raises(IndexError, match="gather: index -1 is out of bounds"):
        x.gather(1, munet.tensor([[-1]]))
    with pytest.raises(RuntimeError, match="gather: expected dtype int64 for index, got int32"):
        x.gather(1, munet.tensor([[1]], dtype=munet.int32))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.gather(1, munet.tensor([1]))
    with pytest.raises(
        RuntimeError, match=r"expected index \[4, 1\] to be smaller than self \[3, 4\] apart from dimension 1"
    ):
        x.gather(1, munet.zeros(4, 1, dtype=munet.int64))


@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
def test_scatter(reduce):
    x = randn(3, 5)
    src = randn(2, 5, seed=2)
    idx = np.array([[0, 1, 2, 0, 1], [2, 0, 1, 1, 0]])  # unique per column: scatter is deterministic
    mi, ti = both(idx)
    kw = {} if reduce is None else {"reduce": reduce}
    grad = reduce is None  # PyTorch has no gradient for scatter with reduce=; ours is checked by gradcheck
    check(
        lambda a, s: munet.scatter(a, 0, mi, s, **kw), lambda a, s: torch.scatter(a, 0, ti, s, **kw), x, src, grad=grad
    )
    check(lambda a: a.scatter(0, mi, 2.5, **kw), lambda a: a.scatter(0, ti, 2.5, **kw), x, grad=grad)
    mi2, ti2 = both(idx[:1, :3])  # index smaller than src and self; PyTorch's src gradient fails here
    check(lambda a, s: a.scatter(1, mi2, s, **kw), lambda a, s: a.scatter(1, ti2, s, **kw), x, src, grad=False)
    if reduce != "multiply":
        gradcheck(lambda a, s: munet.scatter(a, 1, mi2, s, **kw), x.astype(np.float64), src.astype(np.float64))


def test_scatter_add_and_inplace():
    x = randn(3, 5)
    src = randn(4, 5, seed=2)
    idx = np.random.default_rng(3).integers(0, 3, size=(4, 5))  # duplicates add up
    mi, ti = both(idx)
    check(lambda a, s: munet.scatter_add(a, 0, mi, s), lambda a, s: torch.scatter_add(a, 0, ti, s), x, src)
    check(
        lambda a, s: (a * 1).scatter_add_(0, mi, s), lambda a, s: (a * 1).scatter_add_(0, ti, s), noncontiguous(x), src
    )
    check(lambda a, s: (a * 1).scatter_(0, mi[:1], s[:1]), lambda a, s: (a * 1).scatter_(0, ti[:1], s[:1]), x, src)
    m, t = munet.zeros(3, 5, dtype=munet.int64), torch.zeros(3, 5, dtype=torch.int64)
    assert_close(
        m.scatter_add_(0, mi, munet.ones(4, 5, dtype=munet.int64)),
        t.scatter_add_(0, ti, torch.ones(4, 5, dtype=torch.int64)),
    )
    v0 = m._version
    m.scatter_(1, munet.tensor([[0]]), 9)
    assert m._version == v0 + 1 and m[0, 0].item() == 9


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce(reduce, include_self):
    rng = np.random.default_rng(5)
    x = (rng.random((3, 4)) + 0.5).astype(np.float64)  # away from zero: prod's gradient divides
    src = (rng.random((5, 4)) + 0.5).astype(np.float64)
    mi, ti = both(rng.integers(0, 3, size=(5, 4)))
    check(
        lambda a, s: munet.scatter_reduce(a, 0, mi, s, reduce, include_self=include_self),
        lambda a, s: torch.scatter_reduce(a, 0, ti, s, reduce, include_self=include_self),
        x,
        src,
    )
    xi = rng.integers(-5, 5, size=(3, 4))
    si = rng.integers(-5, 5, size=(5, 4))
    assert_close(
        munet.tensor(xi).scatter_reduce_(0, mi, munet.tensor(si), reduce, include_self=include_self),
        torch.tensor(xi).scatter_reduce_(0, ti, torch.tensor(si), reduce, include_self=include_self),
    )


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_extremes_of_integers_reach_the_dtype_limits(reduce):
    limit = -128 if reduce == "amax" else 127  # the identity must not clip the reduced values
    mi, ti = both(np.array([[0, 1, 1]]))
    x, src = np.array([[5, 5, 5]], np.int8), np.full((1, 3), limit, np.int8)
    assert_close(
        munet.tensor(x).scatter_reduce(1, mi, munet.tensor(src), reduce, include_self=False),
        torch.tensor(x).scatter_reduce(1, ti, torch.tensor(src), reduce, include_self=False),
    )


def test_scatter_errors():
    x = munet.zeros(3, 4)
    with pytest.raises(RuntimeError, match="scatter: index 3 is out of bounds for dimension 0 with size 3"):
        x.scatter(0, munet.tensor([[3]]), 1.0)
    with pytest.raises(RuntimeError, match="scatter: expected self.dtype to be equal to src.dtype"):
        x.scatter(0, munet.tensor([[0]]), munet.ones(1, 1, dtype=munet.float64))
    with pytest.raises(RuntimeError, match="reduce argument must be one of sum, prod, mean, amax, amin"):
        x.scatter_reduce(0, munet.tensor([[0]]), munet.ones(1, 1), "max")


# index_select / index_add / index_copy / index_fill / take ---------------------------------------


@pytest.mark.parametrize("itype", ["int64", "int32"])
def test_index_select(itype):
    mi, ti = both(np.array([2, 0, 2], itype))
    x = randn(3, 4)
    check(lambda a: munet.index_select(a, 0, mi), lambda a: torch.index_select(a, 0, ti), x)
    check(lambda a: a.index_select(-1, mi), lambda a: a.index_select(-1, ti), noncontiguous(x))
    mi, ti = both(np.zeros(0, itype))
    check(lambda a: a.index_select(1, mi), lambda a: a.index_select(1, ti), x)
    mi, ti = both(np.array(1, itype))
    check(lambda a: a.index_select(1, mi), lambda a: a.index_select(1, ti), x)
    with pytest.raises(IndexError, match="index_select: index -1 is out of bounds for dimension 0 with size 3"):
        munet.zeros(3).index_select(0, munet.tensor([-1]))
    with pytest.raises(IndexError, match="index_select: index is supposed to be a vector"):
        munet.zeros(3).index_select(0, munet.tensor([[0]]))


def test_index_add_copy_fill():
    x = randn(4, 3)
    src = randn(3, 3, seed=2)
    mi, ti = both([3, 0, 3])
    check(
        lambda a, s: munet.index_add(a, 0, mi, s, alpha=2.0),
        lambda a, s: torch.index_add(a, 0, ti, s, alpha=2.0),
        x,
        src,
    )
    check(
        lambda a, s: (a * 1).index_add_(1, munet.tensor([2, 0]), s),
        lambda a, s: (a * 1).index_add_(1, torch.tensor([2, 0]), s),
        x,
        randn(4, 2, seed=4),
    )
    mu, tu = both([2, 0, 1])
    check(lambda a, s: a.index_copy(0, mu, s), lambda a, s: a.index_copy(0, tu, s), x, src)
    check(
        lambda a: a.index_fill(1, munet.tensor([-1, 0]), 3.5), lambda a: a.index_fill(1, torch.tensor([-1, 0]), 3.5), x
    )
    check(lambda a, v: a.index_fill(0, mu, v), lambda a, v: a.index_fill(0, tu, v), x, randn(seed=3))
    m, t = munet.tensor(x.copy()), torch.tensor(x)
    assert_close(m.index_fill_(0, mu, -1.0), t.index_fill_(0, tu, -1.0))
    assert_close(m.index_copy_(0, mu, munet.tensor(src)), t.index_copy_(0, tu, torch.tensor(src)))
    with pytest.raises(RuntimeError, match=r"index_add_: expected source of shape \[3, 3\], got \[2, 3\]"):
        munet.zeros(4, 3).index_add_(0, munet.tensor([0, 1, 2]), munet.ones(2, 3))
    with pytest.raises(IndexError, match="index_copy_: index -1 is out of bounds for dimension 0 with size 4"):
        munet.zeros(4, 3).index_copy_(0, munet.tensor([-1]), munet.ones(1, 3))


def test_take_and_take_along_dim():
    x = randn(3, 4)
    mi, ti = both([[0, -1], [5, 5]])
    check(lambda a: munet.take(a, mi), lambda a: torch.take(a, ti), noncontiguous(x))
    with pytest.raises(IndexError, match="take: index 12 is out of bounds"):
        munet.take(munet.zeros(3, 4), munet.tensor([12]))
    idx = np.argsort(x, axis=1)[:, :2]
    mi, ti = both(idx)
    check(lambda a: munet.take_along_dim(a, mi, 1), lambda a: torch.take_along_dim(a, ti, 1), x)
    mi, ti = both(np.array([[1], [0], [2]]))  # broadcast over dim 1
    check(lambda a: a.take_along_dim(mi, 0), lambda a: a.take_along_dim(ti, 0), x)
    mi, ti = both(np.array([[0, 2, 1]]))
    check(lambda a: a.take_along_dim(mi, 1), lambda a: a.take_along_dim(ti, 1), randn(3, 4))
    mi, ti = both(np.array([11, 0, 3]))
    check(lambda a: munet.take_along_dim(a, mi), lambda a: torch.take_along_dim(a, ti), x)


# masked ops -----------------------------------------------------------------------------------------------


def test_masked_fill():
    x = randn(3, 4)
    mask = np.random.default_rng(1).random((3, 4)) > 0.5
    mm, tm = both(mask)
    check(lambda a: a.masked_fill(mm, -2.0), lambda a: a.masked_fill(tm, -2.0), noncontiguous(x))
    mr, tr = both(mask[:1])  # mask broadcast over rows
    check(lambda a: munet.masked_fill(a, mr, 1.0), lambda a: torch.masked_fill(a, tr, 1.0), x)
    check(lambda a, v: a.masked_fill(mm, v), lambda a, v: a.masked_fill(tm, v), x, randn(seed=2))
    check(lambda a: a.masked_fill(mm, 1.0), lambda a: a.masked_fill(tm, 1.0), randn(3, 1))  # self broadcast
    check(lambda a, v: (a * 1).masked_fill_(mr, v), lambda a, v: (a * 1).masked_fill_(tr, v), x, randn(seed=2))
    for dtype in ("float16", "bfloat16", "int32"):
        arr = randn(3, 4, dtype="float32")
        arr = arr.astype(dtype) if dtype == "int32" else randn(3, 4, dtype=dtype)
        check(lambda a: a.masked_fill(mm, 3), lambda a: a.masked_fill(tm, 3), arr)
    with pytest.raises(RuntimeError, match="masked_fill: expected a mask of dtype bool, got float32"):
        munet.zeros(3).masked_fill(munet.zeros(3), 1.0)
    with pytest.raises(RuntimeError, match="only supports a 0-dimensional value tensor"):
        munet.zeros(3).masked_fill(munet.ones(3, dtype=munet.bool), munet.ones(3))
    with pytest.raises(
        RuntimeError, match=r"masked_fill_: output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"
    ):
        munet.zeros(3).masked_fill_(munet.ones(2, 3, dtype=munet.bool), 1.0)


def test_masked_select_and_scatter():
    x = randn(3, 4)
    mask = np.random.default_rng(1).random((3, 4)) > 0.5
    mm, tm = both(mask)
    check(lambda a: a.masked_select(mm), lambda a: a.masked_select(tm), noncontiguous(x))
    mr, tr = both(mask[1])
    check(lambda a: munet.masked_select(a, mr), lambda a: torch.masked_select(a, tr), x)
    check(lambda a: munet.masked_select(a, mm), lambda a: torch.masked_select(a, tm), randn(4))
    src = randn(3, 5, seed=2)
    check(lambda a, s: a.masked_scatter(mm, s), lambda a, s: a.masked_scatter(tm, s), x, src)
    check(lambda a, s: munet.masked_scatter(a, mr, s), lambda a, s: torch.masked_scatter(a, tr, s), x, src)
    check(lambda a, s: (a * 1).masked_scatter_(mm, s), lambda a, s: (a * 1).masked_scatter_(tm, s), x, src)
    with pytest.raises(RuntimeError, match="masked_scatter_: expected source to have at least"):
        munet.zeros(3).masked_scatter_(munet.ones(3, dtype=munet.bool), munet.ones(2))
    with pytest.raises(RuntimeError, match="masked_select: expected a mask of dtype bool"):
        munet.zeros(3).masked_select(munet.ones(3))


def test_nonzero_argwhere():
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    for arr in (x, x > 0, np.zeros((2, 0)), np.array(3.0), np.array(0), noncontiguous(x)):
        m, t = munet.tensor(arr), torch.tensor(arr)
        assert_close(munet.nonzero(m), torch.nonzero(t))
        assert_close(m.argwhere(), t.argwhere())
        assert_close(munet.nonzero(m, as_tuple=True), torch.nonzero(t, as_tuple=True))


def test_public_names_match_torch():
    from munet.ops import indexing

    for name in indexing.__all__:
        assert hasattr(torch, name), name
    for name in indexing.__tensor_methods__:
        assert hasattr(torch.Tensor, name), name
