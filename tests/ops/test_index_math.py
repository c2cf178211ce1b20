"""unravel_index and nonzero_static (munet/ops/index_math.py) against PyTorch."""

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close


def test_unravel_index():
    index = np.array([[0, 5, 23], [-1, 7, 11]])
    for shape in [(2, 3, 4), (24,), (4, 6), 24]:
        assert_close(munet.unravel_index(munet.tensor(index), shape), torch.unravel_index(torch.tensor(index), shape))
    assert_close(munet.unravel_index(munet.tensor(5), (2, 3)), torch.unravel_index(torch.tensor(5), (2, 3)))
    empty = munet.unravel_index(munet.zeros(0, dtype=munet.int64), (2, 3))
    assert len(empty) == 2 and tuple(empty[0].shape) == (0,)
    with pytest.raises(TypeError, match="unravel_index: expected 'indices' to be an integer tensor"):
        munet.unravel_index(munet.ones(2), (2, 3))
    with pytest.raises(RuntimeError, match="unravel_index: index out of bounds"):
        munet.unravel_index(munet.tensor([6]), (2, 3))


@pytest.mark.parametrize("size,fill_value", [(0, -1), (2, -1), (4, -1), (6, 9)])
def test_nonzero_static(size, fill_value):
    x = np.array([[1, 0, 2], [0, 0, 3]])
    want = torch.nonzero_static(torch.tensor(x), size=size, fill_value=fill_value)
    assert_close(munet.nonzero_static(munet.tensor(x), size=size, fill_value=fill_value), want)
    assert_close(munet.tensor(x).nonzero_static(size=size, fill_value=fill_value), want)
    assert_close(munet.nonzero_static(munet.zeros(3), size=2), torch.nonzero_static(torch.zeros(3), size=2))
