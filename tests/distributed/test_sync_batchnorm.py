"""SyncBatchNorm outside a process group is BatchNorm; convert_sync_batchnorm keeps the parameters and buffers.

Its synchronized path runs under mpirun in worker_ddp.py (DDP + SyncBatchNorm on shards equals
BatchNorm on the whole batch)."""

import numpy as np
import pytest

import munet
from munet import nn


def test_convert_replaces_every_batchnorm_and_shares_its_state():
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.Sequential(nn.Flatten(), nn.BatchNorm1d(3 * 9)))
    model.eval()
    before = {k: v for k, v in model.state_dict(keep_vars=True).items()}
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert isinstance(converted[1], nn.SyncBatchNorm) and isinstance(converted[2][1], nn.SyncBatchNorm)
    assert not converted[1].training
    after = converted.state_dict(keep_vars=True)
    assert list(after) == list(before) and all(after[k] is before[k] for k in before)


@pytest.mark.parametrize("training", [True, False])
def test_without_a_process_group_it_is_batchnorm(training):
    munet.manual_seed(0)
    plain = nn.BatchNorm2d(3, momentum=None)
    synced = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm2d(3, momentum=None)))[0]
    plain.train(training)
    synced.train(training)
    x = munet.randn(4, 3, 2, 5)
    np.testing.assert_allclose(synced(x).detach().numpy(), plain(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(synced.running_var.numpy(), plain.running_var.numpy(), rtol=1e-6)


def test_rejects_one_dimensional_input():
    with pytest.raises(ValueError, match="at least 2D"):
        nn.SyncBatchNorm(3)(munet.ones(3))
