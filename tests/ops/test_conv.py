"""munet/ops/conv.py: conv1d/2d/3d and conv_transpose1d/2d/3d against PyTorch (forward and
gradients of input, weight and bias), double backward by finite differences, errors."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from munet.backends.cpu import kernels_conv
from tests.reference import check, gradcheck, noncontiguous, randn

F64 = "float64"
pytestmark = pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")


def _conv_case(n, x_shape, w_shape, bias=True, dtype=F64, **kw):
    fn_m = getattr(F, f"conv{n}d")
    fn_t = getattr(TF, f"conv{n}d")
    x = randn(*x_shape, dtype=dtype, seed=1)
    w = randn(*w_shape, dtype=dtype, seed=2)
    if bias:
        b = randn(w_shape[0], dtype=dtype, seed=3)
        check(lambda x, w, b: fn_m(x, w, b, **kw), lambda x, w, b: fn_t(x, w, b, **kw), x, w, b)
    else:
        check(lambda x, w: fn_m(x, w, **kw), lambda x, w: fn_t(x, w, **kw), x, w)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"stride": 2},
        {"stride": (2, 1), "padding": (1, 2)},
        {"padding": 2, "dilation": 2},
        {"stride": 3, "padding": 1, "dilation": (2, 1)},
        {"groups": 2},
        {"groups": 2, "stride": 2, "padding": 1, "dilation": 2},
        {"padding": "valid"},
        {"padding": "same"},
        {"padding": "same", "dilation": 2},
    ],
)
def test_conv2d_options(kw):
    _conv_case(2, (2, 4, 9, 8), (6, 4 // kw.get("groups", 1), 3, 3), **kw)


@pytest.mark.parametrize("kernel, dilation", [((4, 2), 1), ((2, 3), (1, 3)), ((4, 4), 2), ((1, 1), 1)])
def test_conv2d_same_even_kernels(kernel, dilation):
    # Even effective kernels pad one more on the right/bottom, like PyTorch.
    _conv_case(2, (2, 3, 7, 6), (4, 3) + kernel, padding="same", dilation=dilation)


def test_conv2d_depthwise_and_pointwise():
    _conv_case(2, (2, 6, 7, 7), (12, 1, 3, 3), groups=6, padding=1)
    _conv_case(2, (2, 6, 5, 5), (6, 1, 3, 3), groups=6, stride=2)
    _conv_case(2, (3, 5, 4, 4), (7, 5, 1, 1))
    # images side by side in one GEMM, as many as the columns have rows (average pooling's planes)
    _conv_case(2, (4, 1, 4, 4), (1, 1, 2, 2), stride=2, padding=1)
    # 1x1 with stride 1 and no padding: one GEMM over the input planes (no columns), any rank
    _conv_case(2, (2, 6, 5, 3), (4, 3, 1, 1), groups=2)
    _conv_case(1, (2, 4, 9), (3, 4, 1))
    _conv_case(3, (1, 2, 3, 4, 5), (3, 2, 1, 1, 1), bias=False)
    x, w = randn(2, 4, 5, 6, seed=4), randn(3, 4, 1, 1, seed=5)
    check(lambda x, w: F.conv2d(x, w), lambda x, w: TF.conv2d(x, w), noncontiguous(x), noncontiguous(w))


def test_conv2d_unbatched_float32_noncontiguous():
    x, w, b = randn(3, 8, 7, seed=1), randn(5, 3, 3, 2, seed=2), randn(5, seed=3)
    check(lambda x, w, b: F.conv2d(x, w, b, padding=1), lambda x, w, b: TF.conv2d(x, w, b, padding=1), x, w, b)
    x4 = randn(2, 3, 8, 7, seed=4)
    check(
        lambda x, w, b: F.conv2d(x, w, b, stride=2),
        lambda x, w, b: TF.conv2d(x, w, b, stride=2),
        noncontiguous(x4),
        noncontiguous(w),
        b,
    )
    check(
        lambda x, w: munet.conv2d(x.transpose(2, 3), w),
        lambda x, w: torch.conv2d(x.transpose(2, 3), w),
        x4,
        w,
    )


def test_conv_low_precision_forward():
    for dtype in ("float16", "bfloat16"):
        x, w = randn(2, 3, 6, 6, dtype=dtype, seed=1), randn(4, 3, 3, 3, dtype=dtype, seed=2)
        check(
            lambda x, w: F.conv2d(x, w, padding=1),
            lambda x, w: TF.conv2d(x.float(), w.float(), padding=1).to(x.dtype),
            x,
            w,
            grad=False,
            atol=3e-2,
            rtol=3e-2,
        )


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"stride": 2, "padding": 1},
        {"dilation": 3, "padding": "same"},
        {"groups": 3, "stride": 2},
        {"padding": "same"},
    ],
)
def test_conv1d(kw):
    k = 4 if kw.get("padding") == "same" else 3
    _conv_case(1, (2, 6, 11), (3, 6 // kw.get("groups", 1), k), **kw)


def test_conv1d_unbatched():
    _conv_case(1, (4, 9), (2, 4, 3), padding=1)


@pytest.mark.parametrize(
    "kw", [{}, {"stride": (1, 2, 1), "padding": 1}, {"groups": 2, "dilation": 2}, {"padding": "same"}]
)
def test_conv3d(kw):
    _conv_case(3, (1, 4, 5, 6, 5), (2, 4 // kw.get("groups", 1), 2, 3, 2), **kw)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"stride": 2},
        {"stride": 2, "padding": 1, "output_padding": 1},
        {"stride": (2, 3), "padding": (0, 1), "output_padding": (1, 2)},
        {"dilation": 2, "padding": 1},
        {"groups": 2, "stride": 2},
        {"groups": 2, "stride": (3, 2), "padding": 1, "output_padding": (2, 1), "dilation": 2},
        {"dilation": 3, "output_padding": 2, "stride": 1},
    ],
)
def test_conv_transpose2d(kw):
    g = kw.get("groups", 1)
    x = randn(2, 4, 4, 5, dtype=F64, seed=1)
    w = randn(4, 6 // g, 3, 2, dtype=F64, seed=2)
    b = randn(6, dtype=F64, seed=3)
    check(
        lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), lambda x, w, b: TF.conv_transpose2d(x, w, b, **kw), x, w, b
    )


def test_conv_transpose_1d_3d_unbatched():
    check(
        lambda x, w: F.conv_transpose1d(x, w, stride=3, padding=2, output_padding=1),
        lambda x, w: TF.conv_transpose1d(x, w, stride=3, padding=2, output_padding=1),
        randn(2, 3, 5, dtype=F64),
        randn(3, 2, 4, dtype=F64, seed=2),
    )
    check(
        lambda x, w: F.conv_transpose1d(x, w, stride=2),
        lambda x, w: TF.conv_transpose1d(x, w, stride=2),
        randn(3, 5, dtype=F64),
        randn(3, 2, 3, dtype=F64, seed=2),
    )
    check(
        lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2, padding=(1, 0, 1), groups=2),
        lambda x, w, b: TF.conv_transpose3d(x, w, b, stride=2, padding=(1, 0, 1), groups=2),
        randn(1, 4, 3, 2, 3, dtype=F64),
        randn(4, 1, 2, 3, 2, dtype=F64, seed=2),
        randn(2, dtype=F64, seed=3),
    )


def test_conv_transpose_float32_noncontiguous():
    x, w = noncontiguous(randn(2, 3, 5, 5)), noncontiguous(randn(3, 4, 3, 3, seed=2))
    check(
        lambda x, w: munet.conv_transpose2d(x, w, stride=2, padding=1),
        lambda x, w: torch.conv_transpose2d(x, w, stride=2, padding=1),
        x,
        w,
    )


def test_size_zero_batch():
    check(
        lambda x, w: F.conv2d(x, w),
        lambda x, w: TF.conv2d(x, w),
        randn(0, 2, 5, 5, dtype=F64),
        randn(3, 2, 3, 3, dtype=F64),
    )


@pytest.mark.parametrize("transposed", [False, True])
def test_double_backward(transposed):
    # Gradients of the gradients: grad_input and grad_weight are convolutions themselves.
    kw = {"stride": 2, "padding": 1, "groups": 2, "dilation": (1, 2)}
    if transposed:
        kw["output_padding"] = 1

    def make(conv, grad):
        def fn(x, w):
            out = conv(x, w, **kw)
            gx, gw = grad((out * out).sum(), (x, w), create_graph=True)
            return gx.sum(1) * 3 + gw.sum()

        return fn

    m_conv, t_conv = (F.conv_transpose2d, TF.conv_transpose2d) if transposed else (F.conv2d, TF.conv2d)
    x = randn(2, 4, 5, 6, dtype=F64, seed=1)
    w = randn(4, 2, 3, 2, dtype=F64, seed=2)
    check(make(m_conv, munet.autograd.grad), make(t_conv, torch.autograd.grad), x, w)


def test_gradcheck_finite_differences():
    gradcheck(
        lambda x, w: F.conv2d(x, w, stride=(2, 1), padding="valid", dilation=2),
        randn(1, 2, 7, 6, dtype=F64, seed=1),
        randn(3, 2, 2, 3, dtype=F64, seed=2),
    )


def test_mnist_cnn_layers_float32():
    # The shapes of a small MNIST CNN (also benchmarked against PyTorch), two layers chained.
    def net(conv):
        return lambda x, w1, b1, w2, b2: conv(conv(x, w1, b1), w2, b2)

    check(
        net(F.conv2d),
        net(TF.conv2d),
        randn(4, 1, 12, 12),
        randn(8, 1, 3, 3, seed=2),
        randn(8, seed=3),
        randn(6, 8, 3, 3, seed=4),
        randn(6, seed=5),
        float64_reference=True,
    )


@pytest.fixture(params=["whole", "one_per_block"])
def conv_blocks(request, monkeypatch):
    """The cpu kernel works in blocks of images (or channels) of about CHUNK_BYTES; at 1 byte
    every block holds a single one, so the block loops and their edges are exercised too."""
    if request.param == "one_per_block":
        monkeypatch.setattr(kernels_conv, "CHUNK_BYTES", 1)


BLOCK_CASES = [
    # stride 1: whole-row paths (forward, weight gradient over rows, col2im over rows)
    (2, (3, 4, 9, 8), (6, 4, 3, 3), {}),
    (2, (3, 4, 9, 8), (6, 2, 3, 2), {"groups": 2, "padding": (2, 1), "dilation": (2, 1)}),
    (2, (3, 4, 7, 7), (5, 4, 5, 4), {}),  # output smaller than the kernel in the forward itself
    (2, (3, 1, 9, 8), (16, 1, 3, 3), {}),  # fewer columns than output channels: windows, not rows
    (3, (2, 2, 5, 6, 5), (3, 2, 2, 3, 2), {"padding": 1}),
    (1, (3, 2, 12), (4, 2, 5), {"dilation": 2, "padding": 3}),
    # strided: window paths and the strided col2im
    (2, (3, 4, 9, 8), (6, 4, 3, 3), {"stride": 2, "padding": 1}),
    (2, (3, 4, 9, 8), (4, 1, 3, 3), {"groups": 4, "stride": (2, 1), "dilation": 2}),
    (2, (2, 3, 8, 8), (4, 3, 5, 5), {"stride": 3}),
    (3, (2, 2, 5, 6, 5), (2, 1, 2, 2, 2), {"groups": 2, "stride": (1, 2, 2)}),
]


@pytest.mark.parametrize("n, x_shape, w_shape, kw", BLOCK_CASES)
def test_conv_blocked_paths(conv_blocks, n, x_shape, w_shape, kw):
    # Forward and both gradients (the input gradient is a transposed convolution, the weight
    # gradient one whose output is smaller than its kernel), contiguous and strided inputs.
    _conv_case(n, x_shape, w_shape, **kw)
    fn_m, fn_t = getattr(F, f"conv{n}d"), getattr(TF, f"conv{n}d")
    x, w = noncontiguous(randn(*x_shape, dtype=F64, seed=4)), noncontiguous(randn(*w_shape, dtype=F64, seed=5))
    check(lambda x, w: fn_m(x, w, **kw), lambda x, w: fn_t(x, w, **kw), x, w)


def test_weight_gradient_with_a_smaller_last_block(monkeypatch):
    # x (3, 4, 9, 8), w (6, 4, 3, 3): the weight gradient contracts over 3 images as channels,
    # 18144 bytes of float64 columns each; 40000 bytes per block: blocks of 2 and 1 image
    # (the spread kernel buffer of the first block is reused, its zeros kept, by the second)
    monkeypatch.setattr(kernels_conv, "CHUNK_BYTES", 40000)
    _conv_case(2, (3, 4, 9, 8), (6, 4, 3, 3))


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"padding": 1},
        {"padding": (2, 0), "output_padding": (1, 0), "dilation": (2, 1)},
        {"groups": 2, "dilation": 2, "padding": 1},
        {"stride": 2, "padding": 1, "output_padding": 1},
    ],
)
def test_conv_transpose_blocked_paths(conv_blocks, kw):
    g = kw.get("groups", 1)
    x = randn(3, 4, 5, 4, dtype=F64, seed=1)
    w = randn(4, 6 // g, 3, 2, dtype=F64, seed=2)
    check(lambda x, w: F.conv_transpose2d(x, w, **kw), lambda x, w: TF.conv_transpose2d(x, w, **kw), x, w)
    check(
        lambda x, w: F.conv_transpose3d(x, w, stride=1, padding=1),
        lambda x, w: TF.conv_transpose3d(x, w, stride=1, padding=1),
        noncontiguous(randn(2, 2, 3, 4, 3, dtype=F64, seed=3)),
        randn(2, 3, 2, 3, 2, dtype=F64, seed=4),
    )


def test_errors():
    x = munet.zeros(2, 3, 8, 8)
    w = munet.zeros(4, 3, 3, 3)
    with pytest.raises(
        RuntimeError, match=r"conv2d: expected input of rank 3 or 4 \(N, C, H, W\), got shape \(3, 32\)"
    ):
        F.conv2d(munet.zeros(3, 32), w)
    with pytest.raises(
        RuntimeError,
        match=r"conv2d: given groups=1, weight of size \[4, 3, 3, 3\], expected input\[2, 2, 8, 8\] to have 3 channels, but got 2 channels",
    ):
        F.conv2d(munet.zeros(2, 2, 8, 8), w)
    with pytest.raises(RuntimeError, match=r"conv2d: given groups=2, .* to have 6 channels, but got 3"):
        F.conv2d(x, w, groups=2)
    with pytest.raises(RuntimeError, match="conv2d: padding='same' is not supported for strided convolutions"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(ValueError, match="conv2d: invalid padding string 'full'"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        F.conv2d(munet.zeros(1, 3, 2, 2), w)
    with pytest.raises(RuntimeError, match=r"conv2d: expected bias of shape \(4,\), got shape \(3,\)"):
        F.conv2d(x, w, munet.zeros(3))
    with pytest.raises(
        RuntimeError, match="conv2d: expected input and weight to have the same dtype, got float32 and float64"
    ):
        F.conv2d(x, w.double())
    with pytest.raises(RuntimeError, match="conv1d: expected input of rank 2 or 3"):
        F.conv1d(x, w)
    with pytest.raises(
        RuntimeError, match="conv_transpose2d: output padding must be smaller than either stride or dilation"
    ):
        F.conv_transpose2d(munet.zeros(1, 4, 3, 3), w, output_padding=1)
    with pytest.raises(
        RuntimeError,
        match=r"conv_transpose2d: given transposed=1, weight of size \[4, 3, 3, 3\], expected input\[1, 3, 3, 3\] to have 4 channels",
    ):
        F.conv_transpose2d(munet.zeros(1, 3, 3, 3), w)
    with pytest.raises(RuntimeError, match="conv2d: expected a floating point input, got int64"):
        F.conv2d(munet.zeros(2, 3, 8, 8, dtype=munet.int64), w)


def test_matches_torch_convolution_signature():
    x, w = randn(1, 2, 6, 6, dtype=F64), randn(3, 2, 3, 3, dtype=F64, seed=2)
    out = munet.convolution(munet.tensor(x), munet.tensor(w), None, (2, 2), (1, 1), (1, 1), False, (0, 0), 1)
    ref = torch.convolution(torch.tensor(x), torch.tensor(w), None, (2, 2), (1, 1), (1, 1), False, (0, 0), 1)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10)
