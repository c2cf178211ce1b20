"""``convolution`` on the fake cuda devices: both CUDA C kernels (the implicit GEMM,
``kernels_conv_gemm.py``, and the direct one, ``kernels_conv_direct.py``), compiled by NVRTC and run
by the CPU emulation through the whole eager path (kernel table, dispatch, launcher), forward and
gradients (convolutions again), against PyTorch in float64 within the summation bound
(``cuda_cases.assert_within_sum_bound``). ``test_cuda_conv_gemm_emulated.py`` runs every GEMM variant
on its own; ``test_cuda_gpu.py`` has the GPU's run."""

import math
import warnings

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet.backends.cuda import kernels_conv
from tests.backends import fake_cupy
from tests.backends.cuda_cases import assert_within_sum_bound, compiled_sgd_twins, np_dtype

torch = pytest.importorskip("torch")
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
    """Every convolution of the test runs on this kernel (``kernels_conv.MIN_FILL`` forces the choice)."""
    monkeypatch.setattr(kernels_conv, "MIN_FILL", 0.0 if request.param == "gemm" else 2.0)
    return request.param


# function name (F and torch.nn.functional), x shape, w shape, keyword arguments
CASES = {
    "conv1d stride, groups": ("conv1d", (2, 4, 9), (6, 2, 3), {"stride": 2, "padding": 1, "groups": 2}),
    "conv2d dilation": ("conv2d", (2, 3, 7, 6), (4, 3, 3, 2), {"padding": (1, 0), "dilation": (2, 1)}),
    "conv2d tile remainders": ("conv2d", (2, 9, 9, 8), (70, 9, 3, 3), {"padding": 1}),
    "conv2d ResNet-like channels": ("conv2d", (2, 24, 6, 6), (32, 24, 3, 3), {"padding": 1}),
    "conv2d 'same' with an even kernel (per-side padding)": ("conv2d", (1, 5, 6, 7), (9, 5, 4, 2), {"padding": "same"}),
    "conv2d depthwise, batch 1": ("conv2d", (1, 4, 6, 5), (8, 1, 3, 3), {"padding": 1, "groups": 4}),
    "conv2d single channels": ("conv2d", (3, 1, 5, 4), (1, 1, 2, 2), {}),
    "conv3d": ("conv3d", (1, 2, 4, 5, 3), (3, 2, 2, 3, 1), {"stride": (1, 2, 1)}),
    "transposed2d": ("conv_transpose2d", (2, 4, 4, 5), (4, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    "transposed1d": ("conv_transpose1d", (1, 4, 6), (4, 1, 3), {"groups": 2, "dilation": 2}),
    "transposed3d": ("conv_transpose3d", (1, 3, 2, 3, 2), (3, 5, 2, 2, 2), {"stride": (1, 2, 1)}),
}
DTYPE_CASES = ("conv1d stride, groups", "conv2d tile remainders", "conv3d", "transposed2d")


def _terms(fn: str, x_shape, w_shape, out_shape, groups: int) -> dict:
    """The most products any element of the output and of each gradient sums."""
    window = math.prod(w_shape[2:])
    transposed = fn.startswith("conv_transpose")
    cg = x_shape[1] // groups
    og = w_shape[1] if transposed else w_shape[0] // groups
    pixels = max(math.prod(x_shape[2:]), math.prod(out_shape[2:]))
    return {"output": cg * window, "x.grad": og * window, "w.grad": x_shape[0] * pixels}


def _torch_run(fn, x, w, g, kwargs) -> dict:
    tx, tw = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w))
    with warnings.catch_warnings():  # padding="same" with an even kernel: torch warns that it pads a copy
        warnings.simplefilter("ignore", UserWarning)
        out = getattr(torch.nn.functional, fn)(tx, tw, **kwargs)
    out.backward(torch.tensor(g, dtype=torch.float64))
    return {"output": out.detach().numpy(), "x.grad": tx.grad.numpy(), "w.grad": tw.grad.numpy()}


def _check(case, dtype, layout="plain"):
    fn, x_shape, w_shape, kwargs = CASES[case]
    rng = np.random.default_rng(len(case))
    x, w = (rng.standard_normal(s).astype(np_dtype(dtype)) for s in (x_shape, w_shape))
    xc = munet.tensor(x).cuda()
    if layout == "strided":  # the input read through a transposed view's strides
        xc = munet.tensor(np.ascontiguousarray(np.swapaxes(x, 0, 1))).cuda().transpose(0, 1)
    wc = munet.tensor(w).cuda()
    xc.requires_grad_(), wc.requires_grad_()
    fake_cupy.LAUNCHES.clear()
    out = getattr(F, fn)(xc, wc, **kwargs)
    assert out.is_cuda and out.dtype.name == dtype
    g = rng.standard_normal(tuple(out.shape)).astype(np_dtype(dtype))
    out.backward(munet.tensor(g).cuda())
    got = {"output": out, "x.grad": xc.grad, "w.grad": wc.grad}
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    reference = _torch_run(fn, x64, w64, g64, kwargs)
    magnitude = _torch_run(fn, np.abs(x64), np.abs(w64), np.abs(g64), kwargs)
    terms = _terms(fn, x_shape, w_shape, out.shape, kwargs.get("groups", 1))
    for what, t in got.items():
        value = t.detach().cpu().float().numpy() if dtype == "bfloat16" else t.detach().cpu().numpy()
        assert_within_sum_bound(value, reference[what], magnitude[what], terms[what], dtype, f"{case}: {what}")
    return _launched()


@pytest.mark.parametrize("case", CASES)
def test_convolutions_and_gradients_match_torch(case, kernel):
    launched = _check(case, "float32")
    assert launched and all(("_gemm_" in name) == (kernel == "gemm") for name in launched), launched


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", DTYPE_CASES)
def test_other_dtypes_on_the_gemm(case, dtype, monkeypatch):
    monkeypatch.setattr(kernels_conv, "MIN_FILL", 0.0)
    assert all("_gemm_" in name for name in _check(case, dtype))


def test_a_strided_input_and_the_dispatch_without_forcing():
    # ResNet-like channels: the GEMM for the forward and both gradients; depthwise: the direct kernel
    assert all("_gemm_" in n for n in _check("conv2d ResNet-like channels", "float32", layout="strided"))
    assert {n for n in _check("conv2d depthwise, batch 1", "float32") if "_gemm_" in n} == set()


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
