"""``as_strided_scatter_into`` (munet/backends/cpu/kernels_core.py): a region that is a box of the
result copies only the base's elements around it; any other region copies the whole base first.
Both against NumPy's copy-then-assign, element for element, and the op against PyTorch's."""

import numpy as np
import pytest

import munet
from munet.backends.cpu import kernels_core


def _expected(x, src, size, stride, offset):
    out = x.copy()
    np.lib.stride_tricks.as_strided(out.reshape(-1)[offset:], size, [s * out.itemsize for s in stride])[...] = src
    return out


def _pitches(shape):
    return tuple(int(np.prod(shape[d + 1 :])) for d in range(len(shape)))


BOXES = [
    ((2, 3, 7, 7), (2, 3, 6, 6), (0, 0, 0, 0)),  # the importer's max pool: padded at the end
    ((2, 3, 8, 9), (2, 3, 6, 6), (0, 0, 1, 2)),  # constant_pad_nd: padded on both sides
    ((4, 5), (2, 5), (1, 0)),  # a slab of rows
    ((4, 5, 6), (1, 1, 1), (3, 4, 5)),  # one element, the last one
    ((3, 4), (0, 4), (1, 0)),  # an empty region
    ((5,), (5,), (0,)),  # all of it
]


@pytest.mark.parametrize("shape, size, start", BOXES)
def test_a_box_copies_only_around_it(shape, size, start):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    src = rng.standard_normal(size).astype(np.float32)
    stride = _pitches(shape)
    offset = sum(s * p for s, p in zip(start, stride))
    assert kernels_core._box(shape, size, stride, offset) == tuple(slice(s, s + n) for s, n in zip(start, size))
    out = np.full(shape, np.nan, np.float32)  # every element must be written
    kernels_core.as_strided_scatter_into(out, x, src, size=size, stride=stride, storage_offset=offset)
    np.testing.assert_array_equal(out, _expected(x, src, size, stride, offset))


@pytest.mark.parametrize(
    "shape, size, stride, offset",
    [
        ((4, 6), (2, 3), (12, 2), 1),  # strided: every other column of every other row
        ((3, 4), (4, 3), (1, 4), 0),  # transposed
        ((24,), (2, 3), (12, 4), 0),  # another rank than the base
    ],
)
def test_a_region_that_is_not_a_box_copies_the_whole_base(shape, size, stride, offset):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    src = rng.standard_normal(size).astype(np.float32)
    assert kernels_core._box(shape, size, stride, offset) is None
    out = np.full(shape, np.nan, np.float32)
    kernels_core.as_strided_scatter_into(out, x, src, size=size, stride=stride, storage_offset=offset)
    np.testing.assert_array_equal(out, _expected(x, src, size, stride, offset))


def test_the_padded_copy_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    base = np.full((2, 3, 8, 9), -np.inf, np.float32)
    stride, offset = (216, 72, 9, 1), 9 + 2
    got = munet.as_strided_scatter(munet.tensor(base), munet.tensor(x), (2, 3, 5, 6), stride, offset).numpy()
    expected = torch.as_strided_scatter(torch.from_numpy(base), torch.from_numpy(x), (2, 3, 5, 6), stride, offset)
    np.testing.assert_array_equal(got, expected.numpy())
