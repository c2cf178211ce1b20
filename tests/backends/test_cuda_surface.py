"""The rest of ``torch.cuda``'s surface in ``munet.cuda``: memory controls and figures, pools,
telemetry, errors, the sync debug mode, legacy tensor types, external streams. Without CUDA they
answer PyTorch's defaults or raise ``munet.DeviceError``; on the fake devices (``fake_cupy``) they do
the real thing."""

import importlib.util
import warnings

import numpy as np
import pytest

import munet
from munet.backends.cuda import discovery
from tests.backends import fake_cupy


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(discovery, "_driver_device_count", lambda: (None, "no libcuda (test)"))
    monkeypatch.setattr(munet._device._BACKENDS["cuda"], "instances", {})
    discovery.reset()
    yield
    discovery.reset()


def test_defaults_without_cuda(no_cuda):
    cuda = munet.cuda
    assert cuda.memory_stats_as_nested_dict() == {}
    assert cuda.get_arch_list() == [] and cuda.get_gencode_flags() == ""
    assert cuda.host_memory_stats() == {} and cuda.host_memory_stats_as_nested_dict() == {}
    cuda.reset_accumulated_host_memory_stats()
    cuda.reset_peak_host_memory_stats()
    assert len(cuda.default_generators) == 0 and list(cuda.default_generators) == []
    assert cuda.has_half is True and cuda.has_magma is False
    assert cuda.is_current_stream_capturing() is False
    for deprecated in (cuda.memory_cached, cuda.max_memory_cached):
        with pytest.warns(FutureWarning, match="renamed"):
            assert deprecated() == 0
    with pytest.warns(FutureWarning, match="reset_peak_memory_stats"):
        cuda.reset_max_memory_cached()
    cuda.reset_accumulated_memory_stats()
    assert not isinstance(munet.zeros(2), cuda.FloatTensor) and isinstance(munet.zeros(2), munet.FloatTensor)
    assert repr(cuda.LongTensor) == "<class 'munet.cuda.LongTensor'>"


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.set_per_process_memory_fraction(0.5),
        lambda c: c.get_per_process_memory_fraction(),
        lambda c: c.caching_allocator_alloc(16),
        lambda c: c.can_device_access_peer(0, 1),
        lambda c: c.current_blas_handle(),
        lambda c: c.cudart(),
        lambda c: c.set_sync_debug_mode("warn"),
        lambda c: c.get_sync_debug_mode(),
        lambda c: c.ipc_collect(),
        lambda c: c.get_allocator_backend(),
        lambda c: c.memory_summary(),
        lambda c: c.graph_pool_handle(),
        lambda c: c.CUDAGraph().capture_begin(),
        lambda c: c.MemPool(),
        lambda c: c.ExternalStream(1234),
        lambda c: c.get_stream_from_external(1234),
        lambda c: c.FloatTensor(2),
    ],
)
def test_device_controls_raise_without_cuda(no_cuda, call):
    with pytest.raises(munet.DeviceError, match="no libcuda"):
        call(munet.cuda)


def test_errors_and_argument_checks(no_cuda):
    with pytest.raises(TypeError, match="must be `float`"):
        munet.cuda.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match="Allowed range: 0~1"):
        munet.cuda.set_per_process_memory_fraction(1.5)
    munet.cuda.check_error(0)
    with pytest.raises(munet.cuda.CudaError, match=r"\(2\)") as info:
        munet.cuda.check_error(2)
    assert info.value.code == 2 and isinstance(info.value, RuntimeError)


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="NVML is installed here")
def test_telemetry_needs_nvml():
    for fn in (munet.cuda.utilization, munet.cuda.temperature, munet.cuda.power_draw, munet.cuda.clock_rate,
               munet.cuda.device_memory_used, munet.cuda.memory_usage):  # fmt: skip
        with pytest.raises(ModuleNotFoundError, match="nvidia-ml-py"):
            fn()
    assert munet.cuda.list_gpu_processes() == "pynvml module not found, please install nvidia-ml-py"


# on the fake devices --------------------------------------------------------------------------------


@pytest.fixture
def gpus(fake_gpus):
    fake_cupy.skip_without_emulation()
    yield
    munet.cuda.set_sync_debug_mode(0)


def test_the_memory_fraction_is_enforced(gpus):
    munet.cuda.set_per_process_memory_fraction(0.25)  # of the fake device's 64 MiB
    assert munet.cuda.get_per_process_memory_fraction() == 0.25
    small = munet.empty(1 << 20, device="cuda")  # 4 MiB
    with pytest.raises(munet.OutOfMemoryError, match="set_per_process_memory_fraction"):
        munet.empty(5 << 20, device="cuda")  # 20 MiB
    assert munet.cuda.memory_stats()["num_ooms"] == 1
    munet.cuda.set_per_process_memory_fraction(1.0)
    big = munet.empty(5 << 20, device="cuda")
    assert big.numel() and small.numel()
    assert munet.cuda.get_per_process_memory_fraction(1) == 1.0  # each device has its own


def test_stats_summary_and_raw_blocks(gpus):
    x = munet.ones(1000, device="cuda")
    flat = munet.cuda.memory_stats()
    nested = munet.cuda.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == flat["allocated_bytes.all.current"] > 0
    summary = munet.cuda.memory_summary()
    assert "cuda:0" in summary and "Allocated memory (current)" in summary
    assert "Allocations" not in munet.cuda.memory_summary(abbreviated=True)
    munet.cuda.reset_accumulated_memory_stats()
    assert munet.cuda.memory_stats()["allocation.all.allocated"] == 0
    before = munet.cuda.memory_allocated()
    ptr = munet.cuda.caching_allocator_alloc(4096, device=1)
    assert isinstance(ptr, int) and munet.cuda.memory_allocated(1) >= 4096
    assert munet.cuda.memory_allocated() == before  # on cuda:1, not the current device
    munet.cuda.caching_allocator_delete(ptr)
    assert munet.cuda.memory_allocated(1) == 0
    with pytest.raises(RuntimeError, match="not allocated by caching_allocator_alloc"):
        munet.cuda.caching_allocator_delete(ptr)
    assert munet.cuda.get_allocator_backend() == "native"
    assert x.sum().item() == 1000


def test_mem_pool_routes_allocations(gpus):
    pool = munet.cuda.MemPool()
    assert isinstance(pool.id, tuple) and pool.use_count() == 1
    with munet.cuda.use_mem_pool(pool):
        assert pool.use_count() == 2
        inside = munet.ones(256, device="cuda")
    outside = munet.ones(256, device="cuda")
    assert pool.used_bytes() == inside.numel() * 4
    del inside
    assert pool.used_bytes() == 0 and outside.numel() == 256
    with pytest.raises(ValueError, match="custom allocators"):
        munet.cuda.MemPool(allocator=object())


def test_device_queries(gpus):
    assert munet.cuda.can_device_access_peer(0, 1) and not munet.cuda.can_device_access_peer(0, 0)
    assert "sm_90" in munet.cuda.get_arch_list()
    assert "-gencode compute=compute_90,code=sm_90" in munet.cuda.get_gencode_flags()
    assert isinstance(munet.cuda.current_blas_handle(), int)
    assert munet.cuda.cudart() is discovery.cupy_module().cuda.runtime
    assert len(munet.cuda.default_generators) == 2
    munet.cuda.manual_seed(3)
    assert munet.cuda.default_generators[1].initial_seed() == 3


def test_sync_debug_mode(gpus):
    x = munet.ones(3, device="cuda")
    assert munet.cuda.get_sync_debug_mode() == 0
    munet.cuda.set_sync_debug_mode("warn")
    with pytest.warns(UserWarning, match="synchronizing CUDA operation"):
        x.cpu()
    munet.cuda.set_sync_debug_mode(2)
    with pytest.raises(RuntimeError, match="synchronizing CUDA operation"):
        x.sum().item()
    munet.cuda.set_sync_debug_mode("default")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.sum().item() == 3
    with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
        munet.cuda.set_sync_debug_mode("loud")


def test_external_streams_and_legacy_types(gpus):
    raw = discovery.cupy_module().cuda.Stream()
    s = munet.cuda.ExternalStream(raw.ptr)
    with munet.cuda.stream(s):
        assert munet.cuda.current_stream().cuda_stream == raw.ptr
    assert munet.cuda.get_stream_from_external(raw.ptr, device=1).device == munet.device("cuda", 1)
    x = munet.cuda.FloatTensor([1.0, 2.0])
    assert x.is_cuda and isinstance(x, munet.cuda.FloatTensor) and not isinstance(x, munet.FloatTensor)
    assert munet.cuda.LongTensor(2, 3).shape == (2, 3)
    y = munet.tensor([1, 2]).type("torch.cuda.FloatTensor")
    assert y.is_cuda and y.dtype is munet.float32 and y.type() == "munet.cuda.FloatTensor"
    np.testing.assert_array_equal(y.cpu().numpy(), [1.0, 2.0])
