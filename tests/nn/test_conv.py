"""Conv1d/2d/3d and ConvTranspose1d/2d/3d against torch.nn: state, repr, init, forward, gradients."""

from __future__ import annotations

import math

import pytest

import munet
import munet.nn as nn
from tests.nn.layer_check import assert_uniform, compare, make_pair, run_both
from tests.reference import randn

CONV2D = [
    {},
    {"stride": 2, "padding": 1},
    {"padding": (1, 2), "dilation": (2, 1)},
    {"padding": "same", "dilation": 2},
    {"padding": "valid", "bias": False},
    {"groups": 2, "padding": 1},
    {"padding": 2, "padding_mode": "reflect"},
    {"padding": (1, 2), "padding_mode": "replicate"},
    {"padding": 1, "padding_mode": "circular", "stride": 2},
    {"padding": "same", "padding_mode": "circular"},
]


@pytest.mark.parametrize("kwargs", CONV2D, ids=str)
def test_conv2d_matches_torch(kwargs):
    compare("Conv2d", (4, 6, 3), kwargs, randn(2, 4, 7, 8), modes=("train",), float64_reference=True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"stride": 2, "padding": 2, "dilation": 2},
        {"padding": "same"},
        {"padding": 3, "padding_mode": "reflect"},
        {"groups": 3, "bias": False},
    ],
    ids=str,
)
def test_conv1d_matches_torch(kwargs):
    compare("Conv1d", (3, 6, 4), kwargs, randn(2, 3, 11), modes=("train",), float64_reference=True)


def test_conv1d_unbatched_and_float64():
    compare("Conv1d", (3, 2, 3), {"padding": 1}, randn(3, 9), dtype="float64")


@pytest.mark.parametrize(
    "kwargs", [{}, {"stride": (1, 2, 1), "padding": 1}, {"padding": 1, "padding_mode": "replicate"}], ids=str
)
def test_conv3d_matches_torch(kwargs):
    compare("Conv3d", (2, 3, 2), kwargs, randn(2, 2, 4, 5, 4), modes=("train",), float64_reference=True)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"stride": 2, "padding": 1, "output_padding": 1}, {"groups": 2, "dilation": 2}, {"bias": False, "stride": 3}],
    ids=str,
)
def test_conv_transpose2d_matches_torch(kwargs):
    compare("ConvTranspose2d", (4, 6, 3), kwargs, randn(2, 4, 5, 6), modes=("train",), float64_reference=True)


def test_conv_transpose1d_and_3d_match_torch():
    compare("ConvTranspose1d", (3, 2, 3), {"stride": 2, "padding": 1}, randn(2, 3, 7), float64_reference=True)
    compare("ConvTranspose3d", (2, 3, 2), {"stride": 2}, randn(1, 2, 3, 3, 2), modes=("train",), float64_reference=True)
    compare("ConvTranspose2d", (3, 2, 3), {"stride": 2}, randn(3, 4, 4), dtype="float64")


@pytest.mark.parametrize("output_size", [(12, 12), (11, 12), [2, 4, 12, 11]], ids=str)
def test_conv_transpose2d_output_size(output_size):
    m, t = make_pair("ConvTranspose2d", (3, 4, 3), {"stride": 2, "padding": 1})
    m_out, _ = run_both(m, t, randn(2, 3, 6, 6), forward_kwargs={"output_size": output_size}, float64_reference=True)
    assert tuple(m_out.shape[-2:]) == tuple(output_size[-2:])


def test_conv_transpose_output_size_out_of_range_raises():
    layer = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1)
    with pytest.raises(ValueError, match="valid sizes range from"):
        layer(munet.randn(1, 3, 6, 6), output_size=(20, 20))
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        layer(munet.randn(1, 3, 6, 6), output_size=(11,))


def test_conv_init_is_pytorch_uniform():
    layer = nn.Conv2d(16, 32, 3)
    bound = 1 / math.sqrt(16 * 9)
    assert tuple(layer.weight.shape) == (32, 16, 3, 3)
    assert_uniform(layer.weight, bound)
    assert_uniform(layer.bias, bound)
    grouped = nn.Conv1d(8, 12, 5, groups=4)
    assert tuple(grouped.weight.shape) == (12, 2, 5)
    assert_uniform(grouped.weight, 1 / math.sqrt(2 * 5))
    transposed = nn.ConvTranspose2d(16, 24, 3, groups=2)
    assert tuple(transposed.weight.shape) == (16, 12, 3, 3)
    assert_uniform(transposed.weight, 1 / math.sqrt(12 * 9))
    assert_uniform(transposed.bias, 1 / math.sqrt(12 * 9))


def test_conv_constructor_errors():
    with pytest.raises(ValueError, match="in_channels"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels"):
        nn.Conv2d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        nn.Conv2d(4, 4, 3, groups=0)
    with pytest.raises(ValueError, match="invalid padding string"):
        nn.Conv2d(4, 4, 3, padding="full")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(4, 4, 3, padding="same", stride=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(4, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="zeros"):
        nn.ConvTranspose2d(4, 4, 3, padding_mode="reflect")


def test_conv_wrong_input_channels_raises():
    with pytest.raises(RuntimeError, match="channels"):
        nn.Conv2d(3, 4, 3)(munet.randn(1, 5, 8, 8))


def test_conv_dtype_and_state_dict_from_torch_layout():
    layer = nn.Conv2d(2, 3, (1, 2), dtype=munet.float64, bias=False)
    assert layer.weight.dtype is munet.float64 and layer.bias is None
    assert list(layer.state_dict()) == ["weight"]
    assert repr(layer) == "Conv2d(2, 3, kernel_size=(1, 2), stride=(1, 1), bias=False)"
