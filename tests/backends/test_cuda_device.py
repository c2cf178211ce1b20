"""The cuda backend without a GPU (what CI checks): discovery and its errors, munet.cuda's answers
and seeding, the flags, the kernel table's binding, and the layout and bfloat16 logic of the GPU
code, run here with NumPy standing in for CuPy. tests/backends/test_cuda_gpu.py needs a GPU."""

import sys
import types
import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import munet
from munet.backends.bound_kernels import BoundKernels
from munet.backends.cuda import copies, discovery
from munet.backends.cuda.backend import _bind
from munet.backends.cuda.kernels_blas import blas_operand, gemm_arguments
from munet.backends.cuda.registry import KERNELS, kernel


def _fake_cupy_with_an_old_driver():
    def old_driver():
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")

    runtime = types.SimpleNamespace(getDeviceCount=old_driver)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))


WHY = {
    "no driver": r"NVIDIA driver library could not be loaded \(fake: no libcuda\)",
    "no cupy": r"cupy package is not available.*munet\[cuda13\]",
    "old driver": r"that CuPy can use \(CuPy: cudaErrorInsufficientDriver",
}


@pytest.fixture(params=sorted(WHY))
def no_cuda(request, monkeypatch):
    """A machine without an NVIDIA driver, with one but without CuPy, or with a driver too old for
    CuPy's CUDA runtime."""
    if request.param == "no driver":
        monkeypatch.setattr(
            discovery,
            "_driver_device_count",
            lambda: (None, "the NVIDIA driver library could not be loaded (fake: no libcuda)"),
        )
    else:
        monkeypatch.setattr(discovery, "_driver_device_count", lambda: (1, None))
        monkeypatch.setitem(
            sys.modules, "cupy", None if request.param == "no cupy" else _fake_cupy_with_an_old_driver()
        )
    monkeypatch.setattr(munet._device._BACKENDS["cuda"], "instances", {})
    discovery.reset()
    yield WHY[request.param]
    discovery.reset()


def test_the_driver_probe_answers_without_cupy():
    count, why = discovery._driver_device_count()
    assert (count is None) == (why is not None)
    assert count is None or count >= 0


def test_queries_without_a_device_answer_as_torch_on_a_machine_without_cuda(no_cuda):
    assert munet.cuda.is_available() is False and munet.cuda.device_count() == 0
    assert munet.cuda.is_initialized() is False
    assert munet.cuda.is_bf16_supported() is torch.cuda.is_bf16_supported() is False
    assert munet.cuda.memory_allocated() == munet.cuda.max_memory_allocated() == munet.cuda.memory_reserved() == 0
    assert munet.cuda.memory_stats() == {}
    munet.cuda.empty_cache()
    munet.cuda.reset_peak_memory_stats()
    assert munet.accelerator.current_accelerator() != munet.device("cuda")


def test_cuda_tensors_raise_device_error_saying_what_is_missing(no_cuda):
    why = "no CUDA device or driver was found.*" + no_cuda
    for make in (
        lambda: munet.zeros(2, device="cuda"),
        lambda: munet.ones(2).cuda(),
        lambda: munet.ones(2).to("cuda:1"),
        lambda: munet.nn.Linear(2, 2).cuda(),
        lambda: munet.set_default_device("cuda"),
        lambda: munet.tensor([1.0], device=munet.device("cuda", 0)),
    ):
        with pytest.raises(munet.DeviceError, match=rf"device 'cuda:\d' is not available; {why}"):
            make()
    for call in (
        munet.cuda.current_device,
        munet.cuda.synchronize,
        munet.cuda.get_device_name,
        munet.cuda.get_device_capability,
        munet.cuda.Stream,
        munet.cuda.current_stream,
        munet.cuda.mem_get_info,
        lambda: munet.cuda.set_device(0),
        lambda: munet.cuda.device(0).__enter__(),
        lambda: munet.cuda.Event().record(),
    ):
        with pytest.raises(munet.DeviceError, match=why):
            call()


def test_info_names_the_reason(no_cuda, capsys):
    from munet.cli import main

    assert main(["info"]) == 0
    assert "cuda: unavailable: no CUDA device or driver was found" in capsys.readouterr().out


def test_seeding_works_without_a_gpu(no_cuda):
    munet.cuda.manual_seed(5)
    assert munet.cuda.initial_seed() == 5
    munet.cuda.manual_seed_all(6)
    assert munet.cuda.initial_seed() == 6
    munet.manual_seed(7)  # seeds every device type's default generator, as torch.manual_seed
    assert munet.cuda.initial_seed() == 7
    state = munet.cuda.get_rng_state()
    assert state.dtype is munet.uint8 and state.device == munet.device("cpu")
    munet.cuda.seed()
    assert munet.cuda.initial_seed() != 7
    munet.cuda.set_rng_state(state)
    assert munet.cuda.initial_seed() == 7
    munet.cuda.set_rng_state_all(munet.cuda.get_rng_state_all())
    assert munet.cuda.initial_seed() == 7 and munet.initial_seed() == 7


def _warnings(make):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        made = make()
    return made, [w.category for w in seen]


def test_cuda_amp_spellings_warn_and_disable_as_torch(no_cuda):
    for name in ("autocast", "GradScaler"):
        ours, our_warnings = _warnings(getattr(munet.cuda.amp, name))
        _, torch_warnings = _warnings(getattr(torch.cuda.amp, name))
        assert our_warnings == torch_warnings == [FutureWarning, UserWarning]
    scaler, _ = _warnings(munet.cuda.amp.GradScaler)
    assert not scaler.is_enabled()
    with _warnings(munet.cuda.amp.autocast)[0]:
        x = munet.ones(2, 2)
        assert (x @ x).dtype is munet.float32 and not munet.is_autocast_enabled("cuda")


def test_flags_have_torchs_defaults_and_are_settable():
    m, t = munet.backends.cuda.matmul, torch.backends.cuda.matmul
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        assert getattr(m, name) == getattr(t, name)
    m.allow_tf32 = True
    try:
        assert munet.backends.cuda.matmul.allow_tf32 is True
    finally:
        m.allow_tf32 = False
    with pytest.raises(AttributeError, match="Unknown attribute allow_tf33"):
        m.allow_tf33 = True
    with pytest.raises(TypeError, match="expected a bool"):
        m.allow_tf32 = "yes"
    cudnn, tcudnn = munet.backends.cudnn, torch.backends.cudnn
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    assert [getattr(cudnn, n) for n in names] == [getattr(tcudnn, n) for n in names]
    assert cudnn.benchmark_limit == 10  # a CUDA build's default (a CPU build of torch answers None)
    assert cudnn.is_available() is False and cudnn.version() is None
    with cudnn.flags(enabled=False, deterministic=True):
        assert cudnn.enabled is False and cudnn.deterministic is True and cudnn.benchmark is False
    assert cudnn.enabled is True and cudnn.deterministic is False
    cudnn.benchmark = True
    try:
        assert munet.backends.cudnn.benchmark is True
    finally:
        cudnn.benchmark = False
    assert munet.backends.cuda.is_built() is True  # CuPy is installed in the test environment


def test_the_kernel_table_is_filled_without_cupy_and_refuses_a_second_definition():
    assert {"matmul", "clone", "cast", "copy_", "fill_", "empty", "full", "arange"} <= set(KERNELS)
    with pytest.raises(RuntimeError, match="cuda kernel for 'matmul' registered twice"):
        kernel("matmul")(lambda rt, a, b: None)


class _RecordingRuntime:
    """A runtime whose scope records entries, standing in for a device's."""

    label = "cuda:3"

    def __init__(self):
        self.events = []

    def scope(self):
        rt = self

        class Scope:
            def __enter__(self):
                rt.events.append("enter")

            def __exit__(self, *exc):
                rt.events.append("exit")

        return Scope()


def test_bound_kernels_run_in_their_devices_scope_and_a_missing_one_is_a_device_error(monkeypatch):
    rt = _RecordingRuntime()
    monkeypatch.setitem(KERNELS, "test_probe_op", lambda runtime, x, *, k: (runtime.events.append("run"), x * k)[1])
    kernels = BoundKernels(KERNELS, _bind, rt)
    assert kernels["test_probe_op"](3, k=2) == 6
    assert rt.events == ["enter", "run", "exit"]
    backend = types.SimpleNamespace(kernels=kernels, device=munet.device("cuda", 3))
    from munet.ops._registry import _kernel

    op = types.SimpleNamespace(name="test_absent_op")
    assert "test_absent_op" not in kernels and kernels.get("test_absent_op") is None
    with pytest.raises(munet.DeviceError, match="test_absent_op: no kernel for device 'cuda:3'"):
        _kernel(op, backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.bool_])
def test_bfloat16_bits_round_as_ml_dtypes(dtype):
    rng = np.random.default_rng(0)
    values = rng.standard_normal(4096).astype(np.float64) * 10.0 ** rng.integers(-40, 40, 4096)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.3895313892515355e38]
    with np.errstate(all="ignore"):  # values past a dtype's range become inf (or an int's garbage): fine
        x = np.concatenate([values, specials]).astype(dtype) if dtype is not np.bool_ else values > 0
        bits = copies.cast(np, x, munet.bfloat16)
        wide = x.astype(np.float32)
    assert bits.dtype == np.uint16 and copies.dtype_of(bits) is munet.bfloat16
    expected = wide.astype(ml_dtypes.bfloat16).view(np.uint16)
    nan = np.isnan(wide)
    np.testing.assert_array_equal(bits[~nan], expected[~nan])
    assert (bits[nan] == 0x7FC0).all()
    back = copies.cast(np, bits, munet.float32)
    np.testing.assert_array_equal(back, bits.view(ml_dtypes.bfloat16).astype(np.float32))


def test_casts_follow_the_cpu_rules():
    x = np.array([-2.7, -0.5, 0.0, 0.5, 2.7, np.nan], np.float32)
    assert copies.cast(np, x, munet.bool).tolist() == [True, True, False, True, True, True]
    assert copies.cast(np, x[:5], munet.int32).tolist() == [-2, 0, 0, 0, 2]
    assert copies.scalar_bits(1.5, munet.bfloat16) == 0x3FC0 and copies.scalar_bits(2, munet.int64) == 2
    assert copies.host_dtype(ml_dtypes.bfloat16) == np.uint16 and copies.storage_dtype(munet.float16) == np.float16


def _read_as_cublas(array, transposed: bool, ld: int, batch_stride: int, count: int, rows: int, cols: int):
    """The row-major (count, rows, cols) matrices cuBLAS reads from ``array``'s memory."""
    item = array.itemsize
    strides = (batch_stride * item, item, ld * item) if transposed else (batch_stride * item, ld * item, item)
    return np.lib.stride_tricks.as_strided(array, shape=(count, rows, cols), strides=strides)


def _layouts(rng, shape):
    """``shape``-shaped arrays in several layouts: contiguous, transposed, strided, broadcast."""
    base = rng.standard_normal(shape).astype(np.float32)
    out = [base, np.asfortranarray(base)]
    if len(shape) >= 2:
        out.append(np.swapaxes(np.swapaxes(base, -1, -2).copy(), -1, -2))  # column-major matrices
        padded = rng.standard_normal(shape[:-1] + (shape[-1] + 3,)).astype(np.float32)
        out.append(padded[..., : shape[-1]])  # row pitch larger than the row
        out.append(np.broadcast_to(base[..., :1, :], shape))  # rows of stride 0: must be copied
    return out


@pytest.mark.parametrize(
    "a_shape,b_shape",
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 5)),
        ((3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (1, 3, 4, 2)),
        ((1, 4), (4, 1)),
        ((5, 1), (1, 3)),
        ((2, 3, 1), (2, 1, 4)),
    ],
)
def test_gemm_arguments_make_cublas_compute_a_times_b(a_shape, b_shape):
    """What cuBLAS reads through the computed arguments, multiplied as its column-major GEMM is,
    gives ``a @ b`` for every layout; the leading dimensions satisfy cuBLAS's rules."""
    rng = np.random.default_rng(1)
    for a in _layouts(rng, a_shape):
        for b in _layouts(rng, b_shape):
            expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
            out = np.empty(expected.shape, np.float32)
            g = gemm_arguments(np, a, b, out)
            assert (g.m, g.n, g.k) == (b_shape[-1], a_shape[-2], a_shape[-1])
            assert g.lda >= max(1, g.k if g.transa else g.m) and g.ldb >= max(1, g.n if g.transb else g.k)
            # cuBLAS's A is op(A) (m x k, column-major) = b^T; its B is op(B) (k x n) = a^T
            bt = _read_as_cublas(g.A, g.transa, g.lda, g.stride_a, g.batch_count, b_shape[-2], b_shape[-1])
            at = _read_as_cublas(g.B, g.transb, g.ldb, g.stride_b, g.batch_count, a_shape[-2], a_shape[-1])
            c_t = np.matmul(bt.transpose(0, 2, 1).astype(np.float64), at.transpose(0, 2, 1).astype(np.float64))
            assert g.ldc == g.m and g.stride_c == g.m * g.n
            np.testing.assert_allclose(c_t.transpose(0, 2, 1).reshape(expected.shape), expected, rtol=1e-12)


def test_blas_operand_reads_views_in_place():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    _, transposed, ld, stride = blas_operand(np, x, (2,), 3, 4)
    assert (transposed, ld, stride) == (False, 4, 12)
    xt = np.swapaxes(np.arange(24, dtype=np.float32).reshape(2, 4, 3), 1, 2)
    array, transposed, ld, stride = blas_operand(np, xt, (2,), 3, 4)
    assert (transposed, ld, stride) == (True, 3, 12) and np.shares_memory(array, xt)
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    array, transposed, ld, stride = blas_operand(np, w, (5,), 3, 4)
    assert (transposed, ld, stride) == (False, 4, 0) and np.shares_memory(array, w)


def test_the_benchmark_fails_clearly_without_a_gpu():
    import os
    import pathlib
    import subprocess

    if munet.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU: scripts/gpu_check.sh runs the benchmark")
    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "cuda_bench.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "benchmarks/cuda_bench.py: no CUDA GPU to benchmark: no CUDA device or driver was found" in done.stderr
