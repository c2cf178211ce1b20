"""munet.testing.make_tensor: ranges, dtypes and options as torch.testing.make_tensor."""

import numpy as np
import pytest
import torch

import munet
from munet.testing import make_tensor


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int64", "int8", "uint8", "bool"])
def test_default_ranges_match_torch(dtype):
    mine = make_tensor(2000, dtype=getattr(munet, dtype), device="cpu")
    theirs = torch.testing.make_tensor(2000, dtype=getattr(torch, dtype), device="cpu")
    assert str(mine.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    m, t = mine.float().numpy(), theirs.float().numpy()
    # same support: uniform draws of this size reach within a few percent of both ends
    assert m.min() >= t.min() - 1 and m.max() <= t.max() + 1
    span = t.max() - t.min()
    assert abs(m.min() - t.min()) <= 0.05 * span + 1 and abs(m.max() - t.max()) <= 0.05 * span + 1


def test_low_high_and_options():
    x = make_tensor((3, 4), dtype=munet.float64, device="cpu", low=2.0, high=3.0, requires_grad=True)
    assert x.requires_grad and tuple(x.shape) == (3, 4)
    assert np.all((x.detach().numpy() >= 2.0) & (x.detach().numpy() < 3.0))
    y = make_tensor(3, 4, dtype=munet.int32, device="cpu", low=-1, high=2, noncontiguous=True, exclude_zero=True)
    assert not y.is_contiguous() and tuple(y.shape) == (3, 4)
    assert set(np.unique(y.numpy())) <= {-1, 1}
    z = make_tensor(5, dtype=munet.float32, device="cpu", low=-1e-30, high=1e-30, exclude_zero=True)
    assert np.all(z.numpy() != 0)
    assert tuple(make_tensor([2, 3], dtype=munet.uint8, device="cpu").shape) == (2, 3)


def test_errors_match_torch():
    for kwargs, error in [
        ({"low": 3, "high": 1}, "`low` must be less than `high`"),
        ({"low": float("nan")}, "cannot be NaN"),
    ]:
        with pytest.raises(ValueError, match=error):
            torch.testing.make_tensor(2, dtype=torch.float32, device="cpu", **kwargs)
        with pytest.raises(ValueError, match=error):
            make_tensor(2, dtype=munet.float32, device="cpu", **kwargs)
    with pytest.raises(ValueError, match="requires_grad=True"):
        make_tensor(2, dtype=munet.int64, device="cpu", requires_grad=True)
    with pytest.raises(ValueError, match="only supports"):
        make_tensor(2, dtype=munet.uint8, device="cpu", low=-5, high=-1)
