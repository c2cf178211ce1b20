"""Property tests: random basic indexing, reshapes and permutes agree with NumPy and share storage."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import munet

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@st.composite
def array_and_index(draw):
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple))
    items = []
    for n in shape[: draw(st.integers(0, len(shape)))]:
        kind = draw(st.sampled_from(["int", "slice", "none"]))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            step = draw(st.one_of(st.none(), st.integers(1, 3)))
            items.append(slice(start, stop, step))
        else:
            items.append(None)
            items.append(slice(None))
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    return shape, tuple(items)


@settings(max_examples=150, deadline=None)
@given(array_and_index())
def test_basic_indexing_matches_numpy_and_is_a_view(case):
    shape, index = case
    arr = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    t = munet.tensor(arr)
    try:
        expected = arr[index]
    except IndexError:
        with pytest.raises(IndexError):
            t[index]
        return
    got = t[index]
    assert tuple(got.shape) == expected.shape
    np.testing.assert_array_equal(got.numpy(), expected)
    if got.numel():
        got.fill_(-1.0)
        arr[index] = -1.0
        np.testing.assert_array_equal(t.numpy(), arr)


@settings(max_examples=100, deadline=None)
@given(shapes, st.randoms(use_true_random=False))
def test_permute_then_reshape_matches_numpy(shape, rnd):
    arr = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    order = list(range(len(shape)))
    rnd.shuffle(order)
    t = munet.tensor(arr).permute(order)
    a = arr.transpose(order)
    np.testing.assert_array_equal(t.numpy(), a)
    flat = t.reshape(-1)
    np.testing.assert_array_equal(flat.numpy(), a.reshape(-1))
    assert (flat.data_ptr() == t.data_ptr()) == (t.is_contiguous() or t.numel() <= 1) or t.numel() == 0
