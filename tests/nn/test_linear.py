"""Identity, Linear and Bilinear against torch.nn: state, repr, init, forward and gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest

import munet
import munet.nn as nn
from tests.nn.layer_check import assert_uniform, compare
from tests.reference import randn


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(dtype, bias):
    compare("Linear", (5, 3), {"bias": bias}, randn(4, 5), dtype=dtype)
    compare("Linear", (5, 3), {"bias": bias}, randn(2, 4, 5, seed=1), dtype=dtype)
    compare("Linear", (5, 3), {"bias": bias}, randn(5, seed=2), dtype=dtype)


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_matches_torch(bias):
    compare("Bilinear", (3, 4, 2), {"bias": bias}, randn(5, 3), randn(5, 4, seed=1))


def test_identity_passes_input_through_and_ignores_arguments():
    layer = nn.Identity(54, unused="x")
    x = munet.randn(2, 3)
    assert layer(x) is x
    assert repr(layer) == "Identity()"
    assert layer.state_dict() == {}


def test_linear_init_is_pytorch_uniform():
    layer = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    assert tuple(layer.weight.shape) == (300, 400) and tuple(layer.bias.shape) == (300,)
    assert_uniform(layer.weight, bound)
    assert_uniform(layer.bias, bound)
    assert layer.weight.requires_grad and layer.weight.is_leaf


def test_linear_options():
    layer = nn.Linear(3, 2, bias=False, dtype=munet.float64)
    assert layer.bias is None and layer.weight.dtype is munet.float64
    assert list(layer.state_dict()) == ["weight"]
    assert repr(layer) == "Linear(in_features=3, out_features=2, bias=False)"
    with pytest.raises(RuntimeError, match="linear"):
        layer(munet.randn(2, 4, dtype=munet.float64))


def test_bilinear_init_is_pytorch_uniform():
    layer = nn.Bilinear(20, 30, 40)
    bound = 1 / math.sqrt(20)
    assert tuple(layer.weight.shape) == (40, 20, 30)
    assert_uniform(layer.weight, bound)
    assert_uniform(layer.bias, bound)


def test_linear_in_sequential_trains():
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 1))
    x = munet.tensor(np.ones((3, 4), dtype=np.float32))
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
