"""Strided copies, casts, host transfers and cross-device copies of cuda data.

A cuda tensor's data is a ``cupy.ndarray`` view; bfloat16 is held as its 16 bits in ``uint16``
(CuPy has no bfloat16 type), so the conversions to and from it are written here on the bits, with
the rounding PyTorch uses (to nearest, ties to even; NaN becomes the quiet NaN 0x7FC0).

Host transfers are copies on the device's current stream (``.get()``/``.set()``), synchronous
unless ``non_blocking`` (PyTorch's rule): from pinned host memory (``pinned.py``) the upload is
queued on the stream and the host goes on; a non-blocking download lands in a new pinned array,
valid once the stream is synchronized. From pageable memory an upload is synchronous whatever
``non_blocking`` says. A copy between two CUDA devices names both (``cudaMemcpyPeerAsync``)
and orders itself against both devices' current streams with events, so neither device's later
work can overwrite what is being read or read what is not written yet.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from munet import _dtype as D
from munet.backends.cuda import pinned, sync_debug

_BF16_BITS = np.dtype(np.uint16)
_QUIET_NAN_BITS = 0x7FC0


def storage_dtype(dtype) -> np.dtype:
    """The element type of a cuda array holding ``dtype`` (bfloat16: its bits as uint16)."""
    return _BF16_BITS if dtype is D.bfloat16 else np.dtype(dtype.np)


def dtype_of(array):
    """The MuNet dtype a cuda array holds (uint16 arrays hold bfloat16)."""
    return D.bfloat16 if array.dtype == _BF16_BITS else D.from_numpy_dtype(array.dtype)


def host_dtype(np_dtype) -> np.dtype:
    """``storage_dtype`` of a NumPy dtype (``ml_dtypes.bfloat16`` -> uint16)."""
    return _BF16_BITS if np.dtype(np_dtype) == np.dtype(ml_dtypes.bfloat16) else np.dtype(np_dtype)


def float32_to_bfloat16_bits(cp, x):
    bits = cp.ascontiguousarray(x, dtype=cp.float32).view(cp.uint32)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    return cp.where(cp.isnan(x), _QUIET_NAN_BITS, rounded).astype(cp.uint16)


def bfloat16_bits_to_float32(cp, bits):
    return (bits.astype(cp.uint32) << 16).view(cp.float32)


def cast(cp, x, dtype):
    """A new C-contiguous array of ``x``'s values converted to ``dtype`` (PyTorch's cast rules:
    to bool is ``x != 0``, float to int truncates toward zero, complex to real keeps the real part)."""
    source = dtype_of(x)
    if source is dtype:
        return cp.array(x, copy=True, order="C")
    if source.is_complex and not dtype.is_complex and dtype is not D.bool_:
        x, source = x.real, source.to_real()
        if source is dtype:
            return cp.array(x, copy=True, order="C")
    if source is D.bfloat16:
        x, source = bfloat16_bits_to_float32(cp, x), D.float32
        if dtype is D.float32:
            return x
    if dtype is D.bfloat16:
        return float32_to_bfloat16_bits(cp, x.astype(cp.float32))
    if dtype is D.bool_:
        return x != 0
    return x.astype(dtype.np, order="C")


def copy_into(cp, dst, src) -> None:
    """Write ``src`` (an array broadcastable to ``dst``, or a number) into the view ``dst``, converting
    its dtype; an ``src`` overlapping ``dst``'s memory is copied first (one kernel cannot read and
    write the same memory in an order-safe way)."""
    if not isinstance(src, cp.ndarray):
        dst[...] = scalar_bits(src, dtype_of(dst))
        return
    if dtype_of(src) is not dtype_of(dst):
        src = cast(cp, src, dtype_of(dst))
    elif src.size and dst.size and src.data.mem is dst.data.mem:
        src = src.copy()
    cp.copyto(dst, src)


def scalar_bits(value, dtype):
    """A Python number as the value a ``dtype`` array stores (bfloat16: its bits)."""
    if dtype is D.bfloat16:
        return int(np.asarray(value, dtype=ml_dtypes.bfloat16).view(np.uint16))
    return value


def to_host(cp, data, non_blocking: bool = False) -> np.ndarray:
    """The view's elements in a new host array (bfloat16 as ``ml_dtypes.bfloat16``); waits for the
    device's current stream, unless ``non_blocking``: then the array is pinned and filled by a copy
    queued on that stream (read it after synchronizing)."""
    dtype = dtype_of(data)
    if data.size == 0:
        return np.empty(data.shape, dtype.np)
    if non_blocking:
        host = pinned.empty(cp, data.shape, data.dtype)
        data.get(stream=cp.cuda.get_current_stream(), out=host, blocking=False)
    else:
        sync_debug.synchronizing("a device-to-host copy")
        host = data.get()
    return host.view(ml_dtypes.bfloat16) if dtype is D.bfloat16 else host


def from_host(cp, array: np.ndarray, non_blocking: bool = False):
    """A new flat device array holding ``array``'s elements in row-major order; a ``non_blocking``
    copy from pinned memory is queued on the current stream and returns at once."""
    flat = np.ascontiguousarray(array).reshape(-1).view(host_dtype(array.dtype))
    out = cp.empty(flat.size, flat.dtype)
    if flat.size:
        if non_blocking and pinned.holds(cp, flat):
            out.set(flat, stream=cp.cuda.get_current_stream())
        else:
            out.set(flat)
    return out


def copy_between_devices(cp, src_scope, dst_scope, data):
    """A new flat array on ``dst_scope``'s device with the elements of ``data`` (on ``src_scope``'s)."""
    src_index, dst_index = src_scope.allocator.index, dst_scope.allocator.index
    with src_scope:
        src = cp.ascontiguousarray(data)
        source_ready = cp.cuda.Event(disable_timing=True)
        source_ready.record()
        src_stream = cp.cuda.get_current_stream()
    with dst_scope:
        out = cp.empty(src.size, src.dtype)
        dst_stream = cp.cuda.get_current_stream()
        dst_stream.wait_event(source_ready)
        if src.nbytes:
            cp.cuda.runtime.memcpyPeerAsync(
                out.data.ptr, dst_index, src.data.ptr, src_index, src.nbytes, dst_stream.ptr
            )
        copied = cp.cuda.Event(disable_timing=True)
        copied.record(dst_stream)
    with src_scope:
        src_stream.wait_event(copied)  # the source's memory is not reused before the copy read it
    return out
