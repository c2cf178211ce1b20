"""munet/_repr.py: tensor printing and set_printoptions, compared with PyTorch's text."""

import numpy as np
import pytest
import torch

import munet

RNG = np.random.default_rng(0)
ARRAYS = [
    RNG.standard_normal((3, 5)).astype(np.float32),
    (np.arange(2000, dtype=np.float32) / 7).reshape(40, 50),
    RNG.standard_normal((3, 5)).astype(np.float32) * 1e-6,
    np.arange(12).reshape(3, 4),
    np.arange(1200).reshape(2, 600),
    RNG.standard_normal(5).astype(np.float32),
    np.array([1.5, np.nan, -np.inf, 2.0], np.float32),
    np.array([[True, False], [True, True]]),
    np.zeros((0,), np.float32),
    np.array(3.25, np.float32),
    RNG.standard_normal((2, 3, 400)).astype(np.float32),
]
OPTIONS = [
    {},
    {"precision": 2},
    {"sci_mode": True},
    {"sci_mode": False},
    {"threshold": 5},
    {"edgeitems": 1, "threshold": 5},
    {"linewidth": 40},
    {"profile": "short"},
    {"profile": "full"},
    {"precision": 6, "sci_mode": False, "linewidth": 120},
]


@pytest.fixture(autouse=True)
def default_print_options():
    yield
    munet.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_repr_under_print_options_matches_torch(options):
    munet.set_printoptions(**options)
    torch.set_printoptions(**options)
    for arr in ARRAYS:
        assert repr(munet.tensor(arr)) == repr(torch.tensor(arr)).replace("torch.", "munet."), arr.shape


def test_print_options_persist_and_reset():
    munet.set_printoptions(precision=2)
    assert repr(munet.tensor([1.23456])) == "tensor([1.23])"
    munet.set_printoptions(sci_mode=True)  # precision stays, as in PyTorch
    assert repr(munet.tensor([1.23456])) == "tensor([1.23e+00])"
    munet.set_printoptions(profile="default")
    assert repr(munet.tensor([1.23456])) == "tensor([1.2346])"
    with pytest.raises(ValueError, match="profile must be one of"):
        munet.set_printoptions(profile="tiny")
