"""View ops (new shape/strides/offset over the same storage) and copies.

Views are not kernels: each op here gives a geometry rule, and ``apply`` makes a tensor that
shares storage. Their gradients are views, reshapes or the two scatter primitives defined
at the bottom (``as_strided_scatter`` and ``strided_scatter_add``).
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np

from munet import _dtype as D
from munet._memory_format import (
    channels_last_order,
    channels_last_strides,
    check_memory_format,
    contiguous_format,
    preserve_format,
)
from munet._tensor import contiguous_strides
from munet.ops._registry import Meta, apply, define
from munet.ops._utils import is_tensor, reduce_grad, wrap_dim

__all__ = [
    "as_strided",
    "as_strided_",
    "as_strided_scatter",
    "clone",
    "flatten",
    "movedim",
    "narrow",
    "permute",
    "reshape",
    "select",
    "squeeze",
    "swapaxes",
    "swapdims",
    "t",
    "transpose",
    "unflatten",
    "unsqueeze",
]
__tensor_methods__ = [
    "as_strided",
    "as_strided_",
    "clone",
    "contiguous",
    "expand",
    "expand_as",
    "flatten",
    "movedim",
    "narrow",
    "permute",
    "reshape",
    "reshape_as",
    "select",
    "squeeze",
    "swapaxes",
    "swapaxes_",
    "swapdims",
    "swapdims_",
    "squeeze_",
    "t",
    "t_",
    "transpose",
    "transpose_",
    "unflatten",
    "unfold",
    "unsqueeze",
    "unsqueeze_",
    "view",
    "view_as",
]


def _become_view(self, out, op: str):
    """PyTorch's in-place view ops (``unsqueeze_``, ``t_``, ...): ``self`` takes the geometry and the
    autograd history of ``out``, a view of it, and its version is bumped."""
    from munet.autograd.grad_mode import is_grad_enabled
    from munet.ops._registry import refuse_under_trace

    refuse_under_trace(op, f"in-place view ops are not supported inside munet.compile; use {op[:-1]}")
    if is_grad_enabled() and self._grad_fn is None and self._requires_grad:
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation.")
    self._shape, self._stride, self._offset, self._data = out._shape, out._stride, out._offset, out._data
    if out._grad_fn is not None:
        self._grad_fn, self._output_nr = out._grad_fn, out._output_nr
    self._storage.version += 1
    return self


def unsqueeze_(self, dim: int):
    return _become_view(self, unsqueeze(self, dim), "unsqueeze_")


def squeeze_(self, dim=None):
    return _become_view(self, squeeze(self, dim), "squeeze_")


def transpose_(self, dim0: int, dim1: int):
    return _become_view(self, transpose(self, dim0, dim1), "transpose_")


def swapdims_(self, dim0: int, dim1: int):
    return _become_view(self, transpose(self, dim0, dim1), "swapdims_")


def swapaxes_(self, axis0: int, axis1: int):
    return _become_view(self, transpose(self, axis0, axis1), "swapaxes_")


def t_(self):
    return _become_view(self, t(self), "t_")


def _same_meta(x, **_):
    return Meta(x.shape, x.dtype)


def _view_meta(geometry):
    def meta(x, **attrs):
        shape, _, _ = geometry(tuple(x._shape), x._stride, x._offset, **attrs)
        return Meta(tuple(shape), x._dtype)

    return meta


def _view_rule(geometry):
    """The view rule of ``geometry(shape, stride, offset, **attrs)``; ``rule.geometry`` is
    ``geometry`` itself (``apply`` calls it directly: one call and one copy of the attrs less)."""

    def rule(x, **attrs):
        return geometry(tuple(x._shape), x._stride, x._offset, **attrs)

    rule.geometry = geometry
    return rule


def _scatter_into_zeros(geometry):
    """Backward of a non-overlapping view: the gradient placed into zeros of the input's shape."""

    def backward(ctx, grad):
        from munet.ops.creation import zeros

        shape = tuple(ctx.input_shapes[0])
        size, stride, offset = geometry(shape, contiguous_strides(shape), 0, **ctx.attrs)
        # one zero expanded, not a tensor of zeros: the scatter's copy of its input is then a fill
        base = expand(zeros((), dtype=grad.dtype, device=grad.device), shape)
        return as_strided_scatter(base, grad, size, stride, offset)

    return backward


def _scatter_add_into_zeros(geometry):
    """Backward of a view that may overlap itself (as_strided, unfold): overlapping grads add."""

    def backward(ctx, grad):
        shape = tuple(ctx.input_shapes[0])
        size, stride, offset = geometry(shape, contiguous_strides(shape), 0, **ctx.attrs)
        return apply(
            strided_scatter_add_op, grad, shape=shape, size=tuple(size), stride=tuple(stride), storage_offset=offset
        )

    return backward


# reshape ----------------------------------------------------------------------------------------


def _infer_size(shape, numel: int, op: str) -> tuple:
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError(f"{op}: only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise RuntimeError(f"{op}: invalid shape dimension {s}")
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"{op}: shape '{shape}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"{op}: shape '{shape}' is invalid for input of size {numel}")
    return tuple(shape)


def _view_strides(old_shape, old_stride, new_shape):
    """Strides making ``new_shape`` a view of the given geometry, or None if impossible."""
    numel = 1
    for s in old_shape:
        numel *= s
    if numel == 0 or not old_shape:
        return contiguous_strides(new_shape)
    # Group old dims into contiguous chunks and match new dims against them (PyTorch's rule).
    new_stride = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_stride[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1 and old_stride[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_stride[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_stride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_stride)


def _reshape_geometry(shape, stride, offset, *, shape_out):
    new_stride = _view_strides(shape, stride, shape_out)
    if new_stride is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead."
        )
    return shape_out, new_stride, offset


view_op = define(
    "view",
    meta=_view_meta(_reshape_geometry),
    view=_view_rule(_reshape_geometry),
    backward=lambda ctx, grad: grad.reshape(ctx.input_shapes[0]),
    backward_name="ViewBackward0",
)


def view(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        return _view_as_dtype(self, shape[0])
    shape = _shape_args(shape)
    shape = _infer_size(shape, self.numel(), "view")
    if shape == tuple(self.shape):
        return (
            apply(view_op, self, shape_out=shape)
            if self._requires_grad
            else self._view(shape, self.stride(), self._offset)
        )
    return apply(view_op, self, shape_out=shape)


def _view_as_dtype(self, dtype):
    """``view(dtype)``: the same bytes read as ``dtype``, sharing storage and version counter, as
    PyTorch's. With another element size the last dim (stride 1) is rescaled, and the offset and
    other strides must be whole elements of the new size. The result has no autograd history (as
    PyTorch's). cpu only: other devices hold some dtypes in other widths (vulkan: 64-bit as 32)."""
    old, new = self.dtype, dtype
    if self.device.type != "cpu":
        raise RuntimeError(f"view(dtype): viewing {old} as {new} is supported on cpu only, not on '{self.device}'")
    shape, stride, offset = list(self.shape), list(self.stride()), self.storage_offset()
    if old.itemsize != new.itemsize:
        what = f"to view {_type_name(old)} as {_type_name(new)} (different element sizes)"
        if not shape:
            raise RuntimeError(f"self.dim() cannot be 0 {what}")
        if stride[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {stride[-1]}")
        if new.itemsize > old.itemsize:
            ratio = new.itemsize // old.itemsize
            if shape[-1] % ratio:
                raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {what}, but got {shape[-1]}")
            if offset % ratio:
                raise RuntimeError(f"self.storage_offset() must be divisible by {ratio} {what}, but got {offset}")
            for i, st in enumerate(stride[:-1]):
                if st % ratio:
                    raise RuntimeError(f"self.stride({i}) must be divisible by {ratio} {what}, but got {st}")
            shape[-1], offset = shape[-1] // ratio, offset // ratio
            stride = [st // ratio for st in stride[:-1]] + [1]
        else:
            ratio = old.itemsize // new.itemsize
            shape[-1], offset = shape[-1] * ratio, offset * ratio
            stride = [st * ratio for st in stride[:-1]] + [1]
    storage = self._storage
    data = storage.backend.view(storage.data, tuple(shape), tuple(stride), offset, new)
    from munet._tensor import Tensor

    return Tensor._make(
        storage, tuple(shape), tuple(stride), offset, new, data, self._base if self._base is not None else self
    )


def _type_name(dtype) -> str:
    """PyTorch's scalar type name in view(dtype)'s messages (``Float``, ``Short``, ``BFloat16``)."""
    from munet._compat import legacy_type_name

    return legacy_type_name(dtype).removesuffix("Tensor")


def _shape_args(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple([s if type(s) is int else int(s) for s in shape])


def reshape(input, *shape):
    """A view when the strides allow it, otherwise a contiguous copy."""
    shape = _infer_size(_shape_args(shape), input.numel(), "reshape")
    if _view_strides(tuple(input.shape), input.stride(), shape) is None:
        input = contiguous(input)
    return apply(view_op, input, shape_out=shape)


def view_as(self, other):
    return view(self, tuple(other.shape))


def reshape_as(self, other):
    return reshape(self, tuple(other.shape))


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    if input.ndim == 0:
        return reshape(input, (1,))
    s = wrap_dim(start_dim, input.ndim, "flatten")
    e = wrap_dim(end_dim, input.ndim, "flatten")
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = tuple(input.shape)
    n = 1
    for d in shape[s : e + 1]:
        n *= d
    return reshape(input, shape[:s] + (n,) + shape[e + 1 :])


def unflatten(input, dim: int, sizes):
    d = wrap_dim(dim, input.ndim, "unflatten")
    shape = tuple(input.shape)
    sizes = _infer_size(tuple(sizes), shape[d], "unflatten")
    return view(input, shape[:d] + sizes + shape[d + 1 :])


def squeeze(input, dim=None):
    shape = tuple(input.shape)
    if dim is None:
        dims = {i for i, s in enumerate(shape) if s == 1}
    else:
        dims = {wrap_dim(d, input.ndim, "squeeze") for d in ((dim,) if isinstance(dim, int) else dim)}
        dims = {d for d in dims if d < len(shape) and shape[d] == 1}
    if not dims:
        return view(input, shape) if input._requires_grad else input._view(shape, input.stride(), input._offset)
    return view(input, tuple(s for i, s in enumerate(shape) if i not in dims))


def unsqueeze(input, dim: int):
    d = wrap_dim(dim, input.ndim + 1, "unsqueeze")
    shape = tuple(input.shape)
    return view(input, shape[:d] + (1,) + shape[d:])


# permute -----------------------------------------------------------------------------------------


def _permute_geometry(shape, stride, offset, *, dims):
    if len(dims) < 2:
        return tuple(shape), tuple(stride), offset
    pick = itemgetter(*dims)  # (a tuple of the picked items for two or more dims)
    return pick(shape), pick(stride), offset


def _permute_backward(ctx, grad):
    dims = ctx.attrs["dims"]
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return permute(grad, inverse)


permute_op = define(
    "permute",
    meta=_view_meta(_permute_geometry),
    view=_view_rule(_permute_geometry),
    backward=_permute_backward,
    backward_name="PermuteBackward0",
)


def permute(input, *dims):
    dims = _shape_args(dims)
    if len(dims) != input.ndim:
        raise RuntimeError(
            f"permute: number of dims don't match in permute (input has {input.ndim} dims, got {len(dims)})"
        )
    dims = tuple(wrap_dim(d, input.ndim, "permute") for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"permute: repeated dim in {list(dims)}")
    return apply(permute_op, input, dims=dims)


def transpose(input, dim0: int, dim1: int):
    n = len(input._shape)
    if n == 0:
        return input
    a, b = wrap_dim(dim0, n, "transpose"), wrap_dim(dim1, n, "transpose")
    if n == 2:
        return apply(permute_op, input, dims=(0, 1) if a == b else (1, 0))
    dims = list(range(n))
    dims[a], dims[b] = dims[b], dims[a]
    return apply(permute_op, input, dims=tuple(dims))


swapaxes = swapdims = transpose


def t(input):
    n = len(input._shape)
    if n > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {n}D")
    return apply(permute_op, input, dims=(1, 0)) if n == 2 else input


def movedim(input, source, destination):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    n = input.ndim
    src = [wrap_dim(d, n, "movedim") for d in src]
    dst = [wrap_dim(d, n, "movedim") for d in dst]
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [o if o is not None else next(rest) for o in order]
    return permute(input, order)


# expand -------------------------------------------------------------------------------------------


def _expand_geometry(shape, stride, offset, *, size):
    lead = len(size) - len(shape)
    out_stride = []
    for i, n in enumerate(size):
        if i < lead:
            out_stride.append(0)
            continue
        old = shape[i - lead]
        out_stride.append(stride[i - lead] if old == n else 0)
    return tuple(size), tuple(out_stride), offset


expand_op = define(
    "expand",
    meta=_view_meta(_expand_geometry),
    view=_view_rule(_expand_geometry),
    backward=lambda ctx, grad: reduce_grad(grad, ctx.input_shapes[0]),
    backward_name="ExpandBackward0",
)


def expand(self, *sizes):
    sizes = _shape_args(sizes)
    shape = tuple(self.shape)
    if len(sizes) < len(shape):
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({len(shape)})"
        )
    lead = len(sizes) - len(shape)
    out = []
    for i, n in enumerate(sizes):
        if i < lead:
            if n < 0:
                raise RuntimeError(f"expand: -1 is not allowed in a leading, non-existing dimension {i}")
            out.append(n)
            continue
        old = shape[i - lead]
        n = old if n == -1 else n
        if old != n and old != 1:
            raise RuntimeError(
                f"expand: the expanded size of the tensor ({n}) must match the existing size ({old}) at "
                f"non-singleton dimension {i}. Target sizes: {list(sizes)}. Tensor sizes: {list(shape)}"
            )
        out.append(n)
    out = tuple(out)
    if out == shape:
        return self
    return apply(expand_op, self, size=out)


def expand_as(self, other):
    return expand(self, tuple(other.shape))


# slicing ------------------------------------------------------------------------------------------


def _index_geometry(shape, stride, offset, *, spec):
    """Geometry of basic indexing. ``spec`` items: ("i", index), ("s", start, length, step), ("n",)."""
    out_shape, out_stride = [], []
    d = 0
    for item in spec:
        kind = item[0]
        if kind == "s":
            _, start, length, step = item
            s = stride[d]
            offset += start * s
            out_shape.append(length)
            out_stride.append(s * step)
            d += 1
        elif kind == "i":
            offset += item[1] * stride[d]
            d += 1
        else:
            out_shape.append(1)
            out_stride.append(stride[d] * shape[d] if d < len(shape) else 1)
    if d < len(shape):  # the dims the index leaves whole
        out_shape.extend(shape[d:])
        out_stride.extend(stride[d:])
    return tuple(out_shape), tuple(out_stride), offset


index_view_op = define(
    "index_view",
    meta=_view_meta(_index_geometry),
    view=_view_rule(_index_geometry),
    backward=_scatter_into_zeros(_index_geometry),
    backward_name="SliceBackward0",
)


def basic_item(item):
    """``item`` as basic indexing reads it, or ``ADVANCED``: NumPy integers, objects with
    ``__index__`` and 0-dim integer tensors are ints (PyTorch selects with them, making a view)."""
    if item is None or item is Ellipsis or isinstance(item, slice):
        return item
    if isinstance(item, (bool, np.bool_)):
        return ADVANCED
    if isinstance(item, (int, np.integer)):
        return int(item)
    if is_tensor(item):
        if item.ndim == 0 and not item.dtype.is_floating_point and item.dtype is not D.bool_:
            return int(item.item())
        return ADVANCED
    if hasattr(item, "__index__") and not hasattr(item, "shape"):
        return item.__index__()
    return ADVANCED


ADVANCED = object()  # what ``basic_item`` answers for a part of an index that basic indexing cannot take


def basic_index_spec(shape, index, normalized: bool = False) -> tuple | None:
    """Normalize a basic index (ints, slices, None, Ellipsis) to a spec; None if it is advanced.
    (``normalized``: the index is ``_normalized_index_spec``'s, of slices, ints and None only.)"""
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) > len(shape) and not normalized:  # too many, unless some are None
        return _normalized_index_spec(shape, index)
    spec = []
    d = 0
    for item in index:
        if type(item) is slice:
            start, stop, step = item.indices(shape[d])
            if step <= 0:  # (a zero step indices() refused already)
                raise ValueError("step must be greater than zero")
            length = (stop - start + step - 1) // step
            spec.append(("s", start, length if length > 0 else 0, step))
            d += 1
        elif type(item) is int:
            n = shape[d]
            if not -n <= item < n:
                raise IndexError(f"index {item} is out of bounds for dimension {d} with size {n}")
            spec.append(("i", item % n))
            d += 1
        elif item is None:
            spec.append(("n",))
        else:  # an Ellipsis or a kind that needs normalizing
            return _normalized_index_spec(shape, index)
    return tuple(spec)


def _normalized_index_spec(shape, index) -> tuple | None:
    """``basic_index_spec`` of an index with an Ellipsis, more items than dims or items to normalize
    (``basic_item``): its Ellipsis expanded into full slices."""
    index = [basic_item(item) for item in index]
    if any(item is ADVANCED for item in index):
        return None
    consumed = sum(1 for item in index if item is not None and item is not Ellipsis)
    if consumed > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    ellipses = [i for i, item in enumerate(index) if item is Ellipsis]
    if ellipses:  # the first expands to the dims the others leave; a second expands to nothing
        first = ellipses[0]
        rest = [item for item in index[first + 1 :] if item is not Ellipsis]
        index = index[:first] + [slice(None)] * (len(shape) - consumed) + rest
    return basic_index_spec(shape, tuple(index), normalized=True)


def index_basic(input, spec):
    return apply(index_view_op, input, spec=spec)


def narrow(input, dim: int, start: int, length: int):
    d = wrap_dim(dim, input.ndim, "narrow")
    n = input.shape[d]
    if hasattr(start, "item"):
        start = int(start.item())
    if start < 0:
        start += n
    if not (0 <= start <= n and 0 <= length and start + length <= n):
        raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n}).")
    spec = tuple(("s", 0, input.shape[i], 1) for i in range(d)) + (("s", start, length, 1),)
    return apply(index_view_op, input, spec=spec)


def select(input, dim: int, index: int):
    d = wrap_dim(dim, input.ndim, "select")
    n = input.shape[d]
    if not -n <= index < n:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {d}"
        )
    spec = tuple(("s", 0, input.shape[i], 1) for i in range(d)) + (("i", index % n),)
    return apply(index_view_op, input, spec=spec)


# as_strided and unfold --------------------------------------------------------------------------


def _as_strided_backward(ctx, grad):
    # Relative to the input's own start: PyTorch's as_strided offsets address the storage.
    attrs = ctx.attrs
    shape = tuple(ctx.input_shapes[0])
    rel = attrs["storage_offset"] - attrs["input_offset"]
    return apply(
        strided_scatter_add_op,
        grad,
        shape=shape,
        size=tuple(attrs["size"]),
        stride=tuple(attrs["stride_out"]),
        storage_offset=rel,
    )


as_strided_op = define(
    "as_strided",
    meta=lambda x, **a: Meta(tuple(a["size"]), x.dtype),
    view=lambda x, **a: (tuple(a["size"]), tuple(a["stride_out"]), a["storage_offset"]),
    backward=_as_strided_backward,
    backward_name="AsStridedBackward0",
)


def as_strided(input, size, stride, storage_offset=None):
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride):
        raise RuntimeError(f"as_strided: mismatch in length of strides ({len(stride)}) and shape ({len(size)})")
    offset = input.storage_offset() if storage_offset is None else int(storage_offset)
    if any(s < 0 for s in stride):
        raise RuntimeError("as_strided: negative strides are not supported")
    data = input._storage.data  # a NumPy array on cpu, a DeviceBuffer (numel) on vulkan
    if isinstance(data, np.ndarray):  # in elements of the input's dtype (a view(dtype) may differ)
        storage_size = data.nbytes // input.element_size()
    else:
        storage_size = data.shape[0] if hasattr(data, "shape") else getattr(data, "numel", None)
    if all(n > 0 for n in size) and isinstance(storage_size, int):
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= storage_size:
            raise RuntimeError(
                f"as_strided: setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset} are "
                f"out of bounds for storage of size {storage_size}"
            )
    if not input.is_contiguous() and input._requires_grad:
        raise RuntimeError("as_strided: gradients through as_strided of a non-contiguous tensor are not supported")
    return apply(
        as_strided_op, input, size=size, stride_out=stride, storage_offset=offset, input_offset=input.storage_offset()
    )


def as_strided_(self, size, stride, storage_offset=None):
    """In place: ``self`` becomes ``as_strided(self, size, stride, storage_offset)``."""
    return _become_view(self, as_strided(self, size, stride, storage_offset), "as_strided_")


def _unfold_geometry(shape, stride, offset, *, dimension, size, step):
    n = shape[dimension] if shape else 1
    count = (n - size) // step + 1
    st = stride[dimension] if shape else 1
    out_shape = tuple(shape[:dimension]) + (count,) + tuple(shape[dimension + 1 :]) + (size,)
    out_stride = tuple(stride[:dimension]) + (st * step,) + tuple(stride[dimension + 1 :]) + (st,)
    return out_shape, out_stride, offset


unfold_op = define(
    "unfold",
    meta=_view_meta(_unfold_geometry),
    view=_view_rule(_unfold_geometry),
    backward=_scatter_add_into_zeros(_unfold_geometry),
    backward_name="UnfoldBackward0",
)


def unfold(self, dimension: int, size: int, step: int):
    """Sliding windows of ``size`` along ``dimension`` (a view; windows may overlap)."""
    d = wrap_dim(dimension, self.ndim, "unfold")
    n = self.shape[d] if self.ndim else 1
    if size > n:
        raise RuntimeError(f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"unfold: step is {step} but must be > 0")
    return apply(unfold_op, self, dimension=d, size=size, step=step)


# copies ---------------------------------------------------------------------------------------


clone_op = define("clone", meta=_same_meta, backward=lambda ctx, grad: grad, backward_name="CloneBackward0")


def copy_in_memory_format(input, memory_format, op: str = "clone"):
    """A copy of ``input`` laid out in ``memory_format``: row-major, or for a channels-last format
    the permuted copy viewed back in ``input``'s dim order (so its strides are NHWC's)."""
    order = channels_last_order(memory_format, input.ndim, op)
    if order is None:
        return apply(clone_op, input)
    inverse = tuple(order.index(d) for d in range(len(order)))
    out = permute(apply(clone_op, permute(input, order)), inverse)
    if out.numel() == 0:  # no element to place: the strides are PyTorch's formula's
        return as_strided(out, tuple(out.shape), channels_last_strides(tuple(out.shape), order))
    return out


def clone(input, *, memory_format=None):
    """A copy with its own storage; row-major unless ``memory_format`` asks for a channels-last format
    (MuNet's ``preserve_format``, the default, does not carry the input's strides over)."""
    return copy_in_memory_format(input, check_memory_format(memory_format, "clone"), "clone")


def contiguous(self, memory_format=None):
    """``self`` if it is contiguous in ``memory_format`` (default row-major), else a copy that is."""
    fmt = contiguous_format if memory_format is None else check_memory_format(memory_format, "contiguous")
    if self.is_contiguous(fmt):
        return self
    if fmt is preserve_format:
        raise RuntimeError("contiguous: preserve memory format is unsupported by the contiguous operator")
    return copy_in_memory_format(self, fmt, "contiguous")


def _as_strided_scatter_backward(ctx, grad):
    a = ctx.attrs
    g_input = g_src = None
    if ctx.needs_input_grad[0]:
        from munet.ops.creation import zeros

        g_input = as_strided_scatter(
            grad, zeros(a["size"], dtype=grad.dtype, device=grad.device), a["size"], a["stride"], a["storage_offset"]
        )
    if ctx.needs_input_grad[1]:
        g = contiguous(grad)
        g_src = as_strided(g, a["size"], a["stride"], g.storage_offset() + a["storage_offset"])
    return g_input, g_src


as_strided_scatter_op = define(
    "as_strided_scatter",
    inputs=("self", "src"),
    meta=lambda x, src, **_: Meta(x.shape, x.dtype),
    backward=_as_strided_scatter_backward,
    backward_name="AsStridedScatterBackward0",
)


def as_strided_scatter(input, src, size, stride, storage_offset: int = 0):
    """A contiguous copy of ``input`` whose strided region (relative to its start) is ``src``."""
    if tuple(src.shape) != tuple(size):
        raise RuntimeError(f"as_strided_scatter: expected src of shape {list(size)}, got {list(src.shape)}")
    if src.dtype is not input.dtype:
        src = src.to(input.dtype)
    return apply(
        as_strided_scatter_op, input, src, size=tuple(size), stride=tuple(stride), storage_offset=int(storage_offset)
    )


def _strided_scatter_add_meta(grad, *, shape, size, stride, storage_offset):
    return Meta(tuple(shape), grad.dtype)


def _strided_scatter_add_backward(ctx, grad):
    a = ctx.attrs
    g = contiguous(grad)
    return as_strided(g, a["size"], a["stride"], g.storage_offset() + a["storage_offset"])


strided_scatter_add_op = define(
    "strided_scatter_add",
    meta=_strided_scatter_add_meta,
    backward=_strided_scatter_add_backward,
    backward_name="AsStridedBackward1",
)
