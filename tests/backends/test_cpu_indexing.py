"""The CPU indexing kernels' row accumulation (``kernels_indexing._add_rows``): ufunc.at's bits, faster."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet


def _case(rng, targets: int, n: int, width: int, dtype, heavy: bool):
    index = rng.integers(-targets, targets, n)
    if heavy:  # one target takes half the rows: the cumulative-sum path beside the rounds
        index[: n // 2] = targets - 1
    scale = 10.0 ** rng.uniform(-3, 3, (n, 1))  # magnitudes that make the summation order visible
    values = (rng.standard_normal((n, width)) * scale).astype(dtype)
    base = rng.standard_normal((targets, width)).astype(dtype)
    return base, index, values


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("heavy", [False, True])
@pytest.mark.parametrize("shape", [(65, 2048, 7), (3, 1, 4), (50, 300, 1), (1, 40, 3)])
def test_index_put_accumulate_adds_rows_in_ufunc_at_order(dtype, heavy, shape):
    rng = np.random.default_rng(sum(shape) + heavy)
    base, index, values = _case(rng, *shape, dtype, heavy)
    expected = base.copy()
    np.add.at(expected, (index,), values)  # each row's values in the order they come
    out = munet.tensor(base).index_put((munet.tensor(index),), munet.tensor(values), accumulate=True)
    np.testing.assert_array_equal(out.numpy(), expected)
    reference = torch.tensor(base).index_put((torch.tensor(index),), torch.tensor(values), accumulate=True)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    bound = rtol * np.abs(values).sum() + rtol * np.abs(base).max()
    np.testing.assert_allclose(out.numpy(), reference.numpy(), rtol=rtol, atol=bound)


def test_index_add_rows_in_place_and_empty():
    rng = np.random.default_rng(0)
    base, index, values = _case(rng, 9, 200, 5, np.float32, False)
    expected = base.copy()
    np.add.at(expected, (index % 9,), values)
    x = munet.tensor(base)
    x.index_add_(0, munet.tensor(index % 9), munet.tensor(values))
    np.testing.assert_array_equal(x.numpy(), expected)
    y = munet.tensor(base).index_put((munet.tensor(np.zeros(0, np.int64)),), munet.zeros(0, 5), accumulate=True)
    np.testing.assert_array_equal(y.numpy(), base)


def test_the_index_kernel_keeps_a_zero_dim_result_zero_dim():
    kernels = munet._device.get_backend(munet.device("cpu")).kernels
    x = np.arange(5.0, dtype=np.float32)
    out = kernels["index"](x, [np.array(2)], positions=(0,))
    assert isinstance(out, np.ndarray) and out.shape == () and out == 2.0
    out = kernels["index"](x.reshape(5, 1)[::2], [np.array([2, 0])], positions=(0,))  # a strided source
    assert out.flags.c_contiguous and out.tolist() == [[4.0], [0.0]]
