"""Flatten/Unflatten, padding, pixel shuffle, upsampling, fold/unfold and distance layers
against torch.nn: repr, forward and input gradients."""

from __future__ import annotations

import pytest

import munet
import munet.nn as nn
from tests.nn.layer_check import compare
from tests.reference import randn

CASES = [
    ("Flatten", (), {}, [(2, 3, 4, 5)]),
    ("Flatten", (0, 2), {}, [(2, 3, 4, 5)]),
    ("Unflatten", (1, (3, 4)), {}, [(2, 12, 5)]),
    ("Unflatten", (-1, [2, -1]), {}, [(2, 3, 8)]),
    ("ZeroPad1d", (2,), {}, [(2, 3, 4)]),
    ("ZeroPad2d", ((1, 0, 2, 1),), {}, [(2, 3, 4, 4)]),
    ("ZeroPad3d", (1,), {}, [(1, 2, 2, 3, 2)]),
    ("ConstantPad1d", ((1, 2), 3.5), {}, [(3, 4)]),
    ("ConstantPad2d", (1, -1.0), {}, [(2, 3, 4, 4)]),
    ("ConstantPad3d", ((1, 0, 0, 1, 1, 1), 2.0), {}, [(1, 2, 2, 3, 2)]),
    ("ReflectionPad1d", (2,), {}, [(2, 3, 5)]),
    ("ReflectionPad2d", ((1, 2, 0, 1),), {}, [(2, 3, 4, 4)]),
    ("ReflectionPad2d", (1,), {}, [(3, 4, 4)]),
    ("ReflectionPad3d", (1,), {}, [(1, 2, 3, 3, 3)]),
    ("ReplicationPad1d", ((3, 1),), {}, [(2, 3, 4)]),
    ("ReplicationPad2d", (2,), {}, [(2, 3, 4, 4)]),
    ("ReplicationPad3d", ((1, 0, 1, 2, 0, 1),), {}, [(1, 2, 2, 3, 2)]),
    ("CircularPad1d", (2,), {}, [(2, 3, 5)]),
    ("CircularPad2d", ((1, 2, 2, 0),), {}, [(2, 3, 4, 4)]),
    ("CircularPad3d", (1,), {}, [(1, 2, 3, 3, 3)]),
    ("PixelShuffle", (2,), {}, [(2, 8, 3, 3)]),
    ("PixelUnshuffle", (2,), {}, [(2, 2, 4, 6)]),
    ("Upsample", (), {"scale_factor": 2}, [(2, 3, 4, 4)]),
    ("Upsample", (), {"size": (5, 7), "mode": "bilinear"}, [(2, 3, 4, 4)]),
    ("Upsample", (), {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True}, [(2, 3, 4, 4)]),
    ("Upsample", (), {"scale_factor": (2, 3), "mode": "bicubic"}, [(1, 2, 3, 3)]),
    ("Upsample", (), {"size": 7, "mode": "linear"}, [(2, 3, 4)]),
    ("Upsample", (), {"scale_factor": 2, "mode": "nearest-exact"}, [(2, 3, 3)]),
    ("Upsample", (), {"scale_factor": 2, "mode": "trilinear"}, [(1, 2, 2, 3, 2)]),
    ("UpsamplingNearest2d", (), {"scale_factor": 3}, [(2, 3, 2, 2)]),
    ("UpsamplingBilinear2d", (), {"size": (5, 6)}, [(2, 3, 3, 4)]),
    ("Unfold", (2,), {}, [(2, 3, 4, 5)]),
    ("Unfold", ((2, 3),), {"dilation": (1, 2), "padding": 1, "stride": 2}, [(2, 3, 6, 7)]),
    ("Fold", ((4, 5), 2), {}, [(2, 12, 12)]),
    ("Fold", ((5, 6), (2, 3)), {"padding": 1, "stride": 2}, [(2, 18, 9)]),
    ("CosineSimilarity", (), {}, [(4, 5), (4, 5)]),
    ("CosineSimilarity", (), {"dim": 0, "eps": 1e-6}, [(4, 5), (1, 5)]),
    ("PairwiseDistance", (), {}, [(4, 5), (4, 5)]),
    ("PairwiseDistance", (), {"p": 1.0, "keepdim": True}, [(4, 5), (4, 5)]),
    ("PairwiseDistance", (), {"p": 3.0, "eps": 1e-3}, [(4, 5), (5,)]),
]


@pytest.mark.parametrize("name,args,kwargs,shapes", CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_matches_torch(name, args, kwargs, shapes, dtype):
    inputs = [randn(*s, seed=i) for i, s in enumerate(shapes)]
    compare(name, args, kwargs, *inputs, dtype=dtype, modes=("train",), rtol=1e-5 if dtype == "float32" else None)


def test_flatten_of_contiguous_input_is_a_view():
    x = munet.randn(2, 3, 4)
    assert nn.Flatten()(x)._base is x or nn.Flatten()(x).data_ptr() == x.data_ptr()


def test_unflatten_checks_its_size_argument():
    with pytest.raises(TypeError, match="unflattened_size"):
        nn.Unflatten(1, 6)
    with pytest.raises(TypeError, match="tuple of ints"):
        nn.Unflatten(1, (2, 3.0))


def test_padding_argument_checks():
    with pytest.raises(ValueError, match="expected padding of 4 values"):
        nn.ZeroPad2d((1, 2))
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        nn.ReflectionPad1d(1)(munet.randn(2, 2, 3, 4))


def test_upsample_attributes_like_pytorch():
    up = nn.Upsample(scale_factor=(2, 3), mode="bilinear")
    assert up.scale_factor == (2.0, 3.0) and up.name == "Upsample" and up.align_corners is None
    assert repr(nn.Upsample(size=4)) == "Upsample(size=4, mode='nearest')"
    assert nn.UpsamplingBilinear2d(scale_factor=2).align_corners is True
