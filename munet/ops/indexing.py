"""Indexing ops: advanced indexing and index_put, gather/scatter, index_*, masked_*, nonzero.

Primitives (with kernels): ``index`` (advanced indexing of some dims by integer tensors,
NumPy/PyTorch placement rule), ``index_put`` (its inverse: write or accumulate values at those
positions), ``gather``, ``scatter``, ``scatter_reduce``, ``masked_fill`` and ``nonzero``.
Everything else here (``index_select``, ``index_add``, ``masked_select``, ``take``, ...) is a
composite of those. ``Tensor.__getitem__``/``__setitem__`` reach this module for any index
that is not basic: the basic parts (ints, slices, None, Ellipsis, 0-dim integer tensors) are
applied as a view first, bool masks become ``nonzero`` positions, and what remains is one
integer tensor per indexed dim.
"""

from __future__ import annotations

import numpy as np

from munet import _dtype as D
from munet.ops._registry import Meta, apply, apply_inplace, define
from munet.ops._utils import broadcast_shapes, is_tensor, reduce_grad, shape_of, wrap_dim

__all__ = [
    "argwhere",
    "gather",
    "index_add",
    "index_copy",
    "index_fill",
    "index_put",
    "index_put_",
    "index_select",
    "masked_fill",
    "masked_scatter",
    "masked_select",
    "nonzero",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "take",
    "take_along_dim",
]
__functional__: list[str] = []
__tensor_methods__ = [
    "argwhere",
    "gather",
    "index_add",
    "index_add_",
    "index_copy",
    "index_copy_",
    "index_fill",
    "index_fill_",
    "index_put",
    "index_put_",
    "index_select",
    "masked_fill",
    "masked_fill_",
    "masked_scatter",
    "masked_scatter_",
    "masked_select",
    "nonzero",
    "scatter",
    "scatter_",
    "scatter_add",
    "scatter_add_",
    "scatter_reduce",
    "scatter_reduce_",
    "take",
    "take_along_dim",
]

_INDEX_DTYPES = (D.int64, D.int32, D.int16, D.int8, D.uint8)
_MASK_DTYPES = (D.bool_, D.uint8)


def _zeros(shape, like):
    from munet.ops.creation import zeros

    return zeros(tuple(shape), dtype=like.dtype, device=like.device)


def _ones(shape, like):
    from munet.ops.creation import ones

    return ones(tuple(shape), dtype=like.dtype, device=like.device)


# index / index_put: the primitives ------------------------------------------------------------


def indexed_shape(shape, positions, index_shape) -> tuple:
    """Result shape of indexing dims ``positions`` of ``shape`` by tensors broadcast to ``index_shape``.

    Adjacent indexed dims are replaced in place; non-adjacent ones move to the front (NumPy's rule).
    """
    shape = tuple(shape)
    first, last = positions[0], positions[-1]
    if last - first + 1 == len(positions):
        return shape[:first] + tuple(index_shape) + shape[last + 1 :]
    return tuple(index_shape) + tuple(n for i, n in enumerate(shape) if i not in positions)


def _index_tensors_shape(indices, caller: str) -> tuple:
    for t in indices:
        if t.dtype not in _INDEX_DTYPES:
            raise IndexError(
                f"{caller}: tensors used as indices must be long, int, byte or bool tensors, got {t.dtype.name}"
            )
    try:
        return broadcast_shapes(*(tuple(t.shape) for t in indices), op=caller)
    except RuntimeError:
        shapes = ", ".join(str(list(t.shape)) for t in indices)
        raise IndexError(
            f"{caller}: shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}"
        ) from None


def _index_meta(x, indices, *, positions, caller="index", wrap=True):
    if len(indices) != len(positions) or not positions or positions[-1] >= max(x.ndim, 1):
        raise IndexError(f"{caller}: expected one index tensor per position {list(positions)} of a {x.ndim}-d tensor")
    return Meta(indexed_shape(x.shape, positions, _index_tensors_shape(indices, caller)), x.dtype)


def _saved_indices(ctx) -> list:
    return [ctx.saved_tensor(f"indices[{j}]") for j in range(len(ctx.attrs["positions"]))]


def _index_backward(ctx, grad):
    indices = _saved_indices(ctx)
    g = None
    if ctx.needs_input_grad[0]:
        g = apply(index_put_op, _zeros(ctx.input_shapes[0], grad), grad, indices, **_put_attrs(ctx.attrs, True))
    return g, [None] * len(indices)


def _put_attrs(attrs, accumulate):
    return dict(positions=attrs["positions"], accumulate=accumulate, caller=attrs["caller"], wrap=True)


index_op = define(
    "index",
    inputs=("self", "indices"),
    meta=_index_meta,
    backward=_index_backward,
    saves=("indices",),
    variadic=True,
)


def _index_put_meta(x, values, indices, *, positions, accumulate, caller="index_put_", wrap=True):
    target = _index_meta(x, indices, positions=positions, caller=caller).shape
    vshape = shape_of(values)
    if is_tensor(values) and values.dtype is not x.dtype:
        raise RuntimeError(
            f"{caller}: index put requires the source and destination dtypes match, got {x.dtype.name} for the "
            f"destination and {values.dtype.name} for the source."
        )
    try:
        ok = broadcast_shapes(vshape, target, op=caller) == tuple(target)
    except RuntimeError:
        ok = False
    if not ok:
        raise RuntimeError(
            f"{caller}: shape mismatch: value tensor of shape {list(vshape)} cannot be broadcast to indexing "
            f"result of shape {list(target)}"
        )
    return Meta(x.shape, x.dtype)


def _index_put_backward(ctx, grad):
    need = ctx.needs_input_grad
    indices = _saved_indices(ctx)
    attrs = ctx.attrs
    g_self = g_values = None
    if need[0]:
        g_self = grad if attrs["accumulate"] else apply(index_put_op, grad, 0, indices, **_put_attrs(attrs, False))
    if need[1]:
        picked = apply(index_op, grad, indices, positions=attrs["positions"], caller=attrs["caller"], wrap=True)
        g_values = reduce_grad(picked, ctx.input_shapes[1])
    return g_self, g_values, [None] * len(indices)


index_put_op = define(
    "index_put",
    inputs=("self", "values", "indices"),
    meta=_index_put_meta,
    backward=_index_put_backward,
    saves=("indices",),
    variadic=True,
)


# parsing a Python index --------------------------------------------------------------------------


def _sequence_as_tuple(index) -> bool:
    """PyTorch's rule: a list holding slices, None, Ellipsis, tensors or sequences is a tuple of indices."""
    if isinstance(index, tuple):
        return True
    if not isinstance(index, list) or len(index) >= 32:
        return False
    return any(
        item is None or item is Ellipsis or isinstance(item, (slice, list, tuple, range, np.ndarray)) or is_tensor(item)
        for item in index
    )


def _index_tensor(item, device):
    from munet.ops.creation import tensor

    if isinstance(item, (list, tuple)) and len(item) == 0:
        return tensor([], dtype=D.int64, device=device)
    t = item if is_tensor(item) else tensor(item, device=device)
    if t.device != device:
        t = t.to(device)
    return t


def _normalize_items(x, index) -> list:
    items = tuple(index) if _sequence_as_tuple(index) else (index,)
    out = []
    for item in items:
        if isinstance(item, np.bool_):
            # PyTorch refuses NumPy bools (a Python bool is a 0-dim mask)
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices "
                "(got numpy.bool)"
            )
        if isinstance(item, bool):
            item = _index_tensor(item, x.device)
        elif isinstance(item, np.integer):
            item = int(item)
        elif isinstance(item, range):
            item = _index_tensor(list(item), x.device)
        elif isinstance(item, (list, tuple, np.ndarray)) or is_tensor(item):
            item = _index_tensor(item, x.device)
        if is_tensor(item):
            if item.dtype.is_floating_point or (item.dtype not in _INDEX_DTYPES and item.dtype not in _MASK_DTYPES):
                raise IndexError(
                    f"tensors used as indices must be long, int, byte or bool tensors, got {item.dtype.name}"
                )
            if item.ndim == 0 and item.dtype not in _MASK_DTYPES:
                item = int(item.item())  # a 0-dim integer tensor indexes like an int (PyTorch)
        out.append(item)
    return out


def _is_mask(item) -> bool:
    return is_tensor(item) and item.dtype in _MASK_DTYPES


def _consumed(item) -> int:
    if item is None or item is Ellipsis:
        return 0
    return item.ndim if _is_mask(item) else 1


def parse_index(x, index, caller: str = "index"):
    """Split a Python index into a basic view of ``x`` and integer index tensors for some of its dims.

    Returns ``(view, positions, tensors)``; ``positions`` is empty when nothing advanced remains.
    """
    from munet.ops import view as views

    items = _normalize_items(x, index)
    consumed = sum(_consumed(item) for item in items)
    if consumed > x.ndim:
        raise IndexError(f"{caller}: too many indices for tensor of dimension {x.ndim}")
    basic, advanced = [], {}
    in_dim = out_dim = 0
    for item in items:
        if item is Ellipsis:
            fill = x.ndim - consumed
            consumed = x.ndim  # a second Ellipsis expands to nothing
            basic.extend([slice(None)] * fill)
            in_dim, out_dim = in_dim + fill, out_dim + fill
        elif item is None:
            basic.append(None)
            out_dim += 1
        elif _is_mask(item):
            k = item.ndim
            if k == 0:
                basic.append(None)
                advanced[out_dim] = nonzero(item.reshape(1))[:, 0]
                out_dim += 1
                continue
            _check_mask_shape(x, item, in_dim, caller)
            found = nonzero(item)
            for j in range(k):
                basic.append(slice(None))
                advanced[out_dim + j] = found[:, j]
            in_dim, out_dim = in_dim + k, out_dim + k
        elif is_tensor(item):
            basic.append(slice(None))
            advanced[out_dim] = item
            in_dim, out_dim = in_dim + 1, out_dim + 1
        else:
            basic.append(item)
            in_dim += 1
            out_dim += 0 if not isinstance(item, slice) else 1
    spec = views.basic_index_spec(tuple(x.shape), tuple(basic))
    whole = all(s[0] == "s" and s[1] == 0 and s[3] == 1 and s[2] == x.shape[i] for i, s in enumerate(spec))
    view = x if whole and len(spec) <= x.ndim else views.index_basic(x, spec)
    positions = tuple(sorted(advanced))
    return view, positions, [advanced[p] for p in positions]


def _check_mask_shape(x, mask, start: int, caller: str) -> None:
    for j, n in enumerate(mask.shape):
        if start + j >= x.ndim or x.shape[start + j] != n:
            raise IndexError(
                f"{caller}: the shape of the mask {list(mask.shape)} at index {j} does not match the shape of the "
                f"indexed tensor {list(x.shape)} at index {start + j}"
            )


def index(self, index):
    """``self[index]`` for a non-basic index (tensors, lists, masks mixed with basic parts); a copy."""
    from munet.ops.view import clone

    view, positions, tensors = parse_index(self, index)
    if not positions:
        return clone(view)
    return apply(index_op, view, tensors, positions=positions, caller="index", wrap=True)


def _check_leaf_inplace(self, caller: str) -> None:
    from munet.autograd.grad_mode import _State

    if not _State.enabled:
        return
    if self._requires_grad and self._grad_fn is None:
        raise RuntimeError(f"{caller}: a leaf Variable that requires grad is being used in an in-place operation.")
    base = self._base
    if base is not None and base._requires_grad and base._grad_fn is None:
        raise RuntimeError(
            f"{caller}: a view of a leaf Variable that requires grad is being used in an in-place operation."
        )


def _refresh_view_history(self) -> None:
    """After writing through a view of ``self``'s base, make ``self``'s history read the new base."""
    from munet.autograd.grad_mode import _State
    from munet.ops import view as views

    base = self._base
    if base is None or not _State.enabled or not base._requires_grad:
        return
    fresh = views.as_strided(base, tuple(self.shape), tuple(self.stride()), self._offset)
    self._grad_fn, self._output_nr, self._requires_grad = fresh._grad_fn, fresh._output_nr, fresh._requires_grad


def _put(self, index, values, accumulate: bool, caller: str, wrap: bool = True, cast: bool = False):
    """Write ``values`` at ``self[index]`` in place (the engine of setitem, index_put_, index_copy_, ...)."""
    from munet.ops.creation import tensor

    _check_leaf_inplace(self, caller)
    view, positions, tensors = parse_index(self, index, caller)
    if not is_tensor(values):
        values = tensor(values, dtype=self.dtype, device=self.device)
    elif values.dtype is not self.dtype and cast:
        values = values.to(self.dtype)
    if values.device != self.device:
        values = values.to(self.device)
    if not positions:  # only basic parts, e.g. x[torch.tensor(1)] = v
        if accumulate:
            view.add_(values)
        else:
            view.copy_(values)
        return self
    target = indexed_shape(view.shape, positions, _index_tensors_shape(tensors, caller))
    while values.ndim > len(target) and values.shape[0] == 1:  # PyTorch drops leading 1-dims of values
        values = values.reshape(tuple(values.shape[1:]))
    apply_inplace(
        index_put_op, view, values, tensors, positions=positions, accumulate=bool(accumulate), caller=caller, wrap=wrap
    )
    if view is not self:
        _refresh_view_history(self)
    return self


def index_put_(self, indices, values, accumulate: bool = False):
    """Write (or with ``accumulate`` add, duplicates summing) ``values`` at ``self[indices]`` in place."""
    return _put(self, indices, values, accumulate, "index_put_", cast=True)


def index_put(input, indices, values, accumulate: bool = False):
    """Out-of-place :func:`index_put_`."""
    from munet.ops.view import clone

    return index_put_(clone(input), indices, values, accumulate)


# index_select / index_add / index_copy / index_fill -------------------------------------------


def _dim_index(x, dim: int, index, caller: str):
    if not is_tensor(index) or index.dtype not in (D.int64, D.int32):
        got = index.dtype.name if is_tensor(index) else type(index).__name__
        raise IndexError(f"{caller}: expected index of dtype int64 or int32, got {got}")
    if index.ndim > 1:
        raise IndexError(f"{caller}: index is supposed to be a vector, got shape {list(index.shape)}")
    d = wrap_dim(dim, x.ndim, caller)
    return d, index.reshape(-1)


def _dim_key(d: int, index) -> tuple:
    return (slice(None),) * d + (index,)


def index_select(input, dim: int, index):
    """Entries of ``input`` along ``dim`` at the (1-d) positions ``index``; non-negative indices only."""
    d, idx = _dim_index(input, dim, index, "index_select")
    x = input.reshape(1) if input.ndim == 0 else input
    out = apply(index_op, x, [idx], positions=(d,), caller="index_select", wrap=False)
    return out.reshape(()) if input.ndim == 0 and index.ndim == 0 else out


def _check_source(self, d: int, idx, source, caller: str) -> None:
    expected = list(self.shape)
    if expected:
        expected[d] = idx.shape[0]
    if list(source.shape) != expected and not (self.ndim == 0 and source.numel() == idx.shape[0]):
        raise RuntimeError(f"{caller}: expected source of shape {expected}, got {list(source.shape)}")
    if source.dtype is not self.dtype:
        raise RuntimeError(
            f"{caller}: self ({self.dtype.name}) and source ({source.dtype.name}) must have the same scalar type"
        )


def index_add_(self, dim: int, index, source, *, alpha=1):
    d, idx = _dim_index(self, dim, index, "index_add_")
    _check_source(self, d, idx, source, "index_add_")
    if alpha != 1:
        source = source * alpha
    return _put(
        self,
        _dim_key(d, idx),
        source.reshape(self.shape[:d] + (idx.shape[0],) + self.shape[d + 1 :]),
        True,
        "index_add_",
        wrap=False,
    )


def index_add(input, dim: int, index, source, *, alpha=1):
    from munet.ops.view import clone

    return index_add_(clone(input), dim, index, source, alpha=alpha)


def index_copy_(self, dim: int, index, source):
    d, idx = _dim_index(self, dim, index, "index_copy_")
    _check_source(self, d, idx, source, "index_copy_")
    return _put(
        self,
        _dim_key(d, idx),
        source.reshape(self.shape[:d] + (idx.shape[0],) + self.shape[d + 1 :]),
        False,
        "index_copy_",
        wrap=False,
    )


def index_copy(input, dim: int, index, source):
    from munet.ops.view import clone

    return index_copy_(clone(input), dim, index, source)


def index_fill_(self, dim: int, index, value):
    d, idx = _dim_index(self, dim, index, "index_fill_")
    if is_tensor(value) and value.ndim != 0:
        raise RuntimeError(
            f"index_fill_: only supports a 0-dimensional value tensor, but got tensor with {value.ndim} dimension(s)."
        )
    return _put(self, _dim_key(d, idx), value, False, "index_fill_", cast=True)


def index_fill(input, dim: int, index, value):
    from munet.ops.view import clone

    return index_fill_(clone(input), dim, index, value)


def take(input, index):
    """``input`` as a flat tensor, indexed by ``index`` (any shape; negative indices count from the end)."""
    if not is_tensor(index) or index.dtype is not D.int64:
        got = index.dtype.name if is_tensor(index) else type(index).__name__
        raise RuntimeError(f"take: expected index of dtype int64, got {got}")
    return apply(index_op, input.reshape(-1), [index], positions=(0,), caller="take", wrap=True)


# gather / scatter ---------------------------------------------------------------------------------


def _check_gather_index(x, index, dim: int, caller: str, src=None) -> None:
    if not is_tensor(index) or index.dtype is not D.int64:
        got = index.dtype.name if is_tensor(index) else type(index).__name__
        raise RuntimeError(f"{caller}: expected dtype int64 for index, got {got}")
    if index.ndim != x.ndim and not (index.ndim <= 1 and x.ndim <= 1):
        raise RuntimeError(
            f"{caller}: index tensor must have the same number of dimensions as input tensor, got index of shape "
            f"{list(index.shape)} and input of shape {list(x.shape)}"
        )
    if index.ndim == x.ndim:
        for i, (ni, nx) in enumerate(zip(index.shape, x.shape)):
            too_big = ni > nx and i != dim
            too_big_src = src is not None and is_tensor(src) and ni > src.shape[i]
            if too_big or too_big_src:
                where = f" and to be smaller size than src {list(src.shape)}" if is_tensor(src) else ""
                raise RuntimeError(
                    f"{caller}: expected index {list(index.shape)} to be smaller than self {list(x.shape)} apart from "
                    f"dimension {dim}{where}"
                )


def _gather_meta(x, index, *, dim):
    return Meta(tuple(index.shape), x.dtype)


def _gather_backward(ctx, grad):
    index = ctx.saved_tensor("index")
    base = _zeros(ctx.input_shapes[0], grad)
    return apply(scatter_op, base, index, grad, dim=ctx.attrs["dim"], reduce="add"), None


gather_op = define("gather", inputs=("self", "index"), meta=_gather_meta, backward=_gather_backward, saves=("index",))


def gather(input, dim: int, index, *, sparse_grad: bool = False):
    """``out[i][j] = input[index[i][j]][j]`` for ``dim=0`` (and likewise for other dims)."""
    d = wrap_dim(dim, input.ndim, "gather")
    _check_gather_index(input, index, d, "gather")
    return apply(gather_op, input, index, dim=d)


def _pad_to(g, shape):
    """``g`` placed at the start of zeros of ``shape`` (the gradient of slicing a leading block)."""
    from munet.ops.view import as_strided_scatter

    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    from munet._tensor import contiguous_strides

    return as_strided_scatter(_zeros(shape, g), g, tuple(g.shape), contiguous_strides(shape), 0)


def _scatter_meta(x, index, src, *, dim, reduce):
    return Meta(tuple(x.shape), x.dtype)


def _scatter_backward(ctx, grad):
    need = ctx.needs_input_grad
    dim, reduce = ctx.attrs["dim"], ctx.attrs["reduce"]
    if reduce == "multiply":
        raise RuntimeError(
            "scatter: the gradient of reduce='multiply' is not implemented; use scatter_reduce(reduce='prod')"
        )
    index = ctx.saved_tensor("index")
    g_self = g_src = None
    if need[0]:
        g_self = grad if reduce == "add" else apply(scatter_op, grad, index, 0, dim=dim, reduce=None)
    if len(need) > 2 and need[2]:
        g_src = _pad_to(apply(gather_op, grad, index, dim=dim), ctx.input_shapes[2])
    return g_self, None, g_src


scatter_op = define(
    "scatter", inputs=("self", "index", "src"), meta=_scatter_meta, backward=_scatter_backward, saves=("index",)
)


def _scatter_args(self, dim, index, src, value, reduce, caller):
    if src is None and value is None:
        raise TypeError(f"{caller}: expected a src tensor or a value")
    if src is None:
        src = value
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"{caller}: reduce argument must be either add or multiply, got {reduce!r}")
    d = wrap_dim(dim, self.ndim, caller)
    _check_gather_index(self, index, d, caller, src)
    if is_tensor(src):
        if src.dtype is not self.dtype:
            raise RuntimeError(
                f"{caller}: expected self.dtype to be equal to src.dtype, got {self.dtype.name} and {src.dtype.name}"
            )
    elif is_tensor(value):
        src = value.item()
    return d, src


def scatter(input, dim: int, index, src=None, *, value=None, reduce=None):
    """Write ``src`` (a tensor or a number) into a copy of ``input`` at ``index`` along ``dim``."""
    d, src = _scatter_args(input, dim, index, src, value, reduce, "scatter")
    return apply(scatter_op, input, index, src, dim=d, reduce=reduce)


def scatter_(self, dim: int, index, src=None, *, value=None, reduce=None):
    d, src = _scatter_args(self, dim, index, src, value, reduce, "scatter_")
    return apply_inplace(scatter_op, self, index, src, dim=d, reduce=reduce)


def scatter_add(input, dim: int, index, src):
    d, src = _scatter_args(input, dim, index, src, None, "add", "scatter_add")
    return apply(scatter_op, input, index, src, dim=d, reduce="add")


def scatter_add_(self, dim: int, index, src):
    d, src = _scatter_args(self, dim, index, src, None, "add", "scatter_add_")
    return apply_inplace(scatter_op, self, index, src, dim=d, reduce="add")


_SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_meta(x, index, src, *, dim, reduce, include_self):
    return Meta(tuple(x.shape), x.dtype)


def _scatter_reduce_backward(ctx, grad):
    need = ctx.needs_input_grad
    a = ctx.attrs
    dim, reduce, include_self = a["dim"], a["reduce"], a["include_self"]
    index = ctx.saved_tensor("index")
    src_shape = ctx.input_shapes[2] if len(need) > 2 else None

    def scatter_zero(t):
        return apply(scatter_op, t, index, 0, dim=dim, reduce=None)

    def at_src(t):
        return apply(gather_op, t, index, dim=dim)

    if reduce == "sum":
        g_self = grad if include_self else scatter_zero(grad)
        g_src = at_src(grad)
    elif reduce == "mean":
        ones_src = _ones(index.shape, grad)
        start = _ones(grad.shape, grad)
        counts = apply(
            scatter_op, start if include_self else scatter_zero(start), index, ones_src, dim=dim, reduce="add"
        )
        scaled = grad / counts
        g_self = scaled if include_self else scatter_zero(scaled)
        g_src = at_src(scaled)
    elif reduce == "prod":
        result, self_, src = ctx.saved_tensor("result"), ctx.saved_tensor("self"), ctx.saved_tensor("src")
        g_self, g_src = _scatter_prod_grads(grad, index, dim, include_self, self_, _leading(src, index), result)
        if not include_self:
            g_self = scatter_zero(grad)
    else:  # amax / amin: the gradient is shared equally among the elements that attain the extremum
        result, self_, src = ctx.saved_tensor("result"), ctx.saved_tensor("self"), ctx.saved_tensor("src")
        src_block = _leading(src, index)
        self_hits = (self_ == result).to(grad.dtype)
        if not include_self:
            self_hits = scatter_zero(self_hits)
        src_hits = (src_block == at_src(result)).to(grad.dtype)
        counts = apply(scatter_op, self_hits, index, src_hits, dim=dim, reduce="add")
        shared = grad / counts
        g_self = self_hits * shared
        g_src = src_hits * at_src(shared)
    g_src = _pad_to(g_src, src_shape) if len(need) > 2 and need[2] else None
    return (g_self if need[0] else None), None, g_src


def _scatter_prod_grads(grad, index, dim: int, include_self: bool, self_, src, result):
    """PyTorch's rule: zeros are excluded explicitly, so a single zero gets the product of the rest."""
    import munet

    def reduce_prod(base, values):
        return apply(scatter_reduce_values_op, base, index, values, dim=dim, reduce="prod", include_self=include_self)

    def at_src(t):
        return apply(gather_op, t, index, dim=dim)

    masked_self = masked_fill(self_, self_ == 0, 1)
    g_self = grad * reduce_prod(masked_self, src) / masked_self
    src_zero = src == 0
    zeros_per_slot = apply(scatter_op, _zeros(grad.shape, grad), index, src_zero.to(grad.dtype), dim=dim, reduce="add")
    single_zero = munet.logical_and(src_zero, at_src(zeros_per_slot) == 1)
    rest = reduce_prod(self_, masked_fill(src, single_zero, 1))
    g_src = munet.where(single_zero, at_src(grad * rest), at_src(grad * result) / masked_fill(src, src_zero, 1))
    return g_self, g_src


def _leading(src, index):
    """The block of ``src`` that ``index`` addresses (its leading ``index.shape`` entries)."""
    if tuple(src.shape) == tuple(index.shape):
        return src
    return src[tuple(slice(0, n) for n in index.shape)]


# sum and mean need only the index for their gradient; prod, amax and amin also read the values.
scatter_reduce_op = define(
    "scatter_reduce",
    inputs=("self", "index", "src"),
    meta=_scatter_reduce_meta,
    backward=_scatter_reduce_backward,
    saves=("index",),
)
scatter_reduce_values_op = define(
    "scatter_reduce_values",
    inputs=("self", "index", "src"),
    meta=_scatter_reduce_meta,
    backward=_scatter_reduce_backward,
    saves=("index", "self", "src", "result"),
    backward_name="ScatterReduceBackward0",
)


def _scatter_reduce_op(reduce: str):
    return scatter_reduce_op if reduce in ("sum", "mean") else scatter_reduce_values_op


def _scatter_reduce_args(self, dim, index, src, reduce, caller):
    if reduce not in _SCATTER_REDUCTIONS:
        raise RuntimeError(f"{caller}: reduce argument must be one of {', '.join(_SCATTER_REDUCTIONS)}, got {reduce!r}")
    if not is_tensor(src):
        raise TypeError(f"{caller}: expected src to be a tensor, got {type(src).__name__}")
    d = wrap_dim(dim, self.ndim, caller)
    _check_gather_index(self, index, d, caller, src)
    if src.dtype is not self.dtype:
        raise RuntimeError(
            f"{caller}: expected self.dtype to be equal to src.dtype, got {self.dtype.name} and {src.dtype.name}"
        )
    return d


def scatter_reduce(input, dim: int, index, src, reduce: str, *, include_self: bool = True):
    """Reduce ``src`` into a copy of ``input`` at ``index`` along ``dim`` (sum, prod, mean, amax, amin)."""
    d = _scatter_reduce_args(input, dim, index, src, reduce, "scatter_reduce")
    return apply(_scatter_reduce_op(reduce), input, index, src, dim=d, reduce=reduce, include_self=bool(include_self))


def scatter_reduce_(self, dim: int, index, src, reduce: str, *, include_self: bool = True):
    d = _scatter_reduce_args(self, dim, index, src, reduce, "scatter_reduce_")
    return apply_inplace(
        _scatter_reduce_op(reduce), self, index, src, dim=d, reduce=reduce, include_self=bool(include_self)
    )


def take_along_dim(input, indices, dim=None):
    """Values of ``input`` at ``indices`` along ``dim`` (broadcasting the other dims); flat when ``dim`` is None."""
    if not is_tensor(indices) or indices.dtype is not D.int64:
        raise RuntimeError(f"take_along_dim: dtype of indices should be int64, got {getattr(indices, 'dtype', None)}")
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise RuntimeError(
            f"take_along_dim: input and indices should have the same number of dimensions, but got {input.ndim} "
            f"dimensions for input, and {indices.ndim} dimensions for indices"
        )
    d = wrap_dim(dim, input.ndim, "take_along_dim")
    xs, ixs = list(input.shape), list(indices.shape)
    xs[d] = ixs[d] = 1
    common = list(broadcast_shapes(tuple(xs), tuple(ixs), op="take_along_dim"))
    x_shape, i_shape = list(common), list(common)
    x_shape[d], i_shape[d] = input.shape[d], indices.shape[d]
    return gather(input.expand(tuple(x_shape)), d, indices.expand(tuple(i_shape)))


# masked ops ------------------------------------------------------------------------------------------


def _masked_fill_meta(x, mask, value):
    if mask.dtype is not D.bool_:
        raise RuntimeError(f"masked_fill: expected a mask of dtype bool, got {mask.dtype.name}")
    return Meta(broadcast_shapes(tuple(x.shape), tuple(mask.shape), op="masked_fill"), x.dtype)


def _masked_fill_backward(ctx, grad):
    need = ctx.needs_input_grad
    mask = ctx.saved_tensor("mask")
    kept = apply(masked_fill_op, grad, mask, 0)
    g_self = reduce_grad(kept, ctx.input_shapes[0]) if need[0] else None
    g_value = (grad - kept).sum() if len(need) > 2 and need[2] else None
    return g_self, None, g_value


def _masked_fill_decomposition(x, mask, value):
    """``where(mask, value, x)`` with ``value`` in ``x``'s dtype (a 0-d tensor, or a number made one)."""
    from munet.ops.creation import full
    from munet.ops.elementwise import where

    fill = value.to(x.dtype) if is_tensor(value) else full((), value, dtype=x.dtype, device=x.device)
    return where(mask, fill, x)


masked_fill_op = define(
    "masked_fill",
    inputs=("self", "mask", "value"),
    meta=_masked_fill_meta,
    backward=_masked_fill_backward,
    saves=("mask",),
    decomposition=_masked_fill_decomposition,
)


def _fill_value(self, value, caller: str):
    if is_tensor(value):
        if value.ndim != 0:
            raise RuntimeError(
                f"{caller} only supports a 0-dimensional value tensor, but got tensor with {value.ndim} dimension(s)."
            )
        if value.dtype is not self.dtype:
            value = value.to(self.dtype)
    return value


def masked_fill(input, mask, value):
    """A copy of ``input`` with ``value`` where the (broadcast) bool ``mask`` is True."""
    return apply(masked_fill_op, input, mask, _fill_value(input, value, "masked_fill"))


def masked_fill_(self, mask, value):
    return apply_inplace(masked_fill_op, self, mask, _fill_value(self, value, "masked_fill_"))


def _check_mask(mask, caller: str) -> None:
    if not is_tensor(mask) or mask.dtype is not D.bool_:
        got = mask.dtype.name if is_tensor(mask) else type(mask).__name__
        raise RuntimeError(f"{caller}: expected a mask of dtype bool, got {got}")


def masked_select(input, mask):
    """The entries of ``input`` where ``mask`` is True (both broadcast), as a 1-d tensor."""
    _check_mask(mask, "masked_select")
    shape = broadcast_shapes(tuple(input.shape), tuple(mask.shape), op="masked_select")
    x = input.expand(shape)
    found = nonzero(mask.expand(shape), as_tuple=True)
    if x.ndim == 0:
        return apply(index_op, x.reshape(1), [found[0]], positions=(0,), caller="masked_select", wrap=True)
    return apply(index_op, x, list(found), positions=tuple(range(x.ndim)), caller="masked_select", wrap=True)


def masked_scatter_(self, mask, source):
    """Copy the leading entries of ``source`` (in row-major order) to where ``mask`` is True."""
    _check_mask(mask, "masked_scatter_")
    if source.dtype is not self.dtype:
        raise RuntimeError(
            f"masked_scatter_: expected self and source to have same dtypes but got {self.dtype.name} and {source.dtype.name}"
        )
    if broadcast_shapes(tuple(self.shape), tuple(mask.shape), op="masked_scatter_") != tuple(self.shape):
        raise RuntimeError(
            f"masked_scatter_: mask of shape {list(mask.shape)} cannot be broadcast to {list(self.shape)}"
        )
    found = nonzero(mask.expand(tuple(self.shape)), as_tuple=True)
    count = found[0].shape[0]
    if source.numel() < count:
        raise RuntimeError(f"masked_scatter_: expected source to have at least {count} elements, got {source.numel()}")
    values = source.reshape(-1)[:count]
    if self.ndim == 0:
        return _put(self, (None, found[0]), values, False, "masked_scatter_")
    return _put(self, tuple(found), values, False, "masked_scatter_")


def masked_scatter(input, mask, source):
    shape = broadcast_shapes(tuple(input.shape), tuple(mask.shape), op="masked_scatter")
    return masked_scatter_(input.expand(shape).clone(), mask, source)


# nonzero -------------------------------------------------------------------------------------------

nonzero_op = define("nonzero", meta=lambda x: Meta(None, D.int64))


def nonzero(input, *, as_tuple: bool = False):
    """Indices of the non-zero entries: an ``(n, ndim)`` tensor, or one 1-d tensor per dim."""
    if as_tuple and input.ndim == 0:
        return nonzero(input.reshape(1), as_tuple=True)
    found = apply(nonzero_op, input)
    if not as_tuple:
        return found
    return tuple(found[:, j] for j in range(input.ndim))


def argwhere(input):
    return nonzero(input)
