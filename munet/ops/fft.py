"""Discrete Fourier transforms: ``munet.fft`` (PyTorch's ``torch.fft``), with gradients.

Three primitives carry every transform, as in PyTorch: ``fft_c2c`` (complex to complex, either
direction), ``fft_r2c`` (real to the one-sided half spectrum, forward) and ``fft_c2r`` (the half
spectrum of a Hermitian signal to real, inverse). Their kernels are NumPy's pocketfft on the cpu
and cuFFT through ``cupy.fft`` on cuda; their gradient rules are the transposed transforms in PyTorch's
conjugate convention (``c2c`` goes back the other way with the same scale; ``r2c`` zero-pads the
half spectrum and keeps the real part of the inverse; ``c2r`` transforms forward and doubles the
bins that stood for two). Everything else (``n``/``s`` padding and trimming, ``hfft``/``ihfft``,
frequencies and shifts) is written with public ops, so its gradient comes from theirs.

``norm`` is PyTorch's: ``"backward"`` (the default, ``None``) scales the inverse by ``1/n``,
``"forward"`` the forward transform, ``"ortho"`` both by ``1/sqrt(n)``. Integer inputs compute
in the default float dtype; float16/bfloat16 inputs in float32 (PyTorch's CPU refuses them).
"""

from __future__ import annotations

from munet import _dtype as D
from munet.ops import complex as C
from munet.ops import creation, elementwise, movement, view
from munet.ops._registry import Meta, apply
from munet.ops._utils import wrap_dim

__all__ = []
__fft__ = [
    "fft",
    "ifft",
    "fft2",
    "ifft2",
    "fftn",
    "ifftn",
    "rfft",
    "irfft",
    "rfft2",
    "irfft2",
    "rfftn",
    "irfftn",
    "hfft",
    "ihfft",
    "hfft2",
    "ihfft2",
    "hfftn",
    "ihfftn",
    "fftfreq",
    "rfftfreq",
    "fftshift",
    "ifftshift",
]

_NORMS = {None: "backward", "backward": "backward", "forward": "forward", "ortho": "ortho"}
# the norm that gives the transform in the other direction the same scale factor
_SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _check_norm(norm, op: str) -> str:
    if norm not in _NORMS:
        raise ValueError(f'{op}: Invalid normalization mode: "{norm}"')
    return _NORMS[norm]


# primitives -------------------------------------------------------------------------------------------


def _c2c_backward(ctx, g):
    a = ctx.attrs
    return c2c(g, a["dims"], _SWAPPED[a["norm"]], not a["forward"])


def _half_shape(shape, dims):
    shape = list(shape)
    shape[dims[-1]] = shape[dims[-1]] // 2 + 1
    return tuple(shape)


def _r2c_backward(ctx, g):
    """``Re(F^H P^T g)``: the half spectrum zero-padded to full length, transformed back."""
    dims, norm = ctx.attrs["dims"], ctx.attrs["norm"]
    last = dims[-1]
    full = pad_or_trim(g, last, ctx.input_shapes[0][last])
    return C.real(c2c(full, dims, _SWAPPED[norm], False))


def _c2r_backward(ctx, g):
    """The forward half spectrum of ``g``, with the bins that stand for two (all but the zero and,
    for an even length, the Nyquist bin) doubled."""
    dims, norm = ctx.attrs["dims"], ctx.attrs["norm"]
    spectrum = r2c(g, dims, _SWAPPED[norm])
    last = dims[-1]
    bins = spectrum.shape[last]
    doubled = ctx.attrs["last_dim_size"] - bins
    if doubled <= 0:
        return spectrum
    weights = creation.ones(bins, dtype=g.dtype, device=g.device)
    weights[1 : 1 + doubled] = 2.0
    shape = [1] * spectrum.ndim
    shape[last] = bins
    return spectrum * weights.reshape(shape)


def _c2r_meta(x, *, dims, norm, last_dim_size):
    shape = list(x.shape)
    shape[dims[-1]] = last_dim_size
    return Meta(tuple(shape), x.dtype.to_real())


fft_c2c_op = C.define_wirtinger(
    "fft_c2c", meta=lambda x, **_: Meta(x.shape, x.dtype), backward=_c2c_backward, backward_name="FftC2CBackward0"
)
fft_r2c_op = C.define_wirtinger(
    "fft_r2c",
    meta=lambda x, *, dims, norm: Meta(_half_shape(x.shape, dims), x.dtype.to_complex()),
    backward=_r2c_backward,
    backward_name="FftR2CBackward0",
)
fft_c2r_op = C.define_wirtinger("fft_c2r", meta=_c2r_meta, backward=_c2r_backward, backward_name="FftC2RBackward0")


def c2c(x, dims: tuple, norm: str, forward: bool):
    """The complex transform of ``x`` over ``dims`` (forward: ``exp(-2 pi i jk/n)``), scaled per ``norm``."""
    return apply(fft_c2c_op, x, dims=tuple(dims), norm=norm, forward=bool(forward))


def r2c(x, dims: tuple, norm: str):
    """The forward transform of real ``x`` over ``dims``, the last of them one-sided (``n // 2 + 1`` bins)."""
    return apply(fft_r2c_op, x, dims=tuple(dims), norm=norm)


def c2r(x, dims: tuple, norm: str, last_dim_size: int):
    """The inverse transform of a Hermitian signal's half spectrum ``x``: real, ``last_dim_size`` long in ``dims[-1]``."""
    return apply(fft_c2r_op, x, dims=tuple(dims), norm=norm, last_dim_size=int(last_dim_size))


# argument handling ----------------------------------------------------------------------------------------


def pad_or_trim(x, dim: int, n: int):
    """``x`` trimmed or zero-padded at the end of ``dim`` to length ``n`` (as ``n=``/``s=`` do)."""
    size = x.shape[dim]
    if n == size:
        return x
    if n < size:
        return view.narrow(x, dim, 0, n)
    shape = list(x.shape)
    shape[dim] = n - size
    return movement.cat([x, creation.zeros(shape, dtype=x.dtype, device=x.device)], dim)


def _real_input(x, op: str):
    if x.dtype.is_complex:
        raise RuntimeError(f"{op} expects a real input tensor, but got {x.dtype.name}")
    if x.dtype in (D.float32, D.float64):
        return x
    return x.to(D.float32 if x.dtype.is_floating_point else D.get_default_dtype())


def _as_complex(x, op: str):
    """``x`` as a complex tensor: a real one of float32/float64 widens to complex64/complex128."""
    if x.dtype.is_complex:
        return x
    x = _real_input(x, op)
    return x.to(x.dtype.to_complex())


def _check_size(n: int, op: str) -> None:
    if n < 1:
        raise RuntimeError(f"{op}: Invalid number of data points ({n}) specified")


def _one_dim(x, n, dim: int, op: str):
    d = wrap_dim(dim, x.ndim, op)
    n = x.shape[d] if n is None else int(n)
    _check_size(n, op)
    return d, n


def _nd(x, s, dim, op: str):
    """PyTorch's ``s``/``dim`` rule: (dims, sizes). ``dim`` None: the last ``len(s)`` dims, or all;
    an entry -1 of ``s`` keeps that dim's size."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(wrap_dim(d, x.ndim, op) for d in dims)
        if s is not None and len(s) != len(dims):
            raise RuntimeError(f"{op}: When given, dim and shape arguments must have the same length")
    elif s is not None:
        if len(s) > x.ndim:
            raise RuntimeError(f"{op}: Got shape with {len(s)} values but input tensor only has {x.ndim} dimensions.")
        dims = tuple(range(x.ndim - len(s), x.ndim))
    else:
        dims = tuple(range(x.ndim))
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"{op}: FFT dims must be unique")
    sizes = [x.shape[d] for d in dims] if s is None else [x.shape[d] if n == -1 else int(n) for d, n in zip(dims, s)]
    for n in sizes:
        _check_size(n, op)
    return dims, sizes


def _resized(x, dims, sizes):
    for d, n in zip(dims, sizes):
        x = pad_or_trim(x, d, n)
    return x


_out = elementwise._out


# complex to complex -------------------------------------------------------------------------------------


def fft(input, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None):
    """The one-dimensional discrete Fourier transform of ``input`` over ``dim`` (``n``: pad or trim first)."""
    norm = _check_norm(norm, "fft_fft")
    x = _as_complex(input, "fft_fft")
    d, n = _one_dim(x, n, dim, "fft_fft")
    return _out(c2c(pad_or_trim(x, d, n), (d,), norm, True), out)


def ifft(input, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None):
    """The inverse of :func:`fft`."""
    norm = _check_norm(norm, "fft_ifft")
    x = _as_complex(input, "fft_ifft")
    d, n = _one_dim(x, n, dim, "fft_ifft")
    return _out(c2c(pad_or_trim(x, d, n), (d,), norm, False), out)


def fftn(input, s=None, dim=None, norm: str | None = None, *, out=None):
    """The N-dimensional transform over ``dim`` (default: all dims, or the last ``len(s)``)."""
    norm = _check_norm(norm, "fft_fftn")
    x = _as_complex(input, "fft_fftn")
    dims, sizes = _nd(x, s, dim, "fft_fftn")
    return _out(c2c(_resized(x, dims, sizes), dims, norm, True) if dims else x.clone(), out)


def ifftn(input, s=None, dim=None, norm: str | None = None, *, out=None):
    """The inverse of :func:`fftn`."""
    norm = _check_norm(norm, "fft_ifftn")
    x = _as_complex(input, "fft_ifftn")
    dims, sizes = _nd(x, s, dim, "fft_ifftn")
    return _out(c2c(_resized(x, dims, sizes), dims, norm, False) if dims else x.clone(), out)


def fft2(input, s=None, dim=(-2, -1), norm: str | None = None, *, out=None):
    """:func:`fftn` over the last two dims."""
    return fftn(input, s, dim, norm, out=out)


def ifft2(input, s=None, dim=(-2, -1), norm: str | None = None, *, out=None):
    """:func:`ifftn` over the last two dims."""
    return ifftn(input, s, dim, norm, out=out)


# real to half spectrum and back --------------------------------------------------------------------------


def rfft(input, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None):
    """The transform of real ``input`` over ``dim``: the ``n // 2 + 1`` non-negative frequencies."""
    norm = _check_norm(norm, "fft_rfft")
    x = _real_input(input, "fft_rfft")
    d, n = _one_dim(x, n, dim, "fft_rfft")
    return _out(r2c(pad_or_trim(x, d, n), (d,), norm), out)


def irfft(input, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None):
    """The inverse of :func:`rfft`: a real signal of length ``n`` (default ``2 * (input.size(dim) - 1)``)."""
    norm = _check_norm(norm, "fft_irfft")
    x = _as_complex(input, "fft_irfft")
    d = wrap_dim(dim, x.ndim, "fft_irfft")
    n = 2 * (x.shape[d] - 1) if n is None else int(n)
    _check_size(n, "fft_irfft")
    return _out(c2r(pad_or_trim(x, d, n // 2 + 1), (d,), norm, n), out)


def rfftn(input, s=None, dim=None, norm: str | None = None, *, out=None):
    """The N-dimensional transform of real ``input``, one-sided in the last of ``dim``."""
    norm = _check_norm(norm, "fft_rfftn")
    x = _real_input(input, "fft_rfftn")
    dims, sizes = _nd(x, s, dim, "fft_rfftn")
    if not dims:
        raise RuntimeError("fft_rfftn: rfftn must transform at least one axis")
    return _out(r2c(_resized(x, dims, sizes), dims, norm), out)


def irfftn(input, s=None, dim=None, norm: str | None = None, *, out=None):
    """The inverse of :func:`rfftn`: the last of ``dim`` becomes ``s[-1]`` long (default ``2 * (m - 1)``)."""
    norm = _check_norm(norm, "fft_irfftn")
    x = _as_complex(input, "fft_irfftn")
    dims, sizes = _nd(x, s, dim, "fft_irfftn")
    if not dims:
        raise RuntimeError("fft_irfftn: irfftn must transform at least one axis")
    last = dims[-1]
    n = 2 * (x.shape[last] - 1) if s is None or s[-1] == -1 else int(s[-1])
    _check_size(n, "fft_irfftn")
    sizes[-1] = n // 2 + 1
    return _out(c2r(_resized(x, dims, sizes), dims, norm, n), out)


def rfft2(input, s=None, dim=(-2, -1), norm: str | None = None, *, out=None):
    """:func:`rfftn` over the last two dims."""
    return rfftn(input, s, dim, norm, out=out)


def irfft2(input, s=None, dim=(-2, -1), norm: str | None = None, *, out=None):
    """:func:`irfftn` over the last two dims."""
    return irfftn(input, s, dim, norm, out=out)


# Hermitian signals: hfft is irfft of the conjugate in the other direction, ihfft the conjugate of rfft --------


def hfft(input, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None):
    """The transform of a signal with Hermitian symmetry, given by its half ``input``: real, ``n`` long."""
    norm = _check_norm(norm, "fft_hfft")
    return irfft(C.conj(_as_complex(input, "fft_hfft")), n, dim, _SWAPPED[norm], out=out)


def ihfft(input, n: int | None = None, dim: int = -1, norm: str | None = None, *, out=None):
    """The inverse of :func:`hfft`: the half spectrum of real ``input``."""
    norm = _check_norm(norm, "fft_ihfft")
    return _out(C.conj(rfft(input, n, dim, _SWAPPED[norm])), out)


def hfftn(input, s=None, dim=None, norm: str | None = None, *, out=None):
    """The N-dimensional :func:`hfft`: Hermitian in the last of ``dim``."""
    norm = _check_norm(norm, "fft_hfftn")
    return irfftn(C.conj(_as_complex(input, "fft_hfftn")), s, dim, _SWAPPED[norm], out=out)


def ihfftn(input, s=None, dim=None, norm: str | None = None, *, out=None):
    """The inverse of :func:`hfftn`."""
    norm = _check_norm(norm, "fft_ihfftn")
    return _out(C.conj(rfftn(input, s, dim, _SWAPPED[norm])), out)


def hfft2(input, s=None, dim=(-2, -1), norm: str | None = None, *, out=None):
    """:func:`hfftn` over the last two dims."""
    return hfftn(input, s, dim, norm, out=out)


def ihfft2(input, s=None, dim=(-2, -1), norm: str | None = None, *, out=None):
    """:func:`ihfftn` over the last two dims."""
    return ihfftn(input, s, dim, norm, out=out)


# frequencies and shifts ---------------------------------------------------------------------------------------


def fftfreq(n: int, d: float = 1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad: bool = False,
            pin_memory: bool = False):  # fmt: skip
    """The sample frequencies of an ``n``-point transform with spacing ``d``: ``[0, 1, ..., -1] / (d * n)``."""
    k = creation.arange(n, dtype=D.int64, device=device, layout=layout, pin_memory=pin_memory)
    k = elementwise.where(k < (n + 1) // 2, k, k - n)
    return _frequencies(k, n * d, dtype, out, requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad: bool = False,
             pin_memory: bool = False):  # fmt: skip
    """The non-negative sample frequencies of :func:`rfft`: ``[0, 1, ..., n // 2] / (d * n)``."""
    k = creation.arange(n // 2 + 1, dtype=D.int64, device=device, layout=layout, pin_memory=pin_memory)
    return _frequencies(k, n * d, dtype, out, requires_grad)


def _frequencies(k, scale, dtype, out, requires_grad: bool):
    dtype = D.get_default_dtype() if dtype is None else dtype
    return creation.finish_factory(k.to(dtype) * (1.0 / scale), requires_grad, out)


def _shift_dims(x, dim):
    if dim is None:
        return tuple(range(x.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(wrap_dim(d, x.ndim, "fftshift") for d in dims)


def fftshift(input, dim=None):
    """Move the zero frequency to the center of ``dim`` (all dims by default): a roll by ``n // 2``."""
    dims = _shift_dims(input, dim)
    return movement.roll(input, [input.shape[d] // 2 for d in dims], dims) if dims else input.clone()


def ifftshift(input, dim=None):
    """The inverse of :func:`fftshift`: a roll by ``-(n // 2)``."""
    dims = _shift_dims(input, dim)
    return movement.roll(input, [(input.shape[d] + 1) // 2 for d in dims], dims) if dims else input.clone()
