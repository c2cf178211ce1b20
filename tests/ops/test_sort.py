"""Sort family vs PyTorch: sort, argsort, msort, topk, kthvalue, unique(_consecutive), searchsorted, bucketize."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close, check, gradcheck, noncontiguous, randn


def distinct(*shape, dtype="float32", seed=0):
    """Random values without ties (so indices are unambiguous)."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n).reshape(shape) * 0.5 - 3).astype(dtype)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort(dim, descending):
    x = distinct(3, 4, 5)
    check(lambda a: munet.sort(a, dim, descending), lambda a: torch.sort(a, dim, descending), x)
    check(
        lambda a: a.sort(dim=dim, descending=descending).values,
        lambda a: a.sort(dim=dim, descending=descending).values,
        noncontiguous(x),
    )
    check(lambda a: a.argsort(dim, descending), lambda a: a.argsort(dim, descending), x, grad=False)


def test_sort_stable_ties_nan_and_dtypes():
    x = np.array([[2.0, 1.0, 2.0, np.nan, 1.0, 2.0], [0.0, 0.0, -1.0, 0.0, np.inf, -np.inf]])
    for descending in (False, True):
        check(
            lambda a: munet.sort(a, stable=True, descending=descending),
            lambda a: torch.sort(a, stable=True, descending=descending),
            x,
            grad=False,
        )
    xi = np.array([[3, 1, 3, 2, 1]], dtype=np.int32)
    for descending in (False, True):
        check(
            lambda a: munet.sort(a, descending=descending, stable=True),
            lambda a: torch.sort(a, descending=descending, stable=True),
            xi,
        )
    check(
        lambda a: munet.sort(a, stable=True), lambda a: torch.sort(a, stable=True), np.array([True, False, True, False])
    )
    for dtype in ("float16", "bfloat16", "float64"):
        check(lambda a: munet.sort(a, 0), lambda a: torch.sort(a, 0), distinct(4, 3, dtype=dtype))


def test_sort_result_type_and_edge_shapes():
    out = munet.sort(munet.tensor([2.0, 1.0]))
    assert type(out).__name__ == "sort" and out.values.tolist() == [1.0, 2.0] and out.indices.tolist() == [1, 0]
    values, indices = out
    assert indices.dtype is munet.int64
    check(munet.sort, torch.sort, randn())
    check(lambda a: munet.sort(a, 1), lambda a: torch.sort(a, 1), randn(2, 0))
    check(munet.msort, torch.msort, distinct(4, 3))
    with pytest.raises(IndexError, match="sort: dimension out of range"):
        munet.sort(munet.zeros(3), 1)


def test_sort_double_backward():
    gradcheck(lambda a: munet.sort(a, 0).values * munet.sort(a, 0).values, distinct(4, 2, dtype="float64"))


@pytest.mark.parametrize("largest", [True, False])
def test_topk(largest):
    x = distinct(4, 6)
    check(lambda a: munet.topk(a, 3, largest=largest), lambda a: torch.topk(a, 3, largest=largest), x)
    check(lambda a: a.topk(2, dim=0, largest=largest), lambda a: a.topk(2, dim=0, largest=largest), noncontiguous(x))
    check(lambda a: a.topk(0, largest=largest), lambda a: a.topk(0, largest=largest), x)
    check(lambda a: a.topk(6, largest=largest), lambda a: a.topk(6, largest=largest), x)
    check(lambda a: a.topk(1), lambda a: a.topk(1), randn())
    # sorted=False: PyTorch's order is unspecified; the set of values must match
    m, t = (
        munet.topk(munet.tensor(x), 3, sorted=False, largest=largest),
        torch.topk(torch.tensor(x), 3, sorted=False, largest=largest),
    )
    np.testing.assert_array_equal(np.sort(m.values.numpy(), -1), np.sort(t.values.numpy(), -1))
    check(lambda a: a.topk(2, largest=largest), lambda a: a.topk(2, largest=largest), np.array([5, 1, 9, 3], np.int64))
    check(lambda a: a.topk(2, largest=largest), lambda a: a.topk(2, largest=largest), distinct(2, 5, dtype="bfloat16"))


def test_topk_errors():
    with pytest.raises(RuntimeError, match=r"topk: selected index k \(4\) out of range for dimension 0 of size 3"):
        munet.topk(munet.zeros(3), 4)


@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue(keepdim):
    x = distinct(3, 5)
    check(lambda a: munet.kthvalue(a, 2, keepdim=keepdim), lambda a: torch.kthvalue(a, 2, keepdim=keepdim), x)
    check(lambda a: a.kthvalue(3, 0, keepdim), lambda a: a.kthvalue(3, 0, keepdim), noncontiguous(x))
    check(lambda a: a.kthvalue(1, keepdim=keepdim), lambda a: a.kthvalue(1, keepdim=keepdim), randn())
    check(
        lambda a: a.kthvalue(2, keepdim=keepdim),
        lambda a: a.kthvalue(2, keepdim=keepdim),
        np.array([[4, 1, 3]], np.int32),
    )
    with pytest.raises(RuntimeError, match=r"kthvalue: selected number k \(6\) out of range for dimension 1 of size 5"):
        munet.kthvalue(munet.tensor(x), 6)


def _unique_both(arr, **kw):
    return munet.unique(munet.tensor(arr), **kw), torch.unique(torch.tensor(arr), **kw)


@pytest.mark.parametrize("flags", [(False, False), (True, False), (False, True), (True, True)])
def test_unique(flags):
    inv, cnt = flags
    kw = dict(return_inverse=inv, return_counts=cnt)
    for arr in (
        np.array([[3, 1, 2], [3, 3, 0]]),
        np.array([2.5, -1.0, 2.5, 0.0], np.float32),
        np.zeros(0, np.int64),
        np.array(7),
    ):
        m, t = _unique_both(arr, **kw)
        assert_close(m, t)
    x = np.array([[1, 2], [1, 2], [0, 5], [1, 2]])
    for dim in (0, 1, -1):
        m, t = _unique_both(x, dim=dim, **kw)
        assert_close(m, t)
    m, t = _unique_both(noncontiguous(np.array([[3.0, 1.0], [1.0, 3.0]], np.float32)), **kw)
    assert_close(m, t)
    m, t = _unique_both(np.array([True, False, True]), **kw)
    assert_close(m, t)


@pytest.mark.parametrize("flags", [(False, False), (True, True)])
def test_unique_consecutive(flags):
    inv, cnt = flags
    kw = dict(return_inverse=inv, return_counts=cnt)
    x = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    assert_close(munet.unique_consecutive(munet.tensor(x), **kw), torch.unique_consecutive(torch.tensor(x), **kw))
    y = np.array([[1, 1, 2, 2], [1, 1, 0, 2], [1, 1, 0, 2]])
    for dim in (0, 1):
        assert_close(
            munet.tensor(y).unique_consecutive(dim=dim, **kw), torch.tensor(y).unique_consecutive(dim=dim, **kw)
        )
    e = np.zeros(0, np.float32)
    assert_close(munet.unique_consecutive(munet.tensor(e), **kw), torch.unique_consecutive(torch.tensor(e), **kw))


@pytest.mark.parametrize("fn", ["unique", "unique_consecutive"])
def test_unique_slices_of_empty_dims(fn):
    kw = dict(return_inverse=True, return_counts=True)
    for shape, dim in (((0, 3), 0), ((3, 0), 1), ((2, 0, 3), 1)):
        x = np.zeros(shape, np.float32)
        assert_close(
            getattr(munet, fn)(munet.tensor(x), dim=dim, **kw), getattr(torch, fn)(torch.tensor(x), dim=dim, **kw)
        )
    with pytest.raises(RuntimeError, match=rf"{fn}: there are 0 sized dimensions, and they aren't selected"):
        getattr(munet, fn)(munet.zeros(3, 0), dim=0)
    with pytest.raises(RuntimeError):
        getattr(torch, fn)(torch.zeros(3, 0), dim=0)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted(right):
    seq = np.array([1.0, 2.0, 2.0, 4.0, 7.0], np.float32)
    vals = np.array([[0.0, 2.0, 3.0], [7.0, 8.0, 2.0]], np.float32)
    kw = dict(right=right)
    assert_close(
        munet.searchsorted(munet.tensor(seq), munet.tensor(vals), **kw),
        torch.searchsorted(torch.tensor(seq), torch.tensor(vals), **kw),
    )
    seq2 = np.sort(np.random.default_rng(1).integers(0, 6, size=(2, 3, 6)), axis=-1)
    vals2 = np.random.default_rng(2).integers(-1, 7, size=(2, 3, 4))
    for a, b in ((seq2, vals2), (seq2.astype(np.float64), vals2.astype(np.float64))):
        assert_close(
            munet.searchsorted(munet.tensor(a), munet.tensor(b), **kw),
            torch.searchsorted(torch.tensor(a), torch.tensor(b), **kw),
        )
    empty = np.zeros((2, 3, 0), np.float32)  # no boundaries: every value's position is 0
    assert_close(
        munet.searchsorted(munet.tensor(empty), munet.tensor(vals2.astype(np.float32)), **kw),
        torch.searchsorted(torch.tensor(empty), torch.tensor(vals2.astype(np.float32)), **kw),
    )
    side = "right" if right else "left"
    assert_close(
        munet.searchsorted(munet.tensor(seq), 2.0, side=side), torch.searchsorted(torch.tensor(seq), 2.0, side=side)
    )
    assert_close(
        munet.searchsorted(munet.tensor(seq), munet.tensor(vals), out_int32=True, **kw),
        torch.searchsorted(torch.tensor(seq), torch.tensor(vals), out_int32=True, **kw),
    )
    unsorted = np.array([[4.0, 1.0, 7.0, 2.0], [0.0, 9.0, 3.0, 5.0]], np.float32)
    sorter = np.argsort(unsorted, axis=-1)
    q = np.array([[3.0, 7.0], [4.0, -1.0]], np.float32)
    assert_close(
        munet.searchsorted(munet.tensor(unsorted), munet.tensor(q), sorter=munet.tensor(sorter), **kw),
        torch.searchsorted(torch.tensor(unsorted), torch.tensor(q), sorter=torch.tensor(sorter), **kw),
    )
    assert_close(
        munet.searchsorted(munet.tensor(noncontiguous(seq)), munet.tensor(noncontiguous(vals)), **kw),
        torch.searchsorted(torch.tensor(seq), torch.tensor(vals), **kw),
    )


def test_searchsorted_errors():
    with pytest.raises(
        RuntimeError, match="first N-1 dimensions of boundaries tensor and input value tensor must match"
    ):
        munet.searchsorted(munet.zeros(2, 3), munet.zeros(3, 1))
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right'"):
        munet.searchsorted(munet.zeros(3), munet.zeros(2), side="middle")
    with pytest.raises(RuntimeError, match="input value can be a scalar only when boundaries tensor dimension is 1"):
        munet.searchsorted(munet.zeros(2, 3), 1.0)


def test_searchsorted_sorter_out_of_range():
    seq, values = munet.tensor([[1.0, 2.0, 3.0]]), munet.tensor([[2.0]])
    for bad in (3, -1):  # torch: "sorter index out of range"
        with pytest.raises(IndexError, match=f"searchsorted: index {bad} is out of bounds for dimension 1 with size 3"):
            munet.searchsorted(seq, values, sorter=munet.tensor([[0, bad, 1]]))


@pytest.mark.parametrize("right", [False, True])
def test_bucketize(right):
    bounds = np.array([1, 3, 5, 7, 9])
    x = np.array([[3, 6, 9], [0, 10, 1]])
    assert_close(
        munet.bucketize(munet.tensor(x), munet.tensor(bounds), right=right),
        torch.bucketize(torch.tensor(x), torch.tensor(bounds), right=right),
    )
    assert_close(
        munet.bucketize(munet.tensor(x.astype(np.float32)), munet.tensor(bounds), out_int32=True, right=right),
        torch.bucketize(torch.tensor(x.astype(np.float32)), torch.tensor(bounds), out_int32=True, right=right),
    )
    with pytest.raises(RuntimeError, match="bucketize: boundaries tensor must be 1 dimension"):
        munet.bucketize(munet.tensor(x), munet.zeros(2, 2))


def test_public_names_match_torch():
    from munet.ops import sort

    for name in sort.__all__:
        assert hasattr(torch, name), name
    for name in sort.__tensor_methods__:
        assert hasattr(torch.Tensor, name), name


@pytest.mark.parametrize("invert", [False, True])
def test_isin(invert):
    x = np.random.default_rng(0).integers(0, 9, size=(3, 4))
    tests = np.array([[1, 5], [5, 8]])
    check(
        lambda a, b: munet.isin(a, b, invert=invert),
        lambda a, b: torch.isin(a, b, invert=invert),
        x,
        tests,
    )
    check(
        lambda a: munet.isin(a, munet.tensor([2, 3]), assume_unique=True),
        lambda a: torch.isin(a, torch.tensor([2, 3])),
        x.T,
    )
    check(lambda a: munet.isin(a, 4), lambda a: torch.isin(a, 4), x)
    check(lambda b: munet.isin(5, b), lambda b: torch.isin(5, b), tests)
    check(
        lambda a, b: munet.isin(a, b),
        lambda a, b: torch.isin(a, b),
        np.array([1.0, 2.0, np.nan]),
        np.array([2.5, 2, np.nan]),
    )
    check(lambda a, b: munet.isin(a, b), lambda a, b: torch.isin(a, b), x, tests[:0])
    with pytest.raises(TypeError, match="isin"):
        munet.isin(1, 2)
