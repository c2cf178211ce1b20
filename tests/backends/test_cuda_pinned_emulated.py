"""Pinned host memory on the fake cuda devices: ``Tensor.pin_memory``/``is_pinned`` and PyTorch's
``non_blocking`` rule for host transfers (``munet/backends/cuda/pinned.py``, ``copies.py``): an
upload from pinned memory is queued on the stream, one from pageable memory is synchronous; a
non-blocking download lands in new pinned memory. The fake records each host copy's kind."""

import ml_dtypes
import numpy as np
import pytest

import munet
from tests.backends import fake_cupy

pytestmark = pytest.mark.usefixtures("fake_gpus")


def _copies(kind: str) -> list:
    return [(pinned, blocking) for k, pinned, blocking in fake_cupy.HOST_COPIES if k == kind]


def test_pin_memory_copies_into_pinned_memory_once():
    x = munet.arange(12, dtype=munet.float32).reshape(3, 4)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu" and fake_cupy.PINNED_ALLOCATIONS == [48]
    np.testing.assert_array_equal(p.numpy(), x.numpy())
    assert p.pin_memory() is p and p[1:].is_pinned() and p.t().is_pinned()  # views of pinned memory
    assert not p.clone().is_pinned()
    assert not p.cuda().is_pinned()


def test_a_strided_bfloat16_tensor_pins_its_values():
    x = munet.tensor(np.arange(8, dtype=np.float32)).to(munet.bfloat16)[::2]
    p = x.pin_memory()
    assert p.is_pinned() and p.dtype is munet.bfloat16
    np.testing.assert_array_equal(p.float().numpy(), np.arange(0, 8, 2, dtype=np.float32))


def test_a_non_blocking_upload_from_pinned_memory_is_queued_on_the_stream():
    x = munet.arange(6, dtype=munet.float32).pin_memory()
    fake_cupy.HOST_COPIES.clear()
    y = x.to("cuda", non_blocking=True)
    assert _copies("set") == [(True, False)]  # pinned, not blocking
    np.testing.assert_array_equal(y.cpu().numpy(), x.numpy())
    fake_cupy.HOST_COPIES.clear()
    x.cuda(non_blocking=True)
    x.to("cuda:1", munet.float32, True)  # positional non_blocking, as PyTorch's to(device, dtype, non_blocking)
    assert _copies("set") == [(True, False), (True, False)]


def test_blocking_and_pageable_uploads_are_synchronous():
    pinned, pageable = munet.ones(4).pin_memory(), munet.ones(4)
    fake_cupy.HOST_COPIES.clear()
    pinned.cuda()
    pageable.to("cuda", non_blocking=True)
    assert _copies("set") == [(True, True), (False, True)]


def test_a_non_blocking_download_lands_in_pinned_memory():
    x = munet.tensor(np.arange(10, dtype=np.float32)).cuda()
    fake_cupy.HOST_COPIES.clear()
    host = x.to("cpu", non_blocking=True)
    munet.cuda.synchronize()  # the values are there once the stream is synchronized, as in PyTorch
    assert host.is_pinned() and _copies("get") == [(True, False)]
    np.testing.assert_array_equal(host.numpy(), np.arange(10, dtype=np.float32))
    blocking = x.cpu()
    assert not blocking.is_pinned() and _copies("get")[-1] == (False, True)
    bf = munet.tensor(np.arange(4, dtype=ml_dtypes.bfloat16)).cuda().to("cpu", non_blocking=True)
    assert bf.is_pinned() and bf.dtype is munet.bfloat16


def test_a_cuda_tensor_cannot_be_pinned():
    with pytest.raises(RuntimeError, match="pin_memory: cannot pin 'cuda:0' memory"):
        munet.ones(2).cuda().pin_memory()
    assert not munet.ones(2).cuda().is_pinned()


def test_a_data_loader_with_pin_memory_yields_pinned_batches():
    data = munet.utils.data.TensorDataset(munet.arange(8.0).reshape(4, 2), munet.arange(4))
    for x, y in munet.utils.data.DataLoader(data, batch_size=2, pin_memory=True):
        assert x.is_pinned() and y.is_pinned()
    x, _ = next(iter(munet.utils.data.DataLoader(data, batch_size=2)))
    assert not x.is_pinned()
