"""ONNX's spectral operators on ``munet.fft``: DFT, STFT and the window generators.

ONNX holds a complex signal as a real tensor whose last dim is 2 (real, imaginary), a real one with
a last dim of 1; these rules read it as a MuNet complex tensor (``view_as_complex``), transform it
with ``munet.fft`` and give the result back in ONNX's layout (``view_as_real``). Complex tensors live
on cpu only, so on another device DFT and STFT raise the DeviceError that says so.
"""

from __future__ import annotations

import math

import munet
from munet.onnx.import_ops import rule


def _signal(call, x):
    """``x`` (..., 1 | 2) as a real or complex MuNet tensor without the last dim."""
    if x.shape[-1] == 1:
        return x.squeeze(-1)
    if x.shape[-1] != 2:
        raise call.unsupported(f"a signal whose last dim is {x.shape[-1]} (1 for real, 2 for complex)")
    if x.dtype not in (munet.float32, munet.float64):
        raise call.unsupported(f"a {x.dtype.name} complex signal (float32 and float64 are supported)")
    return munet.view_as_complex(x.contiguous())


def _onnx_layout(y):
    return munet.view_as_real(y) if y.is_complex() else y.unsqueeze(-1)


@rule("DFT")
def _dft(call):
    """Forward (optionally one-sided: the first ``n // 2 + 1`` frequencies) or inverse (1/n
    normalized; one-sided input gives a real signal, ``irfft``) transform along one axis, padded or
    cut to ``dft_length``."""
    x = call.input(0)
    axis = (int(call.scalar(2)) if call.has(2) else -2) if call.opset >= 20 else call.attr("axis", 1)
    if not -x.ndim <= axis < x.ndim or axis % x.ndim == x.ndim - 1:
        raise call.unsupported(f"axis={axis} for a signal of rank {x.ndim} (the last dim holds real, imaginary)")
    axis %= x.ndim
    inverse, onesided = bool(call.attr("inverse", 0)), bool(call.attr("onesided", 0))
    if call.has(1):
        length = int(call.scalar(1))
    else:
        length = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    signal = _signal(call, x)
    if inverse:
        transform = munet.fft.irfft if onesided else munet.fft.ifft
        return _onnx_layout(transform(signal, n=length, dim=axis))
    y = munet.fft.fft(signal, n=length, dim=axis)
    return _onnx_layout(y.narrow(axis, 0, length // 2 + 1) if onesided else y)


@rule("STFT")
def _stft(call):
    """Frames of ``window``'s length every ``frame_step`` samples (no centering: ``1 + (length -
    frame_length) // frame_step`` of them, the last zero-padded to the window's length), each
    weighted by the window and transformed over ``frame_length`` points; (batch, frames, bins, 2)."""
    x = call.input(0)
    if x.ndim != 3:
        raise call.unsupported(f"a signal of rank {x.ndim} (batch, length, 1 | 2)")
    step = int(call.scalar(1))
    window = call.input(2)
    frame_length = int(call.scalar(3)) if call.has(3) else (window.shape[0] if window is not None else x.shape[1])
    width = window.shape[0] if window is not None else frame_length
    if step <= 0 or frame_length <= 0 or frame_length > x.shape[1]:
        raise call.unsupported(f"frame_step={step} with frame_length={frame_length} over {x.shape[1]} samples")
    frames = 1 + (x.shape[1] - frame_length) // step
    signal = _signal(call, x)
    short = (frames - 1) * step + width - signal.shape[1]
    if short > 0:
        signal = munet.cat([signal, munet.zeros(signal.shape[0], short, dtype=signal.dtype, device=signal.device)], 1)
    pieces = signal.unfold(1, width, step)[:, :frames]
    if window is not None:
        pieces = pieces * window.to(x.dtype)
    y = munet.fft.fft(pieces, n=frame_length, dim=-1)
    if call.attr("onesided", 1):
        if y.is_complex() and x.shape[-1] == 2:
            raise call.unsupported("onesided=1 for a complex signal")
        y = y[..., : frame_length // 2 + 1]
    return munet.view_as_real(y)


# ONNX's windows: w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1
_WINDOWS = {
    "HannWindow": (0.5, 0.5, 0.0),
    "HammingWindow": (25 / 46, 21 / 46, 0.0),
    "BlackmanWindow": (0.42, 0.5, 0.08),
}


@rule(*_WINDOWS)
def _window(call):
    """The window's cosine sum, computed in float64 and cast to ``output_datatype`` (float32 by default)."""
    size = int(call.scalar(0))
    if size < 0:
        raise call.unsupported(f"a window of size {size}")
    a0, a1, a2 = _WINDOWS[call.op_type]
    span = size if call.attr("periodic", 1) else size - 1
    n = munet.arange(size, dtype=munet.float64, device=call.device)
    phase = 2 * math.pi * n / span if span > 0 else n * 0.0
    w = a0 - a1 * munet.cos(phase) + a2 * munet.cos(2 * phase)
    dtype = call.dtype_attr("output_datatype") if "output_datatype" in call.node.attrs else munet.float32
    return w.to(dtype)
