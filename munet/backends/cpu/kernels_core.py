"""CPU kernels for creation, casts, copies, fills and the strided scatter primitives."""

from __future__ import annotations

import math

import numpy as np

from munet.backends.cpu.registry import kernel


@kernel("empty")
def empty(*, shape, dtype):
    return np.empty(shape, dtype.np)


@kernel("full")
def full(*, shape, value, dtype):
    out = np.empty(shape, dtype.np)  # np.full's own two steps, without its Python-level wrapper
    np.copyto(out, value, casting="unsafe")
    return out


@kernel("arange")
def arange(*, start, end, step, dtype):
    n = max(0, int(np.ceil((end - start) / step)))
    if dtype.is_floating_point:
        return (start + np.arange(n, dtype=np.float64) * step).astype(dtype.np)
    return np.arange(start, start + n * step, step)[:n].astype(dtype.np)


@kernel("linspace")
def linspace(*, start, end, steps, dtype):
    """The decomposition's formula (``munet/ops/creation.py``) in one NumPy pass: PyTorch's half
    from ``start`` and half from ``end``, in float32/float64 for those dtypes, in float64 after
    truncating ``start`` and ``end`` for integers, in float32 for other floating dtypes."""
    if steps == 1:
        return np.full(1, start, dtype=dtype.np)
    floating = dtype.is_floating_point
    work = (dtype.np if dtype.np in (np.float32, np.float64) else np.float32) if floating else np.float64
    rounded = np.dtype(work).type
    lo, hi = (rounded(v) if floating else rounded(np.int64(v)) for v in (start, end))
    step = rounded((hi - lo) / rounded(steps - 1))
    i = np.arange(steps, dtype=work)
    with np.errstate(invalid="ignore"):
        out = np.where(i < steps // 2, i * step + lo, hi - (steps - 1 - i) * step)
        return np.trunc(out).astype(dtype.np) if not floating else out.astype(dtype.np)


@kernel("eye")
def eye(*, n, m, dtype):
    return np.eye(n, m, dtype=dtype.np)


@kernel("cast")
def cast(x, *, dtype):
    if dtype.np == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and dtype.np.kind in "iu":
        # PyTorch truncates toward zero; NaN/inf give implementation-defined values, as in C.
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(dtype.np)
    if x.dtype.kind == "c" and dtype.np.kind != "c":
        x = x.real  # PyTorch's cast of a complex tensor to a real dtype keeps the real part
    return x.astype(dtype.np)


@kernel("clone")
def clone(x):
    return np.array(x, copy=True, order="C")


@kernel("copy")
def copy(self, src):
    return np.array(np.broadcast_to(src, self.shape), dtype=self.dtype, order="C")


@kernel("copy_")
def copy_(out, src):
    np.copyto(out, src, casting="unsafe")


@kernel("fill")
def fill(self, value):
    return np.full(self.shape, value, dtype=self.dtype)


@kernel("fill_")
def fill_(out, value):
    out[...] = value


def _strided_view(flat: np.ndarray, size, stride, offset):
    itemsize = flat.itemsize
    if 0 in size:
        offset = 0  # an empty region may start past the end of the buffer
    return np.ndarray(
        size, dtype=flat.dtype, buffer=flat, offset=offset * itemsize, strides=[s * itemsize for s in stride]
    )


@kernel("as_strided_scatter")
def as_strided_scatter(x, src, *, size, stride, storage_offset):
    out = np.empty(x.shape, x.dtype)
    as_strided_scatter_into(out, x, src, size=size, stride=stride, storage_offset=storage_offset)
    return out


def as_strided_scatter_into(out, x, src, *, size, stride, storage_offset):
    """``as_strided_scatter`` writing into ``out`` (C-contiguous, ``x``'s shape and dtype, overlapping neither).

    Where the region is a box of ``out`` (a padded copy: the importer's max pool, ``constant_pad_nd``)
    only ``x``'s elements around it are copied (``_box``), not all of them first."""
    box = _box(out.shape, size, stride, storage_offset)
    if box is None:
        np.copyto(out, x)
    else:
        for around in _around(box, out.shape):
            np.copyto(out[around], x[around])
    _strided_view(out.reshape(-1), size, stride, storage_offset)[...] = src


def _box(shape, size, stride, offset):
    """The slices of a C-contiguous array of ``shape`` that the view ``(size, stride, offset)`` is
    exactly (a box: same rank, the array's own strides), or None."""
    if len(size) != len(shape) or not shape:
        return None
    pitches = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    if any(st != p for st, p, n in zip(stride, pitches, size) if n > 1):
        return None
    starts = []
    for n, pitch, extent in zip(size, pitches, shape):
        start = offset // pitch if pitch else 0
        offset -= start * pitch
        if start + n > extent:
            return None
        starts.append(start)
    if offset:
        return None
    return tuple(slice(s, s + n) for s, n in zip(starts, size))


def _around(box, shape):
    """The disjoint slabs of an array of ``shape`` outside ``box`` (slices): per dim, the parts
    before and after the box's range, inside it along the dims before."""
    for d, (part, extent) in enumerate(zip(box, shape)):
        inside = box[:d]
        for cut in (slice(0, part.start), slice(part.stop, extent)):
            if cut.stop > cut.start:
                yield inside + (cut,) + (slice(None),) * (len(shape) - d - 1)


@kernel("strided_scatter_add")
def strided_scatter_add(grad, *, shape, size, stride, storage_offset):
    numel = int(np.prod(shape))
    index = np.full((), storage_offset, dtype=np.int64)
    for n, s in zip(size, stride):
        index = np.add.outer(index, np.arange(n, dtype=np.int64) * s)
    index = index.reshape(-1)
    if grad.dtype.kind == "c":  # bincount weighs by reals: the two parts apart
        flat = np.empty(numel, grad.dtype)
        flat.real = np.bincount(index, weights=grad.real.reshape(-1).astype(np.float64), minlength=numel)[:numel]
        flat.imag = np.bincount(index, weights=grad.imag.reshape(-1).astype(np.float64), minlength=numel)[:numel]
        return flat.reshape(shape)
    acc_dtype = np.float64 if grad.dtype.kind == "f" else grad.dtype
    flat = np.bincount(index, weights=grad.reshape(-1).astype(acc_dtype), minlength=numel)[:numel]
    return flat.astype(grad.dtype).reshape(shape)
