"""``munet.backends`` flag namespaces against PyTorch: ``cpu.get_cpu_capability``, ``mkl``, ``openmp``,
``mps``'s macOS checks, and ``cuda``'s attention switches, which share their state with
``nn.attention.sdpa_kernel`` and decide whether ``scaled_dot_product_attention`` may run."""

import platform
import warnings

import pytest
import torch

import munet
import munet.nn.functional as F
from munet.backends import cuda as flags
from munet.nn.attention import SDPBackend, sdpa_kernel
from tests.reference import assert_close, randn


def test_cpu_capability_matches_torch():
    assert munet.backends.cpu.get_cpu_capability() == torch.backends.cpu.get_cpu_capability()


def test_mkl_and_openmp():
    assert munet.backends.mkl.VERBOSE_ON == torch.backends.mkl.VERBOSE_ON
    assert munet.backends.mkl.VERBOSE_OFF == torch.backends.mkl.VERBOSE_OFF
    assert munet.backends.mkl.is_available() is munet.has_mkl
    with munet.backends.mkl.verbose(munet.backends.mkl.VERBOSE_OFF):
        pass
    if not munet.backends.mkl.is_available():
        with pytest.raises(RuntimeError, match="not oneMKL"):
            with munet.backends.mkl.verbose(munet.backends.mkl.VERBOSE_ON):
                pass
    from munet.compiler.codegen.build import find_compiler

    found = find_compiler()
    assert munet.backends.openmp.is_available() is (found is not None and "-fopenmp" in found[2])


def test_mps_macos_checks():
    on_mac = bool(platform.mac_ver()[0])
    assert munet.backends.mps.is_macos_or_newer(10, 0) is on_mac
    assert munet.backends.mps.is_macos13_or_newer() is munet.backends.mps.is_macos_or_newer(13, 0)
    assert munet.backends.mps.is_macos_or_newer(99, 0) is False


@pytest.fixture
def restore_sdp():
    yield
    for enable in (
        flags.enable_flash_sdp,
        flags.enable_math_sdp,
        flags.enable_mem_efficient_sdp,
        flags.enable_cudnn_sdp,
    ):
        enable(True)


def _state():
    return (flags.flash_sdp_enabled(), flags.mem_efficient_sdp_enabled(), flags.math_sdp_enabled(),
            flags.cudnn_sdp_enabled())  # fmt: skip


def _torch_state():
    c = torch.backends.cuda
    return (c.flash_sdp_enabled(), c.mem_efficient_sdp_enabled(), c.math_sdp_enabled(), c.cudnn_sdp_enabled())


def test_sdp_switches_match_torch(restore_sdp):
    assert _state() == _torch_state() == (True, True, True, True)
    flags.enable_flash_sdp(False)
    assert _state() == (False, True, True, True)
    for backends in ([SDPBackend.MATH], [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION]):
        torch_backends = [getattr(torch.nn.attention.SDPBackend, b.name) for b in backends]
        with sdpa_kernel(backends), torch.nn.attention.sdpa_kernel(torch_backends):
            assert _state() == _torch_state()
    assert _state() == (False, True, True, True)
    with pytest.raises(TypeError, match="expected a bool"):
        flags.enable_math_sdp(1)


def test_sdpa_runs_while_a_backend_is_allowed_and_raises_without(restore_sdp):
    q, k, v = (munet.tensor(randn(2, 3, 4, seed=i)) for i in range(3))
    tq, tk, tv = (torch.tensor(randn(2, 3, 4, seed=i)) for i in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
    flags.enable_math_sdp(False)
    flags.enable_flash_sdp(False)
    assert_close(F.scaled_dot_product_attention(q, k, v), expected, rtol=1e-5, atol=1e-6)
    flags.enable_mem_efficient_sdp(False)
    flags.enable_cudnn_sdp(False)
    with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product_attention"):
        F.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel(SDPBackend.MATH):
        assert_close(F.scaled_dot_product_attention(q, k, v), expected, rtol=1e-5, atol=1e-6)
    for backends in ([], [SDPBackend.OVERRIDEABLE]):
        with sdpa_kernel(SDPBackend.MATH), sdpa_kernel(backends):
            with pytest.raises(RuntimeError, match="No viable backend"):
                F.scaled_dot_product_attention(q, k, v)


def test_deprecated_sdp_kernel(restore_sdp):
    with pytest.warns(FutureWarning, match="deprecated"):
        with flags.sdp_kernel(enable_flash=False, enable_mem_efficient=False, enable_cudnn=False):
            assert _state() == (False, False, True, False)
    assert _state() == (True, True, True, True)


def test_fused_kernel_checks_answer_false():
    q = munet.ones(1, 2, 3)
    params = flags.SDPAParams(q, q, q, None, 0.0, False, False)
    for check in (flags.can_use_flash_attention, flags.can_use_efficient_attention, flags.can_use_cudnn_attention):
        assert check(params) is False
        with pytest.warns(UserWarning, match="MuNet has no"):
            check(params, debug=True)
    assert flags.is_flash_attention_available() is False and flags.is_ck_sdpa_available() is False
    assert flags.SDPBackend is SDPBackend
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match="expected SDPAParams"):
            flags.can_use_flash_attention(q)


def test_preferred_libraries():
    from munet.backends.cuda.libraries import BlasBackend, LinalgBackend

    assert flags.preferred_blas_library() is BlasBackend.Cublas
    assert str(torch.backends.cuda.preferred_blas_library()) == "_BlasBackend.Cublas"
    assert flags.preferred_blas_library("cublas") is flags.preferred_blas_library("default") is BlasBackend.Cublas
    with pytest.raises(RuntimeError, match="Cannot set preferred backend to Cublaslt"):
        flags.preferred_blas_library("cublaslt")
    with pytest.raises(RuntimeError, match="unknown backend"):
        flags.preferred_blas_library("fast")
    assert flags.preferred_linalg_library() is LinalgBackend.Default
    assert str(torch.backends.cuda.preferred_linalg_library()) == "_LinalgBackend.Default"
    assert flags.preferred_linalg_library("cusolver") is flags.preferred_linalg_library() is LinalgBackend.Cusolver
    assert flags.preferred_linalg_library("default") is LinalgBackend.Default
    with pytest.raises(RuntimeError, match="Cannot set preferred backend to Magma: .* calls cuSOLVER"):
        flags.preferred_linalg_library("magma")
