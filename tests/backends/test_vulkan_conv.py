"""Convolution, pooling and sampling kernels on vulkan against the cpu backend, forward and
gradients (through ``loss = (f(x) * r).sum()`` with a fixed random ``r``), plus a small CNN
trained on both devices.

Tolerances: the implicit-GEMM convolution sums in a different order than cpu BLAS, so
float32 results agree to rtol/atol 1e-4 (2e-4 for the sums of the weight gradients);
pooling and sampling pick or weight the same elements and agree to 1e-5.
"""

import numpy as np
import pytest

import munet
import munet.nn as nn
import munet.nn.functional as F

TOL = dict(rtol=1e-4, atol=1e-4)
EXACT = dict(rtol=0, atol=0)


def rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape) + sum(shape)).standard_normal(shape).astype(np.float32)


def run(fn, arrays, device, grad=True):
    """``fn(*tensors)`` on ``device``; returns (outputs, gradients of the float inputs) as NumPy."""
    tensors = [munet.tensor(a, device=device, requires_grad=grad and a.dtype == np.float32) for a in arrays]
    out = fn(*tensors)
    outs = out if isinstance(out, tuple) else (out,)
    grads = []
    if grad:
        weight = munet.tensor(rand(*outs[0].shape, seed=7), device=device)
        (outs[0] * weight).sum().backward()
        grads = [t.grad.cpu().numpy() for t in tensors if t.requires_grad]
    return [o.detach().cpu().numpy() for o in outs], grads


def check(fn, *arrays, vulkan, grad=True, tol=TOL, grad_tol=None):
    cpu_out, cpu_grads = run(fn, arrays, "cpu", grad)
    gpu_out, gpu_grads = run(fn, arrays, vulkan, grad)
    for g, c in zip(gpu_out, cpu_out):
        assert g.shape == c.shape and g.dtype == c.dtype
        np.testing.assert_allclose(g, c, equal_nan=True, **tol)
    assert len(gpu_grads) == len(cpu_grads)
    for g, c in zip(gpu_grads, cpu_grads):
        np.testing.assert_allclose(g, c, **(grad_tol or tol))


@pytest.fixture(params=["tiled", "blocked"])
def conv_kernel(request, vulkan, monkeypatch):
    """Run convolution with each of its two kernels: tiled (GPUs) and register-blocked (CPU drivers)."""
    runtime = munet._device.get_backend(vulkan).runtime
    monkeypatch.setattr(runtime, "cpu_driver", request.param == "blocked")
    return vulkan


CONV2D = [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
    dict(padding="same", dilation=2),
    dict(stride=3, groups=6),
]


@pytest.mark.parametrize("kw", CONV2D)
def test_conv2d_forward_and_gradients(conv_kernel, kw):
    vulkan = conv_kernel
    groups = kw.get("groups", 1)
    x, w, b = rand(2, 6, 9, 11), rand(4 if groups != 6 else 6, 6 // groups, 3, 2), rand(4 if groups != 6 else 6)
    check(lambda a, c, d: F.conv2d(a, c, d, **kw), x, w, b, vulkan=vulkan, grad_tol=dict(rtol=2e-4, atol=2e-4))


@pytest.mark.parametrize(
    "kw", [dict(), dict(stride=2, padding=1, output_padding=1), dict(stride=(3, 2), groups=2, dilation=(1, 2))]
)
def test_conv_transpose2d_forward_and_gradients(conv_kernel, kw):
    vulkan = conv_kernel
    x, w, b = rand(2, 4, 5, 7), rand(4, 3, 3, 3), rand(3 * kw.get("groups", 1))
    check(
        lambda a, c, d: F.conv_transpose2d(a, c, d, **kw), x, w, b, vulkan=vulkan, grad_tol=dict(rtol=2e-4, atol=2e-4)
    )


def test_conv1d_conv3d_and_strided_inputs(conv_kernel):
    vulkan = conv_kernel
    check(lambda a, c: F.conv1d(a, c, stride=2, padding=3), rand(3, 5, 70), rand(7, 5, 4), vulkan=vulkan)
    check(lambda a, c: F.conv3d(a, c, padding=1), rand(1, 2, 5, 4, 6), rand(3, 2, 3, 3, 2), vulkan=vulkan)
    check(lambda a, c: F.conv_transpose3d(a, c, stride=2), rand(1, 2, 3, 2, 3), rand(2, 2, 2, 3, 2), vulkan=vulkan)
    # transposed views of input and weight are read through their strides
    check(
        lambda a, c: F.conv2d(a.transpose(2, 3), c.transpose(0, 1)), rand(2, 3, 8, 7), rand(3, 5, 3, 3), vulkan=vulkan
    )
    # 70 output channels x 130 columns: several 64x64 (and 64x128) tiles with ragged edges; K = 75
    check(lambda a, c: F.conv2d(a, c), rand(2, 3, 9, 13), rand(70, 3, 5, 5), vulkan=vulkan, grad=False)
    check(lambda a, c: F.conv2d(a, c), rand(1, 1, 1, 1), rand(1, 1, 1, 1), vulkan=vulkan)
    check(lambda a, c: F.conv2d(a, c), rand(0, 3, 4, 4), rand(2, 3, 3, 3), vulkan=vulkan, grad=False)


def test_max_pool_with_indices_and_gradients(vulkan):
    x = rand(2, 3, 11, 10)
    x[0, 0, :2, :2] = 5.0  # ties: the first index wins
    check(lambda a: F.max_pool2d(a, 3, 2, 1, return_indices=True), x, vulkan=vulkan, tol=EXACT)
    check(lambda a: F.max_pool2d(a, (2, 3), (1, 2), dilation=2, ceil_mode=True), x, vulkan=vulkan)
    check(lambda a: F.max_pool1d(a, 4, 3, return_indices=True), rand(2, 3, 31), vulkan=vulkan)
    check(lambda a: F.max_pool3d(a, 2), rand(1, 2, 5, 4, 6), vulkan=vulkan)
    check(lambda a: F.max_pool2d(a.transpose(2, 3), 2), x, vulkan=vulkan)
    nan = rand(1, 1, 4, 4)
    nan[0, 0, 1, 1] = np.nan
    check(lambda a: F.max_pool2d(a, 2, return_indices=True), nan, vulkan=vulkan, grad=False)


def test_avg_and_adaptive_pools(vulkan):
    x = rand(2, 3, 11, 10)
    check(lambda a: F.avg_pool2d(a, 3, 2, 1), x, vulkan=vulkan)
    check(lambda a: F.avg_pool2d(a, 2, ceil_mode=True, count_include_pad=False), x, vulkan=vulkan)
    check(lambda a: F.adaptive_max_pool2d(a, (4, 3), return_indices=True), x, vulkan=vulkan, tol=EXACT)
    check(lambda a: F.adaptive_max_pool1d(a, 5), rand(2, 3, 17), vulkan=vulkan)
    check(lambda a: F.adaptive_avg_pool2d(a, (3, 4)), x, vulkan=vulkan)
    check(lambda a: F.adaptive_avg_pool2d(a, 1), x, vulkan=vulkan)


@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="nearest"), dict(size=(7, 5), mode="nearest"),
                                dict(size=(13, 17), mode="bilinear"), dict(scale_factor=0.5, mode="bilinear", align_corners=True)])  # fmt: skip
def test_interpolate(vulkan, kw):
    check(lambda a: F.interpolate(a, **kw), rand(2, 3, 6, 9), vulkan=vulkan)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_forward_and_gradients(vulkan, mode, padding_mode, align_corners):
    grid = np.random.default_rng(3).uniform(-1.3, 1.3, (2, 5, 7, 2)).astype(np.float32)
    grid[0, 0, 0] = (0.0, 0.0)  # many samples on one pixel: the gather sums them in a fixed order
    grid[0, 0, 1:] = (0.0, 0.0)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    check(lambda a, g: F.grid_sample(a, g, **kw), rand(2, 3, 6, 9), grid, vulkan=vulkan)


def test_affine_grid_sample_rotation(vulkan):
    theta = np.array([[[0.8, -0.6, 0.1], [0.6, 0.8, -0.2]]], np.float32)
    check(lambda a, t: F.grid_sample(a, F.affine_grid(t, (1, 2, 8, 8), align_corners=False), align_corners=False),
          rand(1, 2, 8, 8), theta, vulkan=vulkan)  # fmt: skip


def _train_cnn(device, batchnorm: bool, steps: int = 3):
    munet.manual_seed(0)
    layers = [nn.Conv2d(1, 4, 3, padding=1)]
    layers += [nn.BatchNorm2d(4)] if batchnorm else []
    layers += [nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3)]
    model = nn.Sequential(*layers).to(device)
    opt = munet.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    x = munet.tensor(rng.standard_normal((8, 1, 8, 8)).astype(np.float32), device=device)
    y = munet.tensor(rng.standard_normal((8, 3)).astype(np.float32), device=device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("batchnorm", [False, True])
def test_cnn_training_matches_cpu(vulkan, batchnorm):
    cpu_losses, cpu_state = _train_cnn("cpu", batchnorm)
    gpu_losses, gpu_state = _train_cnn(vulkan, batchnorm)
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4)
    for name, value in cpu_state.items():
        np.testing.assert_allclose(gpu_state[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
