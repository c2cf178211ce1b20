"""Normalization layers against torch.nn: buffers, running statistics, train/eval, repr,
forward and gradients; plus a small BatchNorm CNN trained 3 SGD steps in both frameworks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet
import munet.nn as nn
import munet.nn.functional as F
from tests.nn.layer_check import assert_same_structure, compare, copy_state, make_pair, run_both
from tests.reference import assert_close, assert_close_to_reference, float64_copy, randn, to_torch

BN = [
    ("BatchNorm1d", (4, 3)),
    ("BatchNorm1d", (4, 3, 5)),
    ("BatchNorm2d", (2, 3, 4, 5)),
    ("BatchNorm3d", (2, 3, 2, 3, 2)),
]
BN_OPTIONS = [
    {},
    {"affine": False},
    {"track_running_stats": False},
    {"affine": False, "track_running_stats": False},
    {"momentum": None},
    {"momentum": 0.3, "eps": 1e-3},
    {"bias": False},
]


@pytest.mark.parametrize("name,shape", BN, ids=str)
@pytest.mark.parametrize("kwargs", BN_OPTIONS, ids=str)
def test_batch_norm_matches_torch(name, shape, kwargs):
    compare(name, (3,), kwargs, randn(*shape), float64_reference=True)


def test_batch_norm_float64_running_stats_over_several_steps():
    for momentum in (0.1, None):
        m, t = make_pair("BatchNorm2d", (3,), {"momentum": momentum}, dtype="float64")
        for step in range(3):
            run_both(m, t, randn(4, 3, 2, 2, dtype="float64", seed=step))
        assert int(m.num_batches_tracked) == 3
        m.eval()
        t.eval()
        run_both(m, t, randn(2, 3, 2, 2, dtype="float64", seed=9))
        assert int(m.num_batches_tracked) == 3


def test_batch_norm_buffers_like_pytorch():
    layer = nn.BatchNorm2d(5)
    assert list(layer.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert layer.num_batches_tracked.dtype is munet.int64 and layer.num_batches_tracked.ndim == 0
    assert layer.running_mean.tolist() == [0.0] * 5 and layer.running_var.tolist() == [1.0] * 5
    assert layer.weight.tolist() == [1.0] * 5 and layer.bias.tolist() == [0.0] * 5
    untracked = nn.BatchNorm1d(5, track_running_stats=False)
    assert untracked.running_mean is None and untracked.running_var is None and untracked.num_batches_tracked is None
    assert list(untracked.state_dict()) == ["weight", "bias"]
    layer.double()
    assert layer.running_mean.dtype is munet.float64 and layer.num_batches_tracked.dtype is munet.int64


def test_batch_norm_rank_errors_and_single_value():
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(munet.randn(3, 4, 5))
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        nn.BatchNorm1d(3)(munet.randn(2, 3, 4, 5))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(munet.randn(1, 3))


def test_batch_norm_reset_running_stats():
    layer = nn.BatchNorm1d(2)
    layer(munet.randn(4, 2))
    layer.reset_running_stats()
    assert int(layer.num_batches_tracked) == 0 and layer.running_var.tolist() == [1.0, 1.0]


IN = [("InstanceNorm1d", (2, 3, 6)), ("InstanceNorm1d", (3, 6)), ("InstanceNorm2d", (2, 3, 4, 4)), ("InstanceNorm2d", (3, 4, 4)), ("InstanceNorm3d", (2, 3, 2, 3, 2))]  # fmt: skip


@pytest.mark.parametrize("name,shape", IN, ids=str)
@pytest.mark.parametrize("kwargs", [{}, {"affine": True}, {"track_running_stats": True}, {"affine": True, "track_running_stats": True, "momentum": 0.2}], ids=str)  # fmt: skip
def test_instance_norm_matches_torch(name, shape, kwargs):
    compare(name, (3,), kwargs, randn(*shape), float64_reference=True)


def test_instance_norm_errors():
    with pytest.raises(ValueError, match="num_features"):
        nn.InstanceNorm2d(4, affine=True)(munet.randn(2, 3, 4, 4))
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm2d(4)(munet.randn(2, 3, 4, 4))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "args,kwargs,shape",
    [
        ((5,), {}, (3, 5)),
        ((5,), {"elementwise_affine": False}, (3, 5)),
        ((5,), {"bias": False, "eps": 1e-3}, (2, 3, 5)),
        (([3, 4],), {}, (2, 3, 4)),
    ],
    ids=str,
)
def test_layer_norm_matches_torch(args, kwargs, shape, dtype):
    compare("LayerNorm", args, kwargs, randn(*shape), dtype=dtype, modes=("train",), float64_reference=True)


@pytest.mark.parametrize(
    "args,kwargs",
    [((2, 6), {}), ((3, 6), {"affine": False}), ((6, 6), {"eps": 1e-3}), ((1, 6), {"bias": False})],
    ids=str,
)
def test_group_norm_matches_torch(args, kwargs):
    compare("GroupNorm", args, kwargs, randn(2, 6, 3, 2), modes=("train",), float64_reference=True)


def test_group_norm_divisibility_error():
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(4, 6)


@pytest.mark.parametrize("args,kwargs", [((5,), {}), ((5,), {"eps": 1e-3}), (([3, 5],), {"elementwise_affine": False})], ids=str)  # fmt: skip
def test_rms_norm_matches_torch(args, kwargs):
    compare("RMSNorm", args, kwargs, randn(2, 3, 5), modes=("train",), float64_reference=True)


@pytest.mark.parametrize("kwargs", [{"size": 3}, {"size": 2, "alpha": 1e-2, "beta": 0.5, "k": 2.0}], ids=str)
def test_local_response_norm_matches_torch(kwargs):
    compare("LocalResponseNorm", (), kwargs, randn(2, 5, 3, 3), modes=("train",), float64_reference=True)


def test_norm_parameter_state_and_repr():
    for m, t in [
        (nn.LayerNorm(4, bias=False), torch.nn.LayerNorm(4, bias=False)),
        (nn.GroupNorm(2, 4, affine=False), torch.nn.GroupNorm(2, 4, affine=False)),
        (nn.RMSNorm([2, 3], eps=1e-6), torch.nn.RMSNorm([2, 3], eps=1e-6)),
        (
            nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
            torch.nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
        ),  # fmt: skip
        (nn.BatchNorm3d(2, momentum=None), torch.nn.BatchNorm3d(2, momentum=None)),
    ]:
        copy_state(m, t)
        assert_same_structure(m, t)


# A small CNN trained for 3 SGD steps in both frameworks ---------------------------------------


class _MunetCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(self.flatten(self.pool(F.relu(self.bn(self.conv(x))))))


class _TorchCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.pool = torch.nn.MaxPool2d(2)
        self.flatten = torch.nn.Flatten()
        self.fc = torch.nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(self.flatten(self.pool(torch.relu(self.bn(self.conv(x))))))


def test_batchnorm_cnn_sgd_steps_match_torch():
    torch.manual_seed(0)
    t_model, m_model = _TorchCNN(), _MunetCNN()
    copy_state(m_model, t_model)
    assert list(m_model.state_dict()) == list(t_model.state_dict())
    r_model = float64_copy(t_model)
    t_opt = torch.optim.SGD(t_model.parameters(), lr=0.1, momentum=0.9)
    r_opt = torch.optim.SGD(r_model.parameters(), lr=0.1, momentum=0.9)
    m_opt = munet.optim.SGD(m_model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    for step in range(3):
        x = rng.standard_normal((6, 3, 8, 8)).astype(np.float32)
        y = rng.integers(0, 5, size=6)
        t_opt.zero_grad()
        r_opt.zero_grad()
        m_opt.zero_grad()
        t_loss = torch.nn.functional.cross_entropy(t_model(to_torch(x)), torch.from_numpy(y))
        r_loss = torch.nn.functional.cross_entropy(r_model(to_torch(x).double()), torch.from_numpy(y))
        m_loss = F.cross_entropy(m_model(munet.tensor(x)), munet.tensor(y))
        assert_close(m_loss, t_loss.detach(), rtol=1e-5, atol=1e-6, what=f"loss at step {step}")
        for loss, opt in ((t_loss, t_opt), (r_loss, r_opt), (m_loss, m_opt)):
            loss.backward()
            opt.step()
        t_state, r_state = t_model.state_dict(), r_model.state_dict()
        for key, value in m_model.state_dict().items():
            assert_close_to_reference(value, t_state[key], r_state[key], what=f"{key} after step {step}")
    for model in (m_model, t_model, r_model):
        model.eval()
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        expected, exact = t_model(to_torch(x)), r_model(to_torch(x).double())
    assert_close_to_reference(m_model(munet.tensor(x)).detach(), expected, exact, what="eval output")
