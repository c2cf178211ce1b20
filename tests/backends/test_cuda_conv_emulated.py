"""``convolution`` on the fake cuda devices: the direct CUDA C kernel (``kernels_conv.py``), compiled
by NVRTC and run by the CPU emulation through the whole eager path, against the cpu backend's
convolution (forward and gradients, which are convolutions again). ``test_cuda_gpu_kernels.py``
has the GPU's run."""

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from tests.backends import fake_cupy
from tests.backends.cuda_cases import compiled_sgd_twins

fake_cupy.skip_without_emulation()
pytestmark = pytest.mark.usefixtures("fake_gpus")


def _pair(shape, seed, dtype="float32"):
    x = munet.tensor(np.random.default_rng(seed).standard_normal(shape)).to(getattr(munet, dtype))
    return x, x.cuda()


def _close(got, want, tol=1e-5):
    np.testing.assert_allclose(got.detach().cpu().float().numpy(), want.detach().float().numpy(), rtol=tol, atol=tol)


CASES = {
    "conv1d": (F.conv1d, (2, 4, 9), (6, 2, 3), {"stride": 2, "padding": 1, "groups": 2}),
    "conv2d": (F.conv2d, (2, 3, 7, 6), (4, 3, 3, 2), {"padding": (1, 0), "dilation": (2, 1)}),
    "conv3d": (F.conv3d, (1, 2, 4, 5, 3), (3, 2, 2, 3, 1), {"stride": (1, 2, 1)}),
    "transposed2d": (F.conv_transpose2d, (2, 4, 4, 5), (4, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    "transposed1d": (F.conv_transpose1d, (1, 4, 6), (4, 1, 3), {"groups": 2, "dilation": 2}),
}


@pytest.mark.parametrize("case", CASES)
def test_convolutions_match_the_cpu_forward_and_backward(case):
    fn, x_shape, w_shape, kwargs = CASES[case]
    (x, xc), (w, wc) = _pair(x_shape, 1), _pair(w_shape, 2)
    for t in (x, xc, w, wc):
        t.requires_grad_()
    got, want = fn(xc, wc, **kwargs), fn(x, w, **kwargs)
    assert got.is_cuda
    _close(got, want)
    (got * got).sum().backward()
    (want * want).sum().backward()
    _close(xc.grad, x.grad, 1e-4)
    _close(wc.grad, w.grad, 1e-4)


def test_strided_views_bias_and_other_dtypes():
    (x, xc), (w, wc) = _pair((3, 2, 8, 5), 3), _pair((4, 2, 3, 3), 4)
    bias, bias_c = _pair((4,), 5)
    view, view_c = x.transpose(2, 3), xc.transpose(2, 3)  # read through its strides
    _close(F.conv2d(view_c, wc, bias_c, padding=1), F.conv2d(view, w, bias, padding=1))
    for dtype, tol in (("float64", 1e-12), ("float16", 2e-2), ("bfloat16", 1e-1)):
        (a, ac), (b, bc) = _pair((1, 2, 5, 5), 6, dtype), _pair((3, 2, 3, 3), 7, dtype)
        got = F.conv2d(ac, bc)
        assert got.dtype is a.dtype
        _close(got, F.conv2d(a.double(), b.double()).to(a.dtype), tol)


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
