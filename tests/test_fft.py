"""``munet.fft``, ``stft``/``istft`` and the window functions (``munet/ops/fft.py``, ``spectral.py``,
``windows.py``) against PyTorch.

Transforms run in float64/complex128 with tight tolerances (pocketfft on both sides; the
differences are rounding), and once in float32/complex64 at float32 tolerance. Gradients are of a
random real loss of the result (``tests.reference.check_complex``), covering real-input ``rfft``
and ``irfft``, ``n``/``s`` padding and trimming, every norm, non-contiguous inputs and size-1 dims.
"""

import numpy as np
import pytest
import torch

import munet
from tests.reference import check_complex, crandn, randn

NORMS = (None, "backward", "ortho", "forward")


def _real(*shape, seed=0):
    return randn(*shape, dtype="float64", seed=seed)


C2C = [
    ("fft", lambda m, x, norm: m.fft.fft(x, norm=norm), (3, 5)),
    ("fft_n_pad", lambda m, x, norm: m.fft.fft(x, n=8, dim=0, norm=norm), (3, 5)),
    ("fft_n_trim", lambda m, x, norm: m.fft.fft(x, n=3, norm=norm), (3, 5)),
    ("ifft", lambda m, x, norm: m.fft.ifft(x, norm=norm), (4, 6)),
    ("fft2", lambda m, x, norm: m.fft.fft2(x, norm=norm), (2, 3, 5)),
    ("fft2_s", lambda m, x, norm: m.fft.fft2(x, s=(2, 7), norm=norm), (2, 3, 5)),
    ("ifft2", lambda m, x, norm: m.fft.ifft2(x, dim=(0, 2), norm=norm), (2, 3, 5)),
    ("fftn", lambda m, x, norm: m.fft.fftn(x, norm=norm), (2, 3, 4)),
    ("fftn_s_only", lambda m, x, norm: m.fft.fftn(x, s=(4, -1), norm=norm), (2, 3, 4)),
    ("ifftn_dim", lambda m, x, norm: m.fft.ifftn(x, dim=1, norm=norm), (2, 3, 4)),
    ("hfft", lambda m, x, norm: m.fft.hfft(x, norm=norm), (3, 6)),
    ("hfft_n", lambda m, x, norm: m.fft.hfft(x, n=7, dim=0, norm=norm), (3, 6)),
    ("hfft2", lambda m, x, norm: m.fft.hfft2(x, norm=norm), (3, 4, 5)),
    ("hfftn", lambda m, x, norm: m.fft.hfftn(x, s=(3, 6), norm=norm), (3, 4, 5)),
    ("irfft", lambda m, x, norm: m.fft.irfft(x, norm=norm), (3, 6)),
    ("irfft_odd", lambda m, x, norm: m.fft.irfft(x, n=9, norm=norm), (3, 6)),
    ("irfft_trim", lambda m, x, norm: m.fft.irfft(x, n=4, dim=0, norm=norm), (5, 6)),
    ("irfft2", lambda m, x, norm: m.fft.irfft2(x, norm=norm), (2, 3, 5)),
    ("irfftn", lambda m, x, norm: m.fft.irfftn(x, s=(4, 5), norm=norm), (2, 3, 5)),
    ("irfftn_all", lambda m, x, norm: m.fft.irfftn(x, norm=norm), (2, 3, 5)),
]
R2C = [
    ("rfft", lambda m, x, norm: m.fft.rfft(x, norm=norm), (3, 6)),
    ("rfft_odd", lambda m, x, norm: m.fft.rfft(x, n=7, norm=norm), (3, 6)),
    ("rfft_dim0", lambda m, x, norm: m.fft.rfft(x, dim=0, norm=norm), (5, 2)),
    ("rfft2", lambda m, x, norm: m.fft.rfft2(x, norm=norm), (2, 4, 5)),
    ("rfftn", lambda m, x, norm: m.fft.rfftn(x, dim=(2, 0), norm=norm), (4, 3, 6)),
    ("rfftn_s", lambda m, x, norm: m.fft.rfftn(x, s=(3, 8), norm=norm), (4, 3, 6)),
    ("ihfft", lambda m, x, norm: m.fft.ihfft(x, norm=norm), (3, 6)),
    ("ihfft_n", lambda m, x, norm: m.fft.ihfft(x, n=5, norm=norm), (3, 6)),
    ("ihfft2", lambda m, x, norm: m.fft.ihfft2(x, norm=norm), (3, 4, 6)),
    ("ihfftn", lambda m, x, norm: m.fft.ihfftn(x, dim=(0, 1), norm=norm), (3, 4, 6)),
    ("fft_of_real", lambda m, x, norm: m.fft.fft(x, n=4, norm=norm), (3, 5)),
    ("fftn_of_real", lambda m, x, norm: m.fft.fftn(x, norm=norm), (3, 5)),
    ("irfft_of_real", lambda m, x, norm: m.fft.irfft(x, norm=norm), (3, 5)),
]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name, fn, shape", C2C, ids=[c[0] for c in C2C])
def test_complex_input_transforms_and_gradients(name, fn, shape, norm):
    check_complex(lambda m, x: fn(m, x, norm), crandn(*shape))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name, fn, shape", R2C, ids=[c[0] for c in R2C])
def test_real_input_transforms_and_gradients(name, fn, shape, norm):
    check_complex(lambda m, x: fn(m, x, norm), _real(*shape))


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, x: m.fft.rfft(x.transpose(0, 1)[::2]),
        lambda m, x: m.fft.fft(x[:, 1::2], dim=0),
        lambda m, x: m.fft.irfft(m.fft.rfft(x.t()), n=5),
        lambda m, x: m.fft.rfftn(x[::2, ::3]),
    ],
)
def test_non_contiguous_inputs(fn):
    check_complex(fn, _real(5, 6))


@pytest.mark.parametrize(
    "fn, shape, is_complex",
    [
        (lambda m, x: m.fft.fft(x, dim=0), (1, 4), True),
        (lambda m, x: m.fft.rfft(x, dim=1), (3, 1), False),
        (lambda m, x: m.fft.irfft(x, n=1), (3, 1), True),
        (lambda m, x: m.fft.irfft(x, n=3, dim=0), (1, 6), True),
        (lambda m, x: m.fft.fftn(x), (1, 1), True),
        (lambda m, x: m.fft.rfftn(x), (1, 3, 1), False),
    ],
)
def test_size_one_dims(fn, shape, is_complex):
    check_complex(fn, crandn(*shape) if is_complex else _real(*shape))


def test_float32_and_complex64():
    out = check_complex(lambda m, x: m.fft.fft(x, norm="ortho"), crandn(4, 9, dtype="complex64"), rtol=1e-5, atol=1e-5)
    assert out.dtype is munet.complex64
    out = check_complex(lambda m, x: m.fft.rfft2(x), randn(4, 9, dtype="float32"), rtol=1e-5, atol=1e-5)
    assert out.dtype is munet.complex64
    out = check_complex(lambda m, x: m.fft.irfft(x), crandn(4, 9, dtype="complex64"), rtol=1e-5, atol=1e-5)
    assert out.dtype is munet.float32


def test_round_trips():
    x = munet.tensor(_real(3, 8))
    np.testing.assert_allclose(munet.fft.irfft(munet.fft.rfft(x), n=8).numpy(), x.numpy(), atol=1e-12)
    z = munet.tensor(crandn(3, 8))
    np.testing.assert_allclose(
        munet.fft.ifftn(munet.fft.fftn(z, norm="ortho"), norm="ortho").numpy(), z.numpy(), atol=1e-12
    )
    half = z[:, :5].clone()
    half[:, 0] = half[:, 0].real  # a Hermitian signal's zero and Nyquist bins are real
    half[:, 4] = half[:, 4].real
    np.testing.assert_allclose(munet.fft.ihfft(munet.fft.hfft(half, n=8), n=8).numpy(), half.numpy(), atol=1e-12)


def test_integer_and_half_inputs_compute_in_float():
    assert munet.fft.fft(munet.arange(4)).dtype is munet.complex64
    np.testing.assert_allclose(munet.fft.fft(munet.arange(4)).numpy(), torch.fft.fft(torch.arange(4)).numpy())
    half = munet.fft.rfft(munet.ones(4, dtype=munet.float16))
    assert half.dtype is munet.complex64
    np.testing.assert_allclose(half.numpy(), [4, 0, 0])


def test_out_argument():
    z = crandn(3, 4)
    out = munet.empty(3, 4, dtype=munet.complex128)
    result = munet.fft.fft(munet.tensor(z), out=out)
    assert result is out
    np.testing.assert_allclose(out.numpy(), np.fft.fft(z), atol=1e-12)


def test_errors():
    with pytest.raises(ValueError, match="Invalid normalization mode"):
        munet.fft.fft(munet.ones(4), norm="none")
    with pytest.raises(RuntimeError, match="expects a real input tensor"):
        munet.fft.rfft(munet.ones(4, dtype=munet.complex64))
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        munet.fft.irfft(munet.ones(1, dtype=munet.complex64))
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        munet.fft.fft(munet.ones(4), n=0)
    with pytest.raises(RuntimeError, match="same length"):
        munet.fft.fftn(munet.ones(2, 3), s=(2,), dim=(0, 1))
    with pytest.raises(RuntimeError, match="unique"):
        munet.fft.fftn(munet.ones(2, 3), dim=(1, 1))
    with pytest.raises(IndexError):
        munet.fft.fft(munet.ones(2, 3), dim=2)


@pytest.mark.parametrize("n", [1, 4, 5])
@pytest.mark.parametrize("d", [1.0, 0.25])
def test_frequencies(n, d):
    for name in ("fftfreq", "rfftfreq"):
        got = getattr(munet.fft, name)(n, d)
        want = getattr(torch.fft, name)(n, d)
        assert got.dtype is munet.float32
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    got = munet.fft.fftfreq(n, d, dtype=munet.float64, requires_grad=True)
    assert got.dtype is munet.float64 and got.requires_grad


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1), (-1,)])
@pytest.mark.parametrize("shape", [(4, 5), (3, 1)])
def test_shifts(shape, dim):
    z = crandn(*shape)
    check_complex(lambda m, x: m.fft.fftshift(x, dim=dim), z)
    check_complex(lambda m, x: m.fft.ifftshift(x, dim=dim), z)
    x = munet.tensor(z)
    np.testing.assert_array_equal(munet.fft.ifftshift(munet.fft.fftshift(x, dim), dim).numpy(), z)


def test_namespace_matches_torch():
    names = [n for n in torch.fft.__all__]
    assert sorted(set(names) - set(munet.fft.__all__)) == []


# windows -------------------------------------------------------------------------------------------------

WINDOWS = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


@pytest.mark.parametrize("name", WINDOWS)
@pytest.mark.parametrize("length", [0, 1, 2, 7, 8])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows(name, length, periodic):
    got = getattr(munet, name)(length, periodic, dtype=munet.float64)
    want = getattr(torch, name)(length, periodic, dtype=torch.float64)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    default = getattr(munet, name)(length)
    assert default.dtype is munet.float32
    np.testing.assert_allclose(default.numpy(), getattr(torch, name)(length).numpy(), rtol=1e-5, atol=1e-6)


def test_window_parameters_and_errors():
    np.testing.assert_allclose(
        munet.hamming_window(9, False, 0.6, 0.3, dtype=munet.float64).numpy(),
        torch.hamming_window(9, False, 0.6, 0.3, dtype=torch.float64).numpy(),
    )
    np.testing.assert_allclose(
        munet.kaiser_window(9, True, 5.0, dtype=munet.float64).numpy(),
        torch.kaiser_window(9, True, 5.0, dtype=torch.float64).numpy(),
    )
    assert munet.hann_window(4, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        munet.hann_window(4, dtype=munet.int64)
    with pytest.raises(RuntimeError, match="non-negative"):
        munet.bartlett_window(-1)


# stft / istft --------------------------------------------------------------------------------------------------


def _hann(m, n):
    return m.hann_window(n, dtype=m.float64)


STFT = {
    "rectangular": lambda m, x: m.stft(x, 16, return_complex=True),
    "hann_hop": lambda m, x: m.stft(x, 16, hop_length=5, window=_hann(m, 16), return_complex=True),
    "short_window": lambda m, x: m.stft(
        x, 16, win_length=10, window=m.hamming_window(10, dtype=m.float64), normalized=True, return_complex=True
    ),
    "no_center_1d": lambda m, x: m.stft(x[0], 12, hop_length=3, center=False, return_complex=True),
    "constant_pad_twosided": lambda m, x: m.stft(x, 8, pad_mode="constant", onesided=False, return_complex=True),
    "replicate_pad": lambda m, x: m.stft(x, 8, hop_length=3, pad_mode="replicate", return_complex=True),
    "real_output": lambda m, x: m.stft(x, 8, return_complex=False),
    "align_to_window": lambda m, x: m.stft(
        x, 16, win_length=8, window=_hann(m, 8), center=False, align_to_window=True, return_complex=True
    ),
    "non_contiguous": lambda m, x: m.stft(x.t().t()[:, ::2], 8, hop_length=2, return_complex=True),
    "istft": lambda m, x: m.istft(
        m.stft(x, 16, hop_length=4, window=_hann(m, 16), return_complex=True), 16, hop_length=4, window=_hann(m, 16)
    ),
    "istft_length_short": lambda m, x: m.istft(
        m.stft(x[1], 16, window=_hann(m, 16), return_complex=True), 16, window=_hann(m, 16), length=45
    ),
    "istft_normalized_short_window": lambda m, x: m.istft(
        m.stft(x, 16, win_length=12, window=_hann(m, 12), normalized=True, return_complex=True),
        16,
        win_length=12,
        window=_hann(m, 12),
        normalized=True,
    ),
    "istft_no_center": lambda m, x: m.istft(
        m.stft(x, 8, hop_length=2, center=False, return_complex=True), 8, hop_length=2, center=False
    ),
}


@pytest.mark.parametrize("name", list(STFT))
def test_stft_istft_real_signals(name):
    check_complex(STFT[name], _real(2, 50))


@pytest.mark.filterwarnings("ignore:The length of signal is shorter")
def test_istft_length_longer_pads_with_zeros():
    check_complex(
        lambda m, x: m.istft(
            m.stft(x, 16, window=_hann(m, 16), return_complex=True), 16, window=_hann(m, 16), length=60
        ),
        _real(50),
    )


def test_stft_istft_complex_signals():
    z = crandn(2, 40)
    check_complex(lambda m, x: m.stft(x, 16, hop_length=4, window=_hann(m, 16)), z)
    check_complex(
        lambda m, x: m.istft(
            m.stft(x, 16, window=_hann(m, 16), return_complex=True), 16, window=_hann(m, 16), return_complex=True
        ),
        z,
    )


def test_stft_round_trip_and_errors():
    x = munet.tensor(_real(3, 64))
    w = munet.hann_window(32, dtype=munet.float64)
    back = munet.istft(
        munet.stft(x, 32, hop_length=8, window=w, return_complex=True), 32, hop_length=8, window=w, length=64
    )
    np.testing.assert_allclose(back.numpy(), x.numpy(), atol=1e-12)
    with pytest.raises(RuntimeError, match="return_complex parameter be given"):
        munet.stft(x, 16)
    with pytest.raises(RuntimeError, match="align_to_window"):
        munet.stft(x, 16, center=True, align_to_window=True, return_complex=True)
    with pytest.raises(RuntimeError, match="complex-valued input"):
        munet.istft(x, 16)
    with pytest.raises(RuntimeError, match="NOLA|overlap"):
        munet.istft(munet.stft(x, 16, window=munet.hann_window(16, dtype=munet.float64), center=False,
                               return_complex=True), 16, window=munet.hann_window(16, dtype=munet.float64), center=False)  # fmt: skip
    assert munet.Tensor.stft is munet.stft and munet.Tensor.istft is munet.istft


def test_factory_options_are_checked():
    with pytest.raises(NotImplementedError, match="pin_memory"):
        munet.hann_window(4, pin_memory=True)
    with pytest.raises(NotImplementedError, match="pin_memory"):
        munet.fft.fftfreq(4, pin_memory=True)
    assert munet.kaiser_window(4, layout=munet.strided).shape == (4,)


def test_second_order_gradients():
    a, v = _real(6), _real(6, seed=1)
    results = []
    for m in (munet, torch):
        x = m.tensor(a, requires_grad=True)
        y = (m.fft.rfft(x * x).abs() ** 2).sum() + (m.fft.fft(x) * (1 + 2j)).real.pow(3).sum()
        (g,) = m.autograd.grad(y, [x], create_graph=True)
        (h,) = m.autograd.grad((g * m.tensor(v)).sum(), [x])
        results.append((g.detach().numpy(), h.numpy()))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
