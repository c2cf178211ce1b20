"""``convolution`` on the fake cuda devices: both CUDA C kernels (the implicit GEMM,
``kernels_conv_gemm.py``, and the direct one, ``kernels_conv_direct.py``), compiled by NVRTC and run
by the CPU emulation through the whole eager path (kernel table, dispatch, launcher), forward and
gradients (convolutions again), against PyTorch in float64 within the summation bound
(``cuda_cases.assert_within_sum_bound``). ``test_cuda_conv_gemm_emulated.py`` runs every GEMM variant
on its own; ``test_cuda_gpu.py`` has the GPU's run."""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from tests.backends import fake_cupy
from tests.backends.cuda_cases import (
    CONV_DTYPE_CASES,
    CONV_EAGER_CASES,
    check_convolution,
    compiled_sgd_twins,
    force_conv_kernel,
)

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")


def _pair(shape, seed, dtype="float32"):
    x = munet.tensor(np.random.default_rng(seed).standard_normal(shape)).to(getattr(munet, dtype))
    return x, x.cuda()


def _close(got, want, tol=1e-5):
    np.testing.assert_allclose(got.detach().cpu().float().numpy(), want.detach().float().numpy(), rtol=tol, atol=tol)


def _launched() -> set:
    return {name for name, _, _ in fake_cupy.LAUNCHES if name.startswith("munet_conv")}


@pytest.fixture(params=["gemm", "direct"])
def kernel(request, monkeypatch):
    """Every convolution of the test runs on this kernel."""
    force_conv_kernel(monkeypatch, request.param)
    return request.param


def _check(case, dtype, layout="plain") -> set:
    """``check_convolution`` on the fake cuda:0; the convolution kernels it launched."""
    fake_cupy.LAUNCHES.clear()
    check_convolution(case, dtype, layout)
    return _launched()


@pytest.mark.parametrize("case", CONV_EAGER_CASES)
def test_convolutions_and_gradients_match_torch(case, kernel):
    launched = _check(case, "float32")
    assert launched and all(("_gemm_" in name) == (kernel == "gemm") for name in launched), launched


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", CONV_DTYPE_CASES)
def test_other_dtypes_on_the_gemm(case, dtype, monkeypatch):
    force_conv_kernel(monkeypatch, "gemm")
    assert all("_gemm_" in name for name in _check(case, dtype))


def test_a_strided_input_and_the_dispatch_without_forcing():
    # ResNet-like channels: the GEMM for the forward and both gradients; depthwise: the direct kernel
    assert all("_gemm_" in n for n in _check("conv2d ResNet-like channels", "float32", layout="strided"))
    assert {n for n in _check("conv2d depthwise, batch 1", "float32") if "_gemm_" in n} == set()
    # the weight gradient's 512-term reduction over 2 tiles is split (kernels_conv_gemm.splits_for)
    assert "munet_conv_gemm_split_sum_float32" in _check("conv2d a long weight-gradient reduction", "float32")


def test_bias_through_a_strided_view():
    (x, xc), (w, wc) = _pair((3, 2, 8, 5), 3), _pair((4, 2, 3, 3), 4)
    bias, bias_c = _pair((4,), 5)
    view, view_c = x.transpose(2, 3), xc.transpose(2, 3)  # read through its strides
    _close(F.conv2d(view_c, wc, bias_c, padding=1), F.conv2d(view, w, bias, padding=1))


def test_empty_and_zero_sized_convolutions():
    (x, xc), (w, wc) = _pair((0, 2, 5, 5), 8), _pair((3, 2, 3, 3), 9)
    assert F.conv2d(xc, wc).shape == F.conv2d(x, w).shape == (0, 3, 3, 3)


def test_a_compiled_cnn_step_replays_as_a_graph():
    munet.manual_seed(0)

    def net():
        return munet.nn.Sequential(
            munet.nn.Conv2d(1, 4, 3, padding=1), munet.nn.ReLU(), munet.nn.Flatten(), munet.nn.Linear(4 * 6 * 6, 3)
        )

    compiled, eager, model, reference = compiled_sgd_twins(net, F.mse_loss, 0.05)
    for call in range(4):
        x, _ = _pair((2, 1, 6, 6), 10 + call)
        y, _ = _pair((2, 3), 20 + call)
        _close(compiled(x.cuda(), y.cuda()), eager(x, y), 1e-4)
    assert compiled.stats()["cuda_graphs"] is True, compiled.stats()["cuda_graph"]
    for p, q in zip(model.parameters(), reference.parameters()):
        _close(p, q, 1e-4)
