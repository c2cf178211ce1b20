"""munet/backends/vulkan/{backend,memory,runtime}.py: transfers, views, allocator, batching."""

import gc

import numpy as np
import pytest

import munet
from munet.backends.vulkan.memory import size_class

DTYPES = [munet.float32, munet.int32, munet.int64, munet.bool]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_round_trip_every_supported_dtype(vulkan, dtype):
    host = (np.random.randn(3, 5) * 100).astype(dtype.np)
    x = munet.tensor(host).to(vulkan)
    assert x.dtype is dtype and x.device == vulkan
    back = x.cpu().numpy()
    assert back.dtype == dtype.np
    np.testing.assert_array_equal(back, host)
    assert x[1, 2].item() == host[1, 2].item()


def test_int64_outside_int32_range_raises(vulkan):
    with pytest.raises(OverflowError, match="int64 is held as int32"):
        munet.tensor([2**40]).to(vulkan)


def test_unsupported_dtype_raises(vulkan):
    with pytest.raises(munet.DeviceError, match="float64 is not supported on the vulkan backend"):
        munet.zeros(2, dtype=munet.float64).to(vulkan)


def test_views_and_strided_copies(vulkan):
    host = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x = munet.tensor(host).to(vulkan)
    for view, ref in [
        (x.permute(2, 0, 1), host.transpose(2, 0, 1)),
        (x[:, 1:3, ::2], host[:, 1:3, ::2]),
        (x[1], host[1]),
        (x[:, :, 3].unsqueeze(0).expand(2, 3, 4), np.broadcast_to(host[:, :, 3], (2, 3, 4))),
    ]:
        assert view._storage is x._storage  # a view costs no device work
        np.testing.assert_array_equal(view.cpu().numpy(), ref)
        np.testing.assert_array_equal(view.contiguous().cpu().numpy(), ref)
    y = munet.zeros(3, 4, 5, device=vulkan)
    y[:, 1, :] = x[:, 2, :]
    ref = np.zeros_like(host)
    ref[:, 1, :] = host[:, 2, :]
    np.testing.assert_array_equal(y.cpu().numpy(), ref)


def test_overlapping_copy_within_one_storage(vulkan):
    x = munet.arange(10.0, device=vulkan)
    x[1:].copy_(x[:-1].clone())
    x[:5].copy_(x[5:])
    ref = np.arange(10.0, dtype=np.float32)
    ref[1:] = ref[:-1].copy()
    ref[:5] = ref[5:]
    np.testing.assert_array_equal(x.cpu().numpy(), ref)


def test_readback_reads_only_the_view(vulkan):
    x = munet.zeros(1000, device=vulkan)
    before = munet.vulkan.memory_stats(vulkan.index)
    assert x[500:503].cpu().tolist() == [0.0, 0.0, 0.0]
    after = munet.vulkan.memory_stats(vulkan.index)
    assert after["readbacks"] == before["readbacks"] + 1
    assert after["dispatches"] == before["dispatches"]  # contiguous slice: no compaction kernel


def test_allocator_reuses_freed_blocks(vulkan):
    assert size_class(1) == 256 and size_class(1000) == 1024 and size_class(3 << 20) == 3 << 20
    munet.vulkan.synchronize()
    x = munet.empty(1000, device=vulkan)
    del x
    gc.collect()
    before = munet.vulkan.memory_stats()
    for _ in range(5):
        y = munet.empty(900, device=vulkan)  # same size class
        del y
    after = munet.vulkan.memory_stats()
    assert after["device_allocations"] == before["device_allocations"]
    assert after["cache_hits"] == before["cache_hits"] + 5
    munet.vulkan.empty_cache()
    stats = munet.vulkan.memory_stats()
    assert stats["reserved_bytes"] >= stats["allocated_bytes"]


def test_eager_code_batches_submits(vulkan):
    x = munet.ones(64, 64, device=vulkan)
    munet.vulkan.synchronize()
    before = munet.vulkan.memory_stats()
    for _ in range(50):
        x = (x * 1.01 + 0.5).relu()
    total = x.sum().item()
    after = munet.vulkan.memory_stats()
    dispatches = after["dispatches"] - before["dispatches"]
    submits = after["submits"] - before["submits"]
    assert dispatches >= 150
    assert submits <= 3, (dispatches, submits)
    assert np.isfinite(total)


def test_pipelines_are_cached(vulkan):
    a = munet.ones(10, device=vulkan) * 3
    pipelines = munet.vulkan.memory_stats()["pipelines"]
    b = munet.ones(17, device=vulkan) * 5
    assert munet.vulkan.memory_stats()["pipelines"] == pipelines
    assert (a.sum() + b.sum()).item() == 115


def test_tensor_beyond_binding_limit_raises(vulkan):
    limit = munet._device.get_backend(vulkan).runtime.max_binding
    with pytest.raises(RuntimeError, match=r"exceeds this device's max_storage_buffer_binding_size \(\d+ bytes\)"):
        munet.empty(limit // 4 + 1, device=vulkan)


def test_allocation_failure_raises_out_of_memory(vulkan, monkeypatch):
    runtime = munet._device.get_backend(vulkan).runtime

    def fail(**kwargs):
        raise RuntimeError("simulated driver out-of-memory")

    munet.vulkan.empty_cache()  # else a cached block from an earlier test serves the allocation
    monkeypatch.setattr(runtime.device, "create_buffer", fail)
    with pytest.raises(munet.OutOfMemoryError, match=r"could not allocate \d+ bytes"):
        munet.empty(12345, device=vulkan)


def test_batch_scope_records_one_command_buffer(vulkan):
    runtime = munet._device.get_backend(munet.device(vulkan)).runtime
    x = munet.ones(64, 64, device=vulkan)
    munet.vulkan.synchronize()
    before = munet.vulkan.memory_stats()
    with runtime.batch():
        for _ in range(120):  # 360 dispatches: more than an eager batch holds
            x = (x * 1.01 + 0.5).relu()
        assert munet.vulkan.memory_stats()["submits"] == before["submits"]
    total = x.sum().item()
    after = munet.vulkan.memory_stats()
    assert after["dispatches"] - before["dispatches"] >= 360
    assert after["submits"] - before["submits"] <= 2  # the batch, then the sum read back
    assert runtime.max_pending == 256 and np.isfinite(total)
