"""nn.init.sparse_: each column has ceil(sparsity * rows) zeros; the rest is N(0, std)."""

import math

import numpy as np
import pytest

import munet
from munet import nn


@pytest.mark.parametrize("rows,cols,sparsity", [(10, 6, 0.3), (7, 3, 0.0), (4, 5, 1.0), (1, 4, 0.5)])
def test_zeros_per_column_and_spread(rows, cols, sparsity):
    w = nn.init.sparse_(munet.empty(rows, cols), sparsity, std=0.02)
    values = w.numpy()
    assert ((values == 0).sum(0) == math.ceil(sparsity * rows)).all()


def test_distribution_generator_and_errors():
    w = nn.init.sparse_(munet.empty(400, 50), 0.5, std=0.1).numpy()
    nonzero = w[w != 0]
    assert nonzero.std() == pytest.approx(0.1, rel=0.05)  # 10000 draws: std error ~0.7%
    a = nn.init.sparse_(munet.empty(6, 4), 0.5, generator=munet.Generator().manual_seed(1))
    b = nn.init.sparse_(munet.empty(6, 4), 0.5, generator=munet.Generator().manual_seed(1))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match="2 dimensions"):
        nn.init.sparse_(munet.empty(3), 0.5)
