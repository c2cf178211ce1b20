"""Dropout layers: identity in eval mode, PyTorch's masking/scaling statistics in training,
channel-wise masks for Dropout1d/2d/3d, repr and argument checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet
import munet.nn as nn
from tests.reference import randn

ALL = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]
SHAPES = {
    "Dropout": (64, 64),
    "Dropout1d": (16, 32, 8),
    "Dropout2d": (16, 32, 2, 4),
    "Dropout3d": (16, 32, 2, 2, 2),
    "AlphaDropout": (64, 64),
    "FeatureAlphaDropout": (16, 32, 8),
}


@pytest.mark.parametrize("name", ALL)
def test_eval_mode_is_identity_and_repr_matches(name):
    layer = getattr(nn, name)(p=0.3).eval()
    x = munet.tensor(randn(*SHAPES[name]), requires_grad=True)
    out = layer(x)
    np.testing.assert_array_equal(out.detach().numpy(), x.detach().numpy())
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(SHAPES[name], dtype=np.float32))
    assert repr(layer) == repr(getattr(torch.nn, name)(p=0.3))
    assert layer.state_dict() == {}


@pytest.mark.parametrize("name", ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d"])
def test_train_mode_masks_and_scales(name):
    p = 0.25
    layer = getattr(nn, name)(p=p)
    x = munet.tensor(np.ones(SHAPES[name], dtype=np.float32), requires_grad=True)
    out = layer(x)
    values = out.detach().numpy()
    kept = values[values != 0]
    np.testing.assert_allclose(kept, 1 / (1 - p), rtol=1e-6)
    dropped = (values == 0).mean()
    assert abs(dropped - p) < 0.06, f"dropped fraction {dropped}"
    if name != "Dropout":
        # whole channels: every (n, c) slice is all kept or all dropped
        per_channel = values.reshape(values.shape[0], values.shape[1], -1)
        assert np.all(per_channel == per_channel[..., :1])
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), values)  # gradient is the same mask and scale


def test_alpha_dropout_keeps_mean_and_variance():
    layer = nn.AlphaDropout(p=0.2)
    x = munet.tensor(randn(200, 200))
    out = layer(x).numpy()
    assert abs(out.mean()) < 0.05 and abs(out.std() - 1) < 0.05
    assert (out != x.numpy()).mean() > 0.1


def test_feature_alpha_dropout_drops_channels():
    out = nn.FeatureAlphaDropout(p=0.5)(munet.tensor(randn(16, 32, 8))).numpy()
    constant = np.all(out == out[..., :1], axis=-1)  # a dropped channel is one constant value
    assert 0.3 < constant.mean() < 0.7


def test_p_zero_and_one():
    x = munet.tensor(randn(8, 8))
    np.testing.assert_array_equal(nn.Dropout(0.0)(x).numpy(), x.numpy())
    assert not np.any(nn.Dropout(1.0)(x).numpy())


def test_inplace_dropout_writes_into_input():
    x = munet.ones(50, 50)
    out = nn.Dropout(0.5, inplace=True)(x)
    assert out is x
    assert (x.numpy() == 0).mean() > 0.3


def test_invalid_probability_raises():
    for name in ALL:
        with pytest.raises(ValueError, match="between 0 and 1"):
            getattr(nn, name)(p=1.5)


def test_seeded_dropout_is_reproducible():
    x = munet.ones(10, 10)
    munet.manual_seed(3)
    a = nn.Dropout()(x).numpy()
    munet.manual_seed(3)
    b = nn.Dropout()(x).numpy()
    np.testing.assert_array_equal(a, b)
