"""The short-time Fourier transform and its inverse (PyTorch's ``stft`` and ``istft``).

Both are written with public ops, so they differentiate (cpu only, as complex tensors are):
``stft`` pads the signal (``center``), cuts it into overlapping frames (``unfold``, a view),
weights them by the window and transforms each (``munet.fft``); ``istft`` transforms the frames
back, weights them by the window again, overlap-adds them (``fold``) and divides by the
overlap-added squared window, which must not vanish anywhere in the kept range (the NOLA
condition; PyTorch raises the same).
"""

from __future__ import annotations

from munet import _dtype as D
from munet.ops import complex as C
from munet.ops import creation
from munet.ops import fft as F

__all__ = ["stft", "istft"]
__tensor_methods__ = ["stft", "istft"]


def _frame_window(op: str, window, n_fft: int, win_length: int, like):
    """The window (ones by default) of ``win_length`` samples centered in ``n_fft``, zeros around it."""
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft, but got win_length={win_length}")
    if window is None:
        window = creation.ones(win_length, dtype=like.dtype.to_real(), device=like.device)
    elif window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(
            f"{op}: expected a 1D window tensor of size equal to win_length={win_length}, but got window with "
            f"size {list(window.shape)}"
        )
    if win_length == n_fft:
        return window
    from munet.nn import functional as NF

    left = (n_fft - win_length) // 2
    return NF.pad(window, (left, n_fft - win_length - left))


def _pad_signal(x, pad, mode: str):
    """``x`` (batch, length) padded by ``pad`` (an int: at both ends; or (left, right)) in ``mode``;
    a complex signal part by part."""
    from munet.nn import functional as NF

    if x.dtype.is_complex:
        return C.complex(_pad_signal(C.real(x), pad, mode), _pad_signal(C.imag(x), pad, mode))
    pad = (pad, pad) if isinstance(pad, int) else pad
    return NF.pad(x.unsqueeze(1), pad, mode=mode).squeeze(1)


def stft(input, n_fft: int, hop_length: int | None = None, win_length: int | None = None, window=None,
         center: bool = True, pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None, align_to_window: bool | None = None):  # fmt: skip
    """The short-time Fourier transform of ``input`` (``(L,)`` or ``(B, L)``): ``(B?, N, T)`` complex,
    ``N = n_fft // 2 + 1`` when one-sided (the default for a real signal and window), ``T`` frames
    ``hop_length`` apart (default ``n_fft // 4``). ``return_complex`` is required for real inputs, as
    in PyTorch; ``False`` gives ``view_as_real`` of the result. ``align_to_window=True`` (only with
    ``center=False``) starts each frame where its window's nonzero part starts."""
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    complex_input = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if return_complex is None:
        if not complex_input:
            raise RuntimeError(
                "stft requires the return_complex parameter be given for real inputs, and will further require "
                "that return_complex=True in a future PyTorch release."
            )
        return_complex = True
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got a tensor of shape {list(input.shape)}")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if n_fft <= 0 or hop_length <= 0:
        raise RuntimeError(
            f"stft: expected n_fft > 0 and hop_length > 0, but got n_fft={n_fft}, hop_length={hop_length}"
        )
    x = input if input.ndim == 2 else input.unsqueeze(0)
    if not (x.dtype.is_complex or x.dtype.is_floating_point):
        x = x.to(D.get_default_dtype())
    if center:
        x = _pad_signal(x, n_fft // 2, pad_mode)
    window = _frame_window("stft", window, n_fft, win_length, x)
    if align_to_window:  # frame t's window covers x[t * hop : t * hop + win_length]
        left = (n_fft - win_length) // 2
        x = _pad_signal(x, (left, n_fft - win_length - left), "constant")
    if not 0 < n_fft <= x.shape[-1]:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    frames = x.unfold(-1, n_fft, hop_length) * window  # (B, T, n_fft)
    onesided = not complex_input if onesided is None else onesided
    if onesided and complex_input:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spectrum = F.rfft(frames, dim=-1, norm=norm) if onesided else F.fft(frames, dim=-1, norm=norm)
    spectrum = spectrum.transpose(1, 2)
    if input.ndim == 1:
        spectrum = spectrum.squeeze(0)
    return spectrum if return_complex else C.view_as_real(spectrum.contiguous())


def _overlap_add(frames, hop_length: int, length: int):
    """The real ``frames`` ``(B, T, n_fft)`` summed into ``(B, length)``, frame ``t`` starting at ``t * hop_length``."""
    from munet.nn import functional as NF

    n_fft = frames.shape[-1]
    folded = NF.fold(frames.transpose(1, 2), output_size=(1, length), kernel_size=(1, n_fft), stride=(1, hop_length))
    return folded.reshape(frames.shape[0], length)


def istft(input, n_fft: int, hop_length: int | None = None, win_length: int | None = None, window=None,
          center: bool = True, normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False):  # fmt: skip
    """The inverse of :func:`stft` (complex ``(B?, N, T)`` in, ``(B?, length)`` out), by least-squares
    overlap-add; ``return_complex=True`` keeps a complex signal (a two-sided input)."""
    if not input.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions, got {list(input.shape)}")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    spectrum = input if input.ndim == 3 else input.unsqueeze(0)
    bins, n_frames = spectrum.shape[1], spectrum.shape[2]
    onesided = bins != n_fft if onesided is None else onesided
    if onesided and bins != n_fft // 2 + 1:
        raise RuntimeError(
            f"istft: expected the frequency dimension (3rd to the last) of the input tensor to match n_fft / 2 + 1 "
            f"when onesided=True, but got {bins}"
        )
    if not onesided and bins != n_fft:
        raise RuntimeError(
            f"istft: expected the frequency dimension to match n_fft={n_fft} when onesided=False, got {bins}"
        )
    if onesided and return_complex:
        raise RuntimeError("cannot have onesided output if window or input is complex")
    window = _frame_window("istft", window, n_fft, win_length, spectrum)
    norm = "ortho" if normalized else "backward"
    frames = spectrum.transpose(1, 2)
    frames = F.irfft(frames, n=n_fft, dim=-1, norm=norm) if onesided else F.ifft(frames, dim=-1, norm=norm)
    if not return_complex and frames.dtype.is_complex:
        frames = C.real(frames)
    frames = frames * window
    total = n_fft + hop_length * (n_frames - 1)
    if frames.dtype.is_complex:
        signal = C.complex(
            _overlap_add(C.real(frames), hop_length, total), _overlap_add(C.imag(frames), hop_length, total)
        )
    else:
        signal = _overlap_add(frames, hop_length, total)
    squared = window.abs() ** 2 if window.dtype.is_complex else window * window
    envelope = _overlap_add(squared.expand(1, n_frames, n_fft), hop_length, total)
    start = n_fft // 2 if center else 0
    end = total - n_fft // 2 if center else total
    if length is not None:
        end = start + length
    kept = min(end, total)
    signal = signal[:, start:kept]
    envelope = envelope[:, start:kept]
    if bool((envelope.abs() < 1e-11).any()):
        raise RuntimeError("istft: window overlap add min: the window's squared overlap-add is 0 somewhere (NOLA)")
    signal = signal / envelope
    if end > kept:
        signal = F.pad_or_trim(signal, 1, end - start)
    return signal.squeeze(0) if input.ndim == 2 else signal
