"""Movement ops: joining, splitting, flipping, rolling, repeating, triangles, diagonals, padding.

``cat`` is a primitive (a strided copy per input); ``diagonal`` is a view. ``flip`` (an index
with reversed positions), ``roll`` (``cat`` of two slices), ``tril``/``triu`` (``where`` over an
``arange`` comparison) and ``constant_pad_nd`` (``full`` and ``as_strided_scatter``) are composites
whose decompositions below are their meaning; cpu and vulkan keep fast kernels for them
(``tests/ops/test_composites.py``). Everything else is built from those, the views in
``munet.ops.view`` and ``as_strided_scatter``. Where PyTorch returns views (``split``,
``chunk``, ``unbind``, ``diagonal``, ``broadcast_to``, ``meshgrid``) so does MuNet.
"""

from __future__ import annotations

import math

import numpy as np

from munet import _dtype as D
from munet._tensor import contiguous_strides
from munet.ops._registry import Meta, apply, apply_inplace, define
from munet.ops._utils import broadcast_shapes as _broadcast_shapes
from munet.ops._utils import is_tensor, wrap_dim, wrap_dims
from munet.ops.view import (
    _scatter_into_zeros,
    _view_meta,
    _view_rule,
    as_strided_scatter,
    expand,
    narrow,
    reshape,
    select,
    transpose,
    unsqueeze,
)

__all__ = [
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "broadcast_shapes",
    "broadcast_tensors",
    "broadcast_to",
    "cat",
    "chunk",
    "column_stack",
    "concat",
    "concatenate",
    "diag",
    "diag_embed",
    "diagonal",
    "diff",
    "dsplit",
    "dstack",
    "flip",
    "fliplr",
    "flipud",
    "hsplit",
    "hstack",
    "meshgrid",
    "moveaxis",
    "narrow_copy",
    "ravel",
    "repeat_interleave",
    "roll",
    "rot90",
    "row_stack",
    "split",
    "stack",
    "tensor_split",
    "tile",
    "trace",
    "tril",
    "triu",
    "unbind",
    "vsplit",
    "vstack",
]
__functional__ = ["pad"]
__tensor_methods__ = [
    "broadcast_to",
    "chunk",
    "diag",
    "diag_embed",
    "diagonal",
    "diff",
    "dsplit",
    "flip",
    "fliplr",
    "flipud",
    "hsplit",
    "moveaxis",
    "narrow_copy",
    "ravel",
    "repeat",
    "repeat_interleave",
    "roll",
    "rot90",
    "split",
    "tensor_split",
    "tile",
    "trace",
    "tril",
    "tril_",
    "triu",
    "triu_",
    "unbind",
    "vsplit",
]


def _int_list(values, op: str) -> tuple:
    """``f(1, 2)``, ``f((1, 2))``, ``f([1, 2])``, ``f(Size)`` or a 1-D integer tensor as ints."""
    if len(values) == 1 and (isinstance(values[0], (tuple, list)) or is_tensor(values[0])):
        values = values[0]
        if is_tensor(values):
            values = values.tolist()
            values = values if isinstance(values, list) else [values]
    out = []
    for v in values:
        if not hasattr(v, "__index__") or isinstance(v, bool):
            raise TypeError(f"{op}: expected a sequence of ints, got {type(v).__name__}")
        out.append(v.__index__())
    return tuple(out)


# cat ---------------------------------------------------------------------------------------------


def _is_legacy_empty(shape) -> bool:
    # PyTorch's legacy rule: a 1-D tensor of size 0 may be concatenated with anything.
    return tuple(shape) == (0,)


def _cat_meta(tensors, *, dim, sizes):
    shapes = [tuple(t.shape) for t, s in zip(tensors, sizes) if s is not None]
    if not shapes:
        return Meta((0,), tensors[0].dtype)
    out = list(shapes[0])
    out[dim] = sum(s for s in sizes if s is not None)
    return Meta(tuple(out), tensors[0].dtype)


def _cat_backward(ctx, grad):
    from munet.ops.creation import zeros

    dim, sizes = ctx.attrs["dim"], ctx.attrs["sizes"]
    grads = []
    start = 0
    for need, size in zip(ctx.needs_input_grad, sizes):
        if size is None:
            grads.append(zeros((0,), dtype=grad.dtype, device=grad.device) if need else None)
            continue
        grads.append(narrow(grad, dim, start, size) if need else None)
        start += size
    return grads


cat_op = define(
    "cat", inputs=("tensors",), meta=_cat_meta, backward=_cat_backward, variadic=True, backward_name="CatBackward0"
)


def cat(tensors, dim: int = 0):
    """Concatenate tensors along an existing ``dim`` (dtypes promote; 1-D empty tensors are skipped).

    >>> munet.cat([munet.ones(2, 3), munet.zeros(1, 3)]).shape
    munet.Size([3, 3])
    """
    if is_tensor(tensors) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"cat(): argument 'tensors' must be a tuple or list of Tensors, not {type(tensors).__name__}")
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if not is_tensor(t):
            raise TypeError(f"cat(): expected a list of Tensors, but element {i} is {type(t).__name__}")
        if t.ndim == 0:
            raise RuntimeError(f"cat(): zero-dimensional tensor (at position {i}) cannot be concatenated")
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = D.promote_types(dtype, t.dtype)
    tensors = [t if t.dtype is dtype else t.to(dtype) for t in tensors]
    kept = [i for i, t in enumerate(tensors) if not _is_legacy_empty(t.shape)]
    ref = tensors[kept[0]] if kept else tensors[0]
    d = wrap_dim(dim, ref.ndim, "cat")
    ref_shape = tuple(ref.shape)
    for i in kept:
        shape = tuple(tensors[i].shape)
        if len(shape) != len(ref_shape):
            raise RuntimeError(
                f"cat(): tensors must have same number of dimensions: got {len(ref_shape)} and {len(shape)}"
            )
        for k, (a, b) in enumerate(zip(ref_shape, shape)):
            if k != d and a != b:
                raise RuntimeError(
                    f"cat(): sizes of tensors must match except in dimension {d}. Expected size {a} but got "
                    f"size {b} for tensor number {i} in the list."
                )
    sizes = tuple(tensors[i].shape[d] if i in kept else None for i in range(len(tensors)))
    if not kept:
        sizes = tuple(0 for _ in tensors)
    return apply(cat_op, tensors, dim=d, sizes=sizes)


concat = concatenate = cat


def stack(tensors, dim: int = 0):
    """Join equally shaped tensors along a new ``dim``."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack(): expected a non-empty list of Tensors")
    shape = tuple(tensors[0].shape)
    for i, t in enumerate(tensors):
        if tuple(t.shape) != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 and "
                f"{list(t.shape)} at entry {i}"
            )
    d = wrap_dim(dim, len(shape) + 1, "stack")
    return cat([unsqueeze(t, d) for t in tensors], d)


def _tensors_arg(tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


def atleast_1d(*tensors):
    ts = _tensors_arg(tensors)
    out = [reshape(t, (1,)) if t.ndim == 0 else t for t in ts]
    return out[0] if len(tensors) == 1 and is_tensor(tensors[0]) else tuple(out)


def atleast_2d(*tensors):
    ts = _tensors_arg(tensors)
    out = [reshape(t, (1, 1)) if t.ndim == 0 else unsqueeze(t, 0) if t.ndim == 1 else t for t in ts]
    return out[0] if len(tensors) == 1 and is_tensor(tensors[0]) else tuple(out)


def _to_3d(t):
    if t.ndim == 0:
        return reshape(t, (1, 1, 1))
    if t.ndim == 1:
        return reshape(t, (1, t.shape[0], 1))
    if t.ndim == 2:
        return unsqueeze(t, 2)
    return t


def atleast_3d(*tensors):
    out = [_to_3d(t) for t in _tensors_arg(tensors)]
    return out[0] if len(tensors) == 1 and is_tensor(tensors[0]) else tuple(out)


def hstack(tensors):
    ts = atleast_1d(list(tensors))
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    return cat(atleast_2d(list(tensors)), 0)


row_stack = vstack


def dstack(tensors):
    return cat(atleast_3d(list(tensors)), 2)


def column_stack(tensors):
    ts = [reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in tensors]
    return cat(ts, 1)


# split ---------------------------------------------------------------------------------------------


def _split_sizes(input, sizes, d: int):
    out = []
    start = 0
    for s in sizes:
        out.append(narrow(input, d, start, s))
        start += s
    return tuple(out)


def split(tensor, split_size_or_sections, dim: int = 0):
    """Views of consecutive pieces: equal ``int`` sizes (last may be smaller) or a list of sizes."""
    d = wrap_dim(dim, tensor.ndim, "split")
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)) or is_tensor(split_size_or_sections):
        sizes = _int_list((split_size_or_sections,), "split")
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension "
                f"{d}), but got split_sizes={list(sizes)}"
            )
        return _split_sizes(tensor, sizes, d)
    size = int(split_size_or_sections)
    if size < 0 or (size == 0 and n != 0):
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={size}")
    if n == 0:
        return (narrow(tensor, d, 0, 0),)
    sizes = [size] * (n // size) + ([n % size] if n % size else [])
    return _split_sizes(tensor, sizes, d)


def chunk(input, chunks: int, dim: int = 0):
    """At most ``chunks`` views of size ``ceil(n / chunks)`` along ``dim``."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, input.ndim, "chunk")
    n = input.shape[d]
    if n == 0:
        return tuple(narrow(input, d, 0, 0) for _ in range(chunks))
    return split(input, math.ceil(n / chunks), d)


def tensor_split(input, indices_or_sections, dim: int = 0):
    """``int`` sections (the first ``n % sections`` one bigger) or split points."""
    d = wrap_dim(dim, input.ndim, "tensor_split")
    n = input.shape[d]
    if is_tensor(indices_or_sections) and indices_or_sections.ndim == 0:
        indices_or_sections = indices_or_sections.item()
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got {sections}")
        small, extra = divmod(n, sections)
        sizes = [small + 1] * extra + [small] * (sections - extra)
        return _split_sizes(input, sizes, d)
    points = _int_list((indices_or_sections,), "tensor_split")
    out = []
    start = 0
    for p in list(points) + [n]:
        # Piece i is ``input[points[i-1]:points[i]]`` with Python slice clamping.
        stop = min(max(p + n if p < 0 else p, 0), n)
        out.append(narrow(input, d, start, max(stop - start, 0)))
        start = stop
    return tuple(out)


def _split_family(name: str, dim: int, min_ndim: int):
    def fn(input, indices_or_sections):
        if input.ndim < min_ndim:
            raise RuntimeError(
                f"torch.{name} requires a tensor with at least {min_ndim} dimension, but got a tensor with "
                f"{input.ndim} dimensions!"
            )
        d = 0 if name == "hsplit" and input.ndim == 1 else dim
        if isinstance(indices_or_sections, int) and input.shape[d] % indices_or_sections:
            raise RuntimeError(
                f"torch.{name} attempted to split along dimension {d}, but the size of the dimension "
                f"{input.shape[d]} is not divisible by the split_size {indices_or_sections}!"
            )
        return tensor_split(input, indices_or_sections, d)

    fn.__name__ = name
    return fn


hsplit = _split_family("hsplit", 1, 1)
vsplit = _split_family("vsplit", 0, 2)
dsplit = _split_family("dsplit", 2, 3)


def unbind(input, dim: int = 0):
    """The slices along ``dim`` as a tuple of views."""
    d = wrap_dim(dim, input.ndim, "unbind")
    return tuple(select(input, d, i) for i in range(input.shape[d]))


def narrow_copy(input, dim: int, start: int, length: int):
    return narrow(input, dim, start, length).clone()


def ravel(input):
    return reshape(input, (-1,))


def moveaxis(input, source, destination):
    return input.movedim(source, destination)


# flip, roll, rot90 -------------------------------------------------------------------------------


def _same_meta(x, **_):
    return Meta(tuple(x.shape), x.dtype)


def _flip_decomposition(x, *, dims):
    """``x`` read along each of ``dims`` at the reversed positions ``n - 1, ..., 0``."""
    from munet.ops.creation import arange
    from munet.ops.indexing import index_select

    out = x
    for d in dims:
        n = x.shape[d]
        if n > 1:
            out = index_select(out, d, arange(n - 1, -1, -1, device=x.device))
    return out.clone() if out is x else out


flip_op = define(
    "flip",
    meta=_same_meta,
    backward=lambda ctx, g: flip(g, ctx.attrs["dims"]),
    backward_name="FlipBackward0",
    decomposition=_flip_decomposition,
)


def flip(input, *dims):
    """A copy with the order of elements along ``dims`` reversed."""
    dims = wrap_dims(_int_list(dims, "flip"), input.ndim, "flip")
    return apply(flip_op, input, dims=dims)


def fliplr(input):
    if input.ndim < 2:
        raise RuntimeError(f"fliplr: input tensor must be >= 2-d, got {input.ndim}-d")
    return flip(input, (1,))


def flipud(input):
    if input.ndim < 1:
        raise RuntimeError("flipud: input tensor must be >= 1-d, got 0-d")
    return flip(input, (0,))


def _roll_backward(ctx, grad):
    return roll(grad, tuple(-s for s in ctx.attrs["shifts"]), ctx.attrs["dims"])


def _roll_decomposition(x, *, shifts, dims):
    """Per dim, the last ``shift % n`` entries joined before the rest (``cat``); ``dims=None``
    rolls the flattened tensor."""
    if dims is None:
        return _roll_decomposition(reshape(x, (-1,)), shifts=shifts, dims=(0,)).reshape(tuple(x.shape))
    out = x
    for s, d in zip(shifts, dims):
        n = x.shape[d]
        s = s % n if n else 0
        if s:
            out = cat([narrow(out, d, n - s, s), narrow(out, d, 0, n - s)], d)
    return out.clone() if out is x else out


roll_op = define(
    "roll", meta=_same_meta, backward=_roll_backward, backward_name="RollBackward0", decomposition=_roll_decomposition
)


def roll(input, shifts, dims=None):
    """Shift elements cyclically along ``dims`` (the flattened tensor when ``dims`` is None)."""
    shifts = (shifts,) if isinstance(shifts, int) else _int_list((shifts,), "roll")
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll: shifts must be a single int when dims is not given, got {list(shifts)}")
        return apply(roll_op, input, shifts=shifts, dims=None)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims: {len(dims)}")
    dims = tuple(wrap_dim(d, input.ndim, "roll") for d in dims)
    return apply(roll_op, input, shifts=shifts, dims=dims)


def rot90(input, k: int = 1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``, from the first towards the second axis."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"rot90: expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"rot90: expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (wrap_dim(d, input.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise RuntimeError(f"rot90: expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return transpose(flip(input, (d1,)), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return transpose(flip(input, (d0,)), d0, d1)
    return input.clone()


# repeat, tile, repeat_interleave -----------------------------------------------------------------


def repeat(self, *sizes):
    """A copy tiled ``sizes[i]`` times along each dim (leading new dims allowed), like ``Tensor.repeat``."""
    reps = _int_list(sizes, "repeat")
    if len(reps) < self.ndim:
        raise RuntimeError(
            f"repeat: number of dimensions of repeat dims ({len(reps)}) can not be smaller than number of "
            f"dimensions of tensor ({self.ndim})"
        )
    if any(r < 0 for r in reps):
        raise RuntimeError(f"repeat: repeats can not be negative, got {list(reps)}")
    shape = (1,) * (len(reps) - self.ndim) + tuple(self.shape)
    # Each dim n becomes (r, n): expand a singleton in front of it, then merge the pair.
    interleaved = tuple(v for n in shape for v in (1, n))
    target = tuple(v for r, n in zip(reps, shape) for v in (r, n))
    x = expand(reshape(self, interleaved), target)
    out = reshape(x.contiguous(), tuple(r * n for r, n in zip(reps, shape)))
    if out._storage is self._storage:
        out = out.clone()
    return out


def tile(input, *dims):
    reps = _int_list(dims, "tile")
    reps = (1,) * (input.ndim - len(reps)) + reps
    return repeat(input, reps)


def _one_hot_select(x, d: int, index: np.ndarray):
    """``x.index_select(d, index)`` as a one-hot contraction (used while indexing has no index_select)."""
    from munet.ops.creation import tensor

    onehot = (np.arange(x.shape[d])[:, None] == index[None, :]).astype(x.dtype.np)
    return x.movedim(d, -1).matmul(tensor(onehot, dtype=x.dtype, device=x.device)).movedim(-1, d)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element ``repeats`` times (an int, or a 1-D tensor of counts per element) along ``dim``.

    ``repeat_interleave(repeats_tensor)`` alone returns the indices ``0..n-1`` repeated.
    """
    from munet.ops.creation import tensor

    if repeats is None:
        counts = input.detach().cpu().numpy()
        if counts.ndim != 1 or counts.dtype.kind not in "iu":
            raise RuntimeError("repeat_interleave: repeats must be a 1-D integer tensor")
        return tensor(np.repeat(np.arange(counts.shape[0]), counts), dtype=D.int64, device=input.device)
    if dim is None:
        input = reshape(input, (-1,))
        dim = 0
    d = wrap_dim(dim, input.ndim, "repeat_interleave")
    if input.ndim == 0:
        input = reshape(input, (1,))
    n = input.shape[d]
    if is_tensor(repeats):
        if repeats.ndim > 1 or repeats.dtype.is_floating_point:
            raise RuntimeError("repeat_interleave: repeats must be 0-dim or 1-dim tensor of integers")
        counts = repeats.detach().cpu().numpy().reshape(-1).astype(np.int64)
        if counts.size == 1:
            repeats = int(counts[0])
        else:
            if counts.size != n:
                raise RuntimeError(
                    f"repeat_interleave: repeats must have the same size as input along dim, but got "
                    f"repeats.size(0) = {counts.size} and input.size({d}) = {n}"
                )
            if (counts < 0).any():
                raise RuntimeError("repeat_interleave: repeats can not be negative")
            index = np.repeat(np.arange(n), counts)
            if hasattr(input, "index_select"):
                return input.index_select(d, tensor(index, dtype=D.int64, device=input.device))
            return _one_hot_select(input, d, index)
    repeats = int(repeats)
    if repeats < 0:
        raise RuntimeError(f"repeat_interleave: repeats can not be negative, got {repeats}")
    shape = tuple(input.shape)
    x = expand(unsqueeze(input, d + 1), shape[: d + 1] + (repeats,) + shape[d + 1 :])
    return reshape(x.contiguous(), shape[:d] + (n * repeats,) + shape[d + 1 :])


# tril, triu ---------------------------------------------------------------------------------------


def _tri_meta(name):
    def meta(x, *, diagonal):
        if x.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions, got shape {list(x.shape)}")
        return Meta(tuple(x.shape), x.dtype)

    return meta


def _tri_decomposition(upper: bool):
    def decomposition(x, *, diagonal):
        """``where(col - row >= diagonal, x, 0)`` (``<=`` for tril) over the last two dims: a
        masked NaN becomes 0, a masked -0.0 becomes +0.0."""
        from munet.ops.creation import arange, zeros
        from munet.ops.elementwise import where

        rows, cols = x.shape[-2:]
        offset = arange(cols, device=x.device) - arange(rows, device=x.device).reshape(rows, 1)
        keep = offset >= diagonal if upper else offset <= diagonal
        return where(keep, x, zeros((), dtype=x.dtype, device=x.device))

    return decomposition


tril_op = define(
    "tril",
    meta=_tri_meta("tril"),
    backward=lambda ctx, g: tril(g, ctx.attrs["diagonal"]),
    backward_name="TrilBackward0",
    decomposition=_tri_decomposition(upper=False),
)
triu_op = define(
    "triu",
    meta=_tri_meta("triu"),
    backward=lambda ctx, g: triu(g, ctx.attrs["diagonal"]),
    backward_name="TriuBackward0",
    decomposition=_tri_decomposition(upper=True),
)


def tril(input, diagonal: int = 0):
    """The lower triangle (on and below ``diagonal``) of the last two dims; the rest zero."""
    return apply(tril_op, input, diagonal=int(diagonal))


def triu(input, diagonal: int = 0):
    """The upper triangle (on and above ``diagonal``) of the last two dims; the rest zero."""
    return apply(triu_op, input, diagonal=int(diagonal))


def tril_(self, diagonal: int = 0):
    return apply_inplace(tril_op, self, diagonal=int(diagonal))


def triu_(self, diagonal: int = 0):
    return apply_inplace(triu_op, self, diagonal=int(diagonal))


# diagonals ---------------------------------------------------------------------------------------


def _diagonal_geometry(shape, stride, offset, *, offset_diag, dim1, dim2):
    n1, n2 = shape[dim1], shape[dim2]
    if offset_diag >= 0:
        length = max(0, min(n1, n2 - offset_diag))
        start = offset_diag * stride[dim2]
    else:
        length = max(0, min(n1 + offset_diag, n2))
        start = -offset_diag * stride[dim1]
    keep = [i for i in range(len(shape)) if i not in (dim1, dim2)]
    out_shape = tuple(shape[i] for i in keep) + (length,)
    out_stride = tuple(stride[i] for i in keep) + (stride[dim1] + stride[dim2],)
    return out_shape, out_stride, offset + (start if length else 0)


diagonal_op = define(
    "diagonal",
    meta=_view_meta(_diagonal_geometry),
    view=_view_rule(_diagonal_geometry),
    backward=_scatter_into_zeros(_diagonal_geometry),
    backward_name="DiagonalBackward0",
)


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """A view of the diagonal of the (``dim1``, ``dim2``) planes, appended as the last dim."""
    a, b = wrap_dim(dim1, input.ndim, "diagonal"), wrap_dim(dim2, input.ndim, "diagonal")
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply(diagonal_op, input, offset_diag=int(offset), dim1=a, dim2=b)


def diag_embed(input, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """Zeros with the last dim of ``input`` written on the diagonal of the (``dim1``, ``dim2``) planes."""
    from munet.ops.creation import zeros

    ndim = input.ndim + 1
    a, b = wrap_dim(dim1, ndim, "diag_embed"), wrap_dim(dim2, ndim, "diag_embed")
    if a == b:
        raise RuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    if input.ndim == 0:
        raise RuntimeError("diag_embed: input must have at least 1 dimension, got a 0-d tensor")
    n = input.shape[-1] + abs(offset)
    rest = iter(input.shape[:-1])
    shape = tuple(n if i in (a, b) else next(rest) for i in range(ndim))
    size, stride, start = _diagonal_geometry(shape, contiguous_strides(shape), 0, offset_diag=offset, dim1=a, dim2=b)
    base = zeros(shape, dtype=input.dtype, device=input.device)
    return as_strided_scatter(base, input, size, stride, start)


def diag(input, diagonal: int = 0):
    """A 1-D input becomes a square matrix with it on ``diagonal``; a matrix gives that diagonal (a copy)."""
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return globals()["diagonal"](input, diagonal).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def trace(input):
    """Sum of the main diagonal of a matrix."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return diagonal(input).sum()


# broadcasting and grids ------------------------------------------------------------------------------


def broadcast_to(input, size):
    """A view of ``input`` expanded to ``size`` (``-1`` keeps a dim)."""
    return expand(input, tuple(size))


def broadcast_shapes(*shapes):
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    from munet._tensor import Size

    return Size(_broadcast_shapes(*shapes, op="broadcast_shapes"))


def broadcast_tensors(*tensors):
    """Views of all tensors expanded to their common broadcast shape."""
    tensors = _tensors_arg(tensors)
    shape = _broadcast_shapes(*(tuple(t.shape) for t in tensors), op="broadcast_tensors")
    return tuple(expand(t, shape) for t in tensors)


def meshgrid(*tensors, indexing: str | None = None):
    """Coordinate grids (expanded views) from 0-D/1-D tensors; ``indexing`` 'ij' (default) or 'xy'."""
    tensors = _tensors_arg(tensors)
    indexing = "ij" if indexing is None else indexing
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    if not tensors:
        raise RuntimeError("torch.meshgrid: expects a non-empty TensorList")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.ndim}D")
    swap = indexing == "xy" and len(tensors) >= 2
    if swap:
        tensors = [tensors[1], tensors[0], *tensors[2:]]
    shape = tuple(t.numel() for t in tensors)
    grids = []
    for i, t in enumerate(tensors):
        view_shape = tuple(shape[i] if j == i else 1 for j in range(len(shape)))
        grids.append(expand(reshape(t, view_shape), shape))
    if swap:
        grids = [grids[1], grids[0], *grids[2:]]
    return tuple(grids)


# pad -------------------------------------------------------------------------------------------------


def _constant_pad_meta(x, *, pad, value):
    return Meta(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pad)), x.dtype)


def _constant_pad_backward(ctx, grad):
    spec = tuple(("s", lo, n, 1) for n, (lo, _) in zip(ctx.input_shapes[0], ctx.attrs["pad"]))
    from munet.ops.view import index_basic

    return index_basic(grad, spec)


def _constant_pad_decomposition(x, *, pad, value):
    """``value`` everywhere (``full``), ``x`` copied into the strided region past the low pads."""
    from munet.ops.creation import full

    shape = _constant_pad_meta(x, pad=pad, value=value).shape
    out = full(shape, value, dtype=x.dtype, device=x.device)
    strides = contiguous_strides(shape)
    offset = sum(lo * st for (lo, _), st in zip(pad, strides))
    return as_strided_scatter(out, x, tuple(x.shape), strides, offset)


constant_pad_op = define(
    "constant_pad_nd",
    meta=_constant_pad_meta,
    backward=_constant_pad_backward,
    backward_name="ConstantPadNdBackward0",
    decomposition=_constant_pad_decomposition,
)


def _crop(input, pairs):
    """Apply negative padding (cropping); returns the input and the remaining non-negative pairs."""
    out = []
    for d, (lo, hi) in enumerate(pairs):
        n = input.shape[d]
        start, stop = max(-lo, 0), n - max(-hi, 0)
        if start or stop != n:
            if stop < start:
                raise RuntimeError(
                    f"pad: the input size {n} at dimension {d}, plus negative padding {lo} and {hi}, resulted in "
                    f"a negative output size {n + lo + hi}"
                )
            input = narrow(input, d, start, stop - start)
        out.append((max(lo, 0), max(hi, 0)))
    return input, out


def _reflect(x, d, lo, hi):
    n = x.shape[d]
    if lo >= n or hi >= n:
        raise RuntimeError(
            f"Argument #4: Padding size should be less than the corresponding input dimension, but got: padding "
            f"({lo}, {hi}) at dimension {d} of input {list(x.shape)}"
        )
    parts = [flip(narrow(x, d, 1, lo), (d,))] if lo else []
    parts.append(x)
    if hi:
        parts.append(flip(narrow(x, d, n - 1 - hi, hi), (d,)))
    return cat(parts, d)


def _replicate(x, d, lo, hi):
    n = x.shape[d]
    if n == 0:
        raise RuntimeError(
            f"pad: replicate padding of dimension {d} of input {list(x.shape)} needs a non-empty dimension"
        )
    shape = list(x.shape)
    parts = []
    if lo:
        parts.append(expand(narrow(x, d, 0, 1), tuple(shape[:d] + [lo] + shape[d + 1 :])))
    parts.append(x)
    if hi:
        parts.append(expand(narrow(x, d, n - 1, 1), tuple(shape[:d] + [hi] + shape[d + 1 :])))
    return cat(parts, d)


def _circular(x, d, lo, hi):
    n = x.shape[d]
    if lo > n or hi > n:
        raise RuntimeError("Padding value causes wrapping around more than once.")
    parts = [narrow(x, d, n - lo, lo)] if lo else []
    parts.append(x)
    if hi:
        parts.append(narrow(x, d, 0, hi))
    return cat(parts, d)


_PAD_MODES = {"reflect": _reflect, "replicate": _replicate, "circular": _circular}


def pad(input, pad, mode: str = "constant", value: float | None = None):
    """Pad the last ``len(pad) // 2`` dims; ``pad`` lists (left, right) from the last dim backwards.

    >>> F.pad(x, (1, 1, 2, 0))   # last dim +1 on both sides, second-to-last +2 on top
    """
    pad = _int_list((pad,), "pad")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    k = len(pad) // 2
    if k > input.ndim:
        raise RuntimeError(
            f"Padding length should be less than or equal to two times the input dimension but got padding "
            f"length {len(pad)} and input of dimension {input.ndim}"
        )
    if mode != "constant":
        if mode not in _PAD_MODES:
            raise NotImplementedError(f"Unrecognised padding mode {mode}")
        if value is not None and value != 0:
            raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
        if not (1 <= k <= 3 and input.ndim in (k + 1, k + 2)):
            raise NotImplementedError(
                f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
                "Supported combinations for non-constant padding:\n"
                "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
            )
    pairs = [(0, 0)] * (input.ndim - k) + [(pad[2 * i], pad[2 * i + 1]) for i in reversed(range(k))]
    x, pairs = _crop(input, pairs)
    if mode == "constant":
        if all(p == (0, 0) for p in pairs):
            return x.clone()
        return apply(constant_pad_op, x, pad=tuple(pairs), value=0 if value is None else value)
    fn = _PAD_MODES[mode]
    for d, (lo, hi) in enumerate(pairs):
        if lo or hi:
            x = fn(x, d, lo, hi)
    return x if x is not input else x.clone()


def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``, after joining ``prepend`` and ``append``
    there (``input[i + 1] - input[i]``; for bool, ``!=``)."""
    if not is_tensor(input) or input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(dim, input.ndim, "diff")
    x = cat([t for t in (prepend, input, append) if t is not None], dim=d)
    for _ in range(n):
        length = x.shape[d]
        if length == 0:
            break
        later, earlier = x.narrow(d, 1, length - 1), x.narrow(d, 0, length - 1)
        x = later != earlier if x.dtype is D.bool_ else later - earlier
    return x
