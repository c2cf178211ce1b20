"""Process-wide switches at ``munet.*`` against PyTorch: determinism, float32 matmul precision,
flush-denormal, warn-always, inter-op threads, the build facts, the constants, and the autocast
state functions (which drive the same state as ``autocast`` blocks)."""

import importlib
import math

import numpy as np
import pytest
import torch

import munet
from munet import _global_flags


@pytest.fixture
def restore_determinism():
    yield
    munet.use_deterministic_algorithms(False)
    torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("mode", ["default", "warn", "error", 0, 1, 2])
def test_deterministic_debug_mode_matches_torch(mode, restore_determinism):
    munet.set_deterministic_debug_mode(mode)
    torch.set_deterministic_debug_mode(mode)
    assert munet.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode()
    assert munet.are_deterministic_algorithms_enabled() == torch.are_deterministic_algorithms_enabled()
    assert (
        munet.is_deterministic_algorithms_warn_only_enabled() == torch.is_deterministic_algorithms_warn_only_enabled()
    )


def test_deterministic_flag_checks_its_arguments(restore_determinism):
    with pytest.raises(TypeError, match="must be bool"):
        munet.use_deterministic_algorithms(1)
    with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`"):
        munet.set_deterministic_debug_mode("sometimes")
    with pytest.raises(RuntimeError, match="expected 0, 1, or 2"):
        munet.set_deterministic_debug_mode(3)
    munet.use_deterministic_algorithms(True, warn_only=True)
    assert munet.get_deterministic_debug_mode() == 1


def test_cpu_scatter_add_runs_under_determinism(restore_determinism):
    munet.use_deterministic_algorithms(True)
    out = munet.zeros(3).scatter_add_(0, munet.tensor([0, 0, 2]), munet.tensor([1.0, 2.0, 3.0]))
    assert out.tolist() == [3.0, 0.0, 3.0]


def test_vulkan_float_atomics_refuse_under_determinism(vulkan, restore_determinism):
    index = munet.tensor([0, 0, 2], device=vulkan)
    src = munet.tensor([1.0, 2.0, 3.0], device=vulkan)
    assert munet.zeros(3, device=vulkan).scatter_add_(0, index, src).cpu().tolist() == [3.0, 0.0, 3.0]
    munet.use_deterministic_algorithms(True)
    with pytest.raises(RuntimeError, match="scatter.*on vulkan does not have a deterministic implementation"):
        munet.zeros(3, device=vulkan).scatter_add_(0, index, src)
    with pytest.raises(RuntimeError, match="index_add_ on vulkan"):
        munet.zeros(3, device=vulkan).index_add_(0, index, src)
    # integer sums are exact in any order, and plain scatters do not accumulate
    munet.zeros(3, dtype=munet.int32, device=vulkan).scatter_add_(0, index, src.int())
    munet.zeros(3, device=vulkan).scatter_(0, munet.tensor([0, 1, 2], device=vulkan), src)
    x = munet.tensor([1.0, 3.0, 2.0], device=vulkan, requires_grad=True)
    values, _ = x.cummax(0)
    with pytest.raises(RuntimeError, match="cummax/cummin backward"):
        values.sum().backward()
    munet.use_deterministic_algorithms(True, warn_only=True)
    with pytest.warns(UserWarning, match="does not have a deterministic implementation"):
        out = munet.zeros(3, device=vulkan).scatter_add_(0, index, src)
    assert out.cpu().tolist() == [3.0, 0.0, 3.0]


@pytest.fixture
def restore_precision():
    yield
    munet.set_float32_matmul_precision("highest")


@pytest.mark.parametrize("precision", ["highest", "high", "medium"])
def test_float32_matmul_precision_sets_tf32(precision, restore_precision):
    munet.set_float32_matmul_precision(precision)
    assert munet.get_float32_matmul_precision() == precision
    assert munet.backends.cuda.matmul.allow_tf32 is (precision != "highest")
    munet.backends.cuda.matmul.allow_tf32 = precision == "highest"  # the legacy flag wins, as it is what runs
    assert munet.get_float32_matmul_precision() == ("high" if precision == "highest" else "highest")
    with pytest.raises(ValueError, match="expected one of"):
        munet.set_float32_matmul_precision("low")


def test_flush_denormal_flushes_subnormals():
    tiny64 = munet.tensor([1e-310], dtype=munet.float64)
    tiny32 = munet.tensor([1e-40], dtype=munet.float32)
    try:
        supported = munet.set_flush_denormal(True)
        assert supported is torch.set_flush_denormal(True)
        if supported:
            assert (tiny64 * 1).tolist() == [0.0] and (tiny32 * 1).tolist() == [0.0]
            assert (torch.tensor([1e-310], dtype=torch.float64) * 1).tolist() == [0.0]
    finally:
        assert munet.set_flush_denormal(False) is supported
        torch.set_flush_denormal(False)
    assert (tiny64 * 1).item() == pytest.approx(1e-310, rel=1e-3)


def test_warn_always_is_recorded():
    before = munet.is_warn_always_enabled()
    munet.set_warn_always(True)
    assert munet.is_warn_always_enabled() is True
    munet.set_warn_always(before)
    assert munet.is_warn_always_enabled() is before


def test_interop_threads(monkeypatch):
    monkeypatch.setattr(_global_flags, "_interop", [])
    assert munet.get_num_interop_threads() == 1
    with pytest.raises(RuntimeError, match="positive number of threads"):
        munet.set_num_interop_threads(0)
    munet.set_num_interop_threads(3)
    assert munet.get_num_interop_threads() == 3
    with pytest.raises(RuntimeError, match="cannot set number of interop threads"):
        munet.set_num_interop_threads(2)
    assert munet.init_num_threads() is None and munet.get_num_threads() >= 1


def test_build_facts():
    assert munet.has_lapack is True
    config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    assert munet.has_mkl is ("mkl" in config.lower()) is munet.backends.mkl.is_available()
    try:
        importlib.import_module("munet.fft")
    except ImportError:
        spectral = False
    else:
        spectral = True
    assert munet.has_spectral is spectral


def test_constants_match_torch():
    assert (munet.e, munet.pi, munet.inf) == (torch.e, torch.pi, torch.inf)
    assert math.isnan(munet.nan) and munet.newaxis is torch.newaxis is None
    x = munet.arange(3)
    assert x[:, munet.newaxis].shape == (3, 1)


@pytest.fixture
def restore_autocast():
    yield
    for device_type in ("cpu", "cuda"):
        munet.set_autocast_enabled(device_type, False)
    munet.set_autocast_cpu_dtype(munet.bfloat16)
    munet.set_autocast_cache_enabled(True)
    munet.clear_autocast_cache()


def test_autocast_functions_drive_autocast(restore_autocast):
    a, b = munet.ones(2, 2), munet.ones(2, 2)
    assert not munet.is_autocast_cpu_enabled() and munet.get_autocast_cpu_dtype() is munet.bfloat16
    munet.set_autocast_enabled("cpu", True)
    assert munet.is_autocast_enabled("cpu") and munet.is_autocast_cpu_enabled()
    assert (a @ b).dtype is munet.bfloat16
    munet.set_autocast_dtype("cpu", munet.float16)
    assert munet.get_autocast_dtype("cpu") is munet.float16 and (a @ b).dtype is munet.float16
    munet.set_autocast_cpu_enabled(False)
    assert (a @ b).dtype is munet.float32
    munet.set_autocast_cpu_dtype(munet.bfloat16)
    with munet.autocast("cpu"):
        assert (a @ b).dtype is munet.bfloat16
    munet.set_autocast_enabled(True)  # PyTorch's one-argument form is cuda's
    assert munet.is_autocast_enabled() and not munet.is_autocast_enabled("cpu")
    with pytest.raises(RuntimeError, match="supports munet.float16 and munet.bfloat16"):
        munet.set_autocast_dtype("cpu", munet.float64)
    with pytest.raises(TypeError, match="must be a bool"):
        munet.set_autocast_enabled("cpu", 1)


def test_autocast_cache_functions(restore_autocast):
    w = munet.ones(2, 2, requires_grad=True)
    x = munet.ones(2, 2)
    assert munet.is_autocast_cache_enabled() is torch.is_autocast_cache_enabled() is True
    munet.set_autocast_enabled("cpu", True)
    first, second = (w @ x), (w @ x)
    assert first.dtype is second.dtype is munet.bfloat16
    from munet.ops._autocast import _State

    assert len(_State.cache) == 1  # the weight was cast once and reused
    munet.clear_autocast_cache()
    assert _State.cache == {}
    munet.set_autocast_cache_enabled(False)
    assert not munet.is_autocast_cache_enabled()
    _ = w @ x
    assert _State.cache == {}


def test_torch_level_predicates_match_torch():
    for values in ([1.5], [0.0], [[2]]):
        assert munet.is_nonzero(munet.tensor(values)) == torch.is_nonzero(torch.tensor(values))
    for shape in ((2,), (0,)):
        with pytest.raises(RuntimeError, match="ambiguous"):
            munet.is_nonzero(munet.ones(*shape))
    assert munet.is_same_size(munet.ones(2, 3), munet.zeros(2, 3)) and not munet.is_same_size(
        munet.ones(2), munet.ones(3)
    )
    assert munet.is_signed(munet.ones(1)) and not munet.is_signed(munet.ones(1, dtype=munet.uint8))
    assert munet.is_storage(munet.ones(2).untyped_storage()) and not munet.is_storage(munet.ones(2))
    assert munet.is_distributed(munet.ones(1)) is torch.is_distributed(torch.ones(1)) is False
    assert munet.get_device(munet.ones(1)) == torch.get_device(torch.ones(1)) == -1
    with munet.inference_mode():
        assert munet.is_inference(munet.ones(1))
    assert not munet.is_inference(munet.ones(1))


def test_typename_matches_torch():
    assert munet.typename(munet.ones(2, dtype=munet.int64)) == "munet.LongTensor"
    assert munet.typename(munet.nn.Parameter(munet.ones(1))) == "munet.FloatTensor"
    assert munet.typename(3) == torch.typename(3) == "int"
    assert munet.typename(munet.nn.Linear(1, 1)) == "munet.nn.modules.linear.Linear"
    assert torch.typename(torch.nn.Linear(1, 1)) == "torch.nn.modules.linear.Linear"
    assert munet.typename(munet.Tensor) == "munet._tensor.Tensor"


def test_get_device_module():
    assert munet.get_device_module("cpu") is munet.cpu and munet.cpu.is_available()
    assert munet.get_device_module(munet.device("cuda:0")) is munet.cuda
    assert munet.get_device_module("vulkan") is munet.vulkan
    expected = {None: munet.cpu, "cuda": munet.cuda, "vulkan": munet.vulkan}
    current = munet.accelerator.current_accelerator()
    assert munet.get_device_module() is expected[None if current is None else current.type]


def test_grad_scaler_and_future_at_top_level():
    assert munet.GradScaler is munet.amp.GradScaler
    future = munet.Future()
    assert not future.done()
    chained = future.then(lambda f: f.value() + 1)
    future.set_result(1)
    assert future.wait() == 1 and chained.wait() == 2
    with pytest.raises(RuntimeError, match="only be marked completed once"):
        future.set_result(2)
    failed = munet.Future()
    failed.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        failed.wait()
    late = []
    failed.add_done_callback(late.append)  # already complete: called at once
    assert late == [failed]


def test_collect_all_and_wait_all_match_torch_futures():
    from munet.futures import collect_all, wait_all

    for lib_future, lib_collect, lib_wait in ((munet.Future, collect_all, wait_all),
                                              (torch.futures.Future, torch.futures.collect_all,
                                               torch.futures.wait_all)):  # fmt: skip
        first, second = lib_future(), lib_future()
        both = lib_collect([first, second])
        assert not both.done()
        first.set_result(1)
        assert not both.done()
        second.set_result(2)
        assert [f.value() for f in both.wait()] == [1, 2]
        assert lib_wait([first, second]) == [1, 2]
    assert collect_all([]).wait() == []


def _worker_generator(_):
    return munet.thread_safe_generator() is None


def test_thread_safe_generator_is_none_outside_thread_workers():
    assert munet.thread_safe_generator() is None is torch.thread_safe_generator()
    loader = munet.utils.data.DataLoader(list(range(4)), batch_size=2, num_workers=1,
                                         worker_init_fn=None, collate_fn=_worker_generator)  # fmt: skip
    assert list(loader) == [True, True]
