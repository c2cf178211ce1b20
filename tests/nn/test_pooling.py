"""Pooling layers against torch.nn: repr, forward (values and indices) and input gradients."""

from __future__ import annotations

import numpy as np
import pytest

import munet
import munet.nn as nn
from tests.nn.layer_check import compare, make_pair, run_both
from tests.reference import assert_close, randn

CASES = [
    ("MaxPool1d", (3,), {}, (2, 3, 10)),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}, (2, 3, 10)),
    ("MaxPool2d", (2,), {}, (2, 3, 6, 6)),
    ("MaxPool2d", ((3, 2),), {"stride": (2, 1), "padding": 1, "ceil_mode": True}, (2, 3, 7, 6)),
    ("MaxPool2d", (3,), {"dilation": 2, "stride": 1}, (3, 7, 8)),
    ("MaxPool3d", (2,), {}, (1, 2, 4, 4, 4)),
    ("AvgPool1d", (3,), {}, (2, 3, 9)),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}, (2, 3, 10)),
    ("AvgPool2d", (2,), {}, (2, 3, 6, 6)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 7, 7)),
    ("AvgPool2d", (2,), {"divisor_override": 3}, (2, 3, 4, 4)),
    ("AvgPool3d", (2,), {"stride": 1}, (1, 2, 3, 4, 3)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveAvgPool2d", ((3, 2),), {}, (2, 3, 7, 5)),
    ("AdaptiveAvgPool2d", ((None, 2),), {}, (2, 3, 7, 5)),
    ("AdaptiveAvgPool2d", (1,), {}, (3, 7, 5)),
    ("AdaptiveAvgPool3d", (2,), {}, (1, 2, 4, 5, 3)),
    ("AdaptiveMaxPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveMaxPool2d", ((3, 2),), {}, (2, 3, 7, 5)),
    ("AdaptiveMaxPool3d", (2,), {}, (1, 2, 4, 5, 3)),
    ("LPPool1d", (2, 3), {}, (2, 3, 9)),
    ("LPPool2d", (3, 2), {"stride": 1}, (2, 3, 5, 5)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", CASES, ids=str)
def test_pooling_matches_torch(name, args, kwargs, shape):
    x = randn(*shape)
    if name.startswith("LPPool"):
        x = np.abs(x) + 0.1  # away from the non-differentiable 0 of |x|^p
    compare(name, args, kwargs, x, modes=("train",), rtol=1e-5, atol=1e-6)


def test_pooling_float64():
    compare("MaxPool2d", (2,), {"stride": 1}, randn(2, 2, 4, 4), dtype="float64", modes=("eval",))
    compare("AvgPool2d", (2,), {"padding": 1}, randn(2, 2, 4, 4), dtype="float64", modes=("eval",))


@pytest.mark.parametrize(
    "name,args,shape",
    [("MaxPool1d", (2,), (2, 3, 8)), ("MaxPool2d", (2,), (2, 3, 6, 6)), ("AdaptiveMaxPool2d", ((3, 2),), (2, 3, 7, 5))],
    ids=str,
)
def test_return_indices_match_torch(name, args, shape):
    m, t = make_pair(name, args, {"return_indices": True})
    (m_out, m_idx), (_, t_idx) = run_both(m, t, randn(*shape))
    assert m_idx.dtype is munet.int64
    assert_close(m_idx, t_idx, what="indices")


def test_pooling_attributes_like_pytorch():
    pool = nn.MaxPool2d(3)
    assert pool.stride == 3 and pool.padding == 0 and pool.return_indices is False
    assert repr(nn.AvgPool1d(3)) == "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))"
    assert repr(nn.AdaptiveMaxPool2d((3, None))) == "AdaptiveMaxPool2d(output_size=(3, None))"
    assert nn.AvgPool2d(2).state_dict() == {}


def test_pooling_errors_name_the_op():
    with pytest.raises(Exception, match="max_pool2d"):
        nn.MaxPool2d(2)(munet.randn(2, 3, 4, 5, 6))
