"""Sorting and searching: sort, argsort, msort, topk, kthvalue, unique, searchsorted, bucketize, isin.

``sort`` and ``topk`` are primitives returning ``(values, indices)`` named tuples; ``kthvalue``
is a composite (a position of the stable sort); the gradient of the values scatters back through the indices. ``unique``,
``unique_consecutive`` have data-dependent results and no gradient. ``searchsorted`` is a
composite: per value, the count of the boundaries that sort before it, found by a binary search of
gathers and comparisons; cpu and vulkan keep one-kernel searches for it, tested against it.
"""

from __future__ import annotations

from collections import namedtuple

from munet import _dtype as D
from munet.ops._registry import Meta, apply, define
from munet.ops._utils import is_tensor, wrap_dim

__all__ = [
    "argsort",
    "bucketize",
    "isin",
    "kthvalue",
    "msort",
    "searchsorted",
    "sort",
    "topk",
    "unique",
    "unique_consecutive",
]
__functional__: list[str] = []
__tensor_methods__ = ["argsort", "kthvalue", "msort", "sort", "topk", "unique", "unique_consecutive"]

SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])


def _check_sortable(x, caller: str) -> None:
    if not is_tensor(x):
        raise TypeError(f"{caller}: expected a tensor, got {type(x).__name__}")


def _scatter_values_grad(ctx, grad):
    """Gradient of values picked along ``dim`` at the saved ``indices``: scattered into zeros."""
    from munet.ops.creation import zeros
    from munet.ops.indexing import scatter_op

    dim = ctx.attrs["dim"]
    indices = ctx.saved_tensor("indices")
    shape = tuple(ctx.input_shapes[0])
    if not shape:
        return grad.reshape(())
    if ctx.attrs.get("keepdim") is False:
        grad = grad.unsqueeze(dim)
        indices = indices.unsqueeze(dim)
    base = zeros(shape, dtype=grad.dtype, device=grad.device)
    return apply(scatter_op, base, indices, grad, dim=dim, reduce=None)


def _sort_meta(x, *, dim, descending, stable):
    return Meta(tuple(x.shape), x.dtype), Meta(tuple(x.shape), D.int64)


sort_op = define(
    "sort",
    meta=_sort_meta,
    outputs=("values", "indices"),
    nondiff_outputs=(1,),
    backward=lambda ctx, g, _=None: _scatter_values_grad(ctx, g),
    saves=("indices",),
)


def sort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    """Sorted values along ``dim`` and their original positions (always stable here)."""
    _check_sortable(input, "sort")
    d = wrap_dim(dim, input.ndim, "sort") if input.ndim else 0
    values, indices = apply(sort_op, input, dim=d, descending=bool(descending), stable=True)
    return SortResult(values, indices)


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    return sort(input, dim, descending, stable).indices


def msort(input):
    return sort(input, 0).values


def _topk_meta(x, *, k, dim, largest):
    shape = list(x.shape)
    n = shape[dim] if shape else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: selected index k ({k}) out of range for dimension {dim} of size {n}")
    if shape:
        shape[dim] = k
    return Meta(tuple(shape), x.dtype), Meta(tuple(shape), D.int64)


topk_op = define(
    "topk",
    meta=_topk_meta,
    outputs=("values", "indices"),
    nondiff_outputs=(1,),
    backward=lambda ctx, g, _=None: _scatter_values_grad(ctx, g),
    saves=("indices",),
)


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002 - PyTorch's name
    """The ``k`` largest (or smallest) entries along ``dim``, with indices; returned sorted."""
    _check_sortable(input, "topk")
    d = wrap_dim(dim, input.ndim, "topk") if input.ndim else 0
    values, indices = apply(topk_op, input, k=int(k), dim=d, largest=bool(largest))
    return TopkResult(values, indices)


def _kthvalue_meta(x, *, k, dim, keepdim):
    shape = list(x.shape)
    n = shape[dim] if shape else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue: selected number k ({k}) out of range for dimension {dim} of size {n}")
    if shape:
        if keepdim:
            shape[dim] = 1
        else:
            del shape[dim]
    return Meta(tuple(shape), x.dtype), Meta(tuple(shape), D.int64)


def _kthvalue_decomposition(x, *, k, dim, keepdim):
    """Position ``k - 1`` of a stable ascending sort along ``dim`` (NaN sorts last; ties report the
    first occurrence)."""
    if x.ndim == 0:
        return x.clone(), apply(sort_op, x, dim=0, descending=False, stable=True)[1]
    values, order = apply(sort_op, x, dim=dim, descending=False, stable=True)
    values, order = values.narrow(dim, k - 1, 1), order.narrow(dim, k - 1, 1)
    if not keepdim:
        values, order = values.squeeze(dim), order.squeeze(dim)
    return values.clone(), order.clone()


kthvalue_op = define(
    "kthvalue",
    meta=_kthvalue_meta,
    outputs=("values", "indices"),
    nondiff_outputs=(1,),
    backward=lambda ctx, g, _=None: _scatter_values_grad(ctx, g),
    saves=("indices",),
    decomposition=_kthvalue_decomposition,
)


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False):
    """The ``k``-th smallest entry (1-based) along ``dim`` and its index."""
    _check_sortable(input, "kthvalue")
    d = wrap_dim(dim, input.ndim, "kthvalue") if input.ndim else 0
    values, indices = apply(kthvalue_op, input, k=int(k), dim=d, keepdim=bool(keepdim))
    return KthvalueResult(values, indices)


# unique ----------------------------------------------------------------------------------------


def _unique_meta(x, *, dim, consecutive):
    return Meta(None, x.dtype), Meta(None, D.int64), Meta(None, D.int64)


unique_op = define("unique", meta=_unique_meta, outputs=("values", "inverse", "counts"))


def _unique_result(values, inverse, counts, return_inverse: bool, return_counts: bool):
    out = (values,)
    if return_inverse:
        out += (inverse,)
    if return_counts:
        out += (counts,)
    return out[0] if len(out) == 1 else out


def _unique_dim(input, dim, op: str):
    """``dim`` wrapped (or None), after PyTorch's checks: a sortable dtype, no empty dim but ``dim``."""
    _check_sortable(input, op)
    if dim is None:
        return None
    d = wrap_dim(dim, input.ndim, op)
    if any(size == 0 for i, size in enumerate(input.shape) if i != d):
        raise RuntimeError(
            f"{op}: there are 0 sized dimensions, and they aren't selected, so unique cannot be applied "
            f"(input of shape {list(input.shape)}, dim={dim})"
        )
    return d


def unique(input, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim=None):  # noqa: A002
    """Distinct values (or slices along ``dim``), sorted; optionally inverse indices and counts."""
    d = _unique_dim(input, dim, "unique")
    values, inverse, counts = apply(unique_op, input, dim=d, consecutive=False)
    return _unique_result(values, inverse, counts, return_inverse, return_counts)


def unique_consecutive(input, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """Collapse runs of equal consecutive values (or slices along ``dim``)."""
    d = _unique_dim(input, dim, "unique_consecutive")
    values, inverse, counts = apply(unique_op, input, dim=d, consecutive=True)
    return _unique_result(values, inverse, counts, return_inverse, return_counts)


# searchsorted / bucketize --------------------------------------------------------------------------


def _searchsorted_meta(seq, values, sorter, *, right, out_int32):
    vshape = tuple(values.shape)
    if seq.ndim == 0:
        raise RuntimeError("searchsorted: boundaries tensor should have at least 1 dimension, got a 0-d tensor")
    if seq.ndim > 1 and (len(vshape) != seq.ndim or vshape[:-1] != tuple(seq.shape[:-1])):
        raise RuntimeError(
            "searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor "
            f"and input value tensor must match, but we got boundaries tensor {list(seq.shape)} and input value "
            f"tensor {list(vshape)}"
        )
    if sorter is not None:
        if tuple(sorter.shape) != tuple(seq.shape):
            raise RuntimeError(
                f"searchsorted: boundary and sorter must have the same size, but got boundary tensor "
                f"{list(seq.shape)} and got sorter tensor {list(sorter.shape)}"
            )
        if sorter.dtype is not D.int64:
            raise RuntimeError(f"searchsorted: sorter must be a tensor of long dtype but got {sorter.dtype.name}")
    return Meta(vshape, D.int32 if out_int32 else D.int64)


def _searchsorted_decomposition(seq, values, sorter, *, right, out_int32):
    """How many boundaries sort before each value (``right``: before it or equal), in ``sort``'s
    order, where NaN is the largest value: ``s < v or (v is NaN and s is not)`` for the left side,
    ``s <= v or v is NaN`` for the right; -0.0 and +0.0 are equal. Along a sorted sequence that
    holds for a prefix, so a binary search finds the count: one probe (a gather and a comparison)
    per power of two up to the sequence's length. A ``sorter`` first gathers the boundaries into
    order."""
    from munet.ops.checks import IndexOutOfRangeError, check_values
    from munet.ops.creation import zeros
    from munet.ops.elementwise import where

    size = seq.shape[-1]
    if sorter is not None:
        message = f"searchsorted: index {{value}} is out of bounds for dimension {seq.ndim - 1} with size {size}"
        check_values((sorter >= 0) & (sorter < size), message, IndexOutOfRangeError, sorter)
        seq = seq.gather(-1, sorter)

    def boundary(position):
        if seq.ndim == 1:
            return seq.index_select(0, position.reshape(-1)).reshape(tuple(position.shape))
        return seq.gather(-1, position)

    def before(s):
        ahead = s <= values if right else s < values
        if not seq.dtype.is_floating_point:
            return ahead
        return (ahead | values.isnan()) if right else (ahead | (values.isnan() & s.isnan().logical_not()))

    count = zeros(tuple(values.shape), dtype=D.int64, device=values.device)
    step = 1 << (size.bit_length() - 1) if size else 0
    while step:
        probe = count + step
        inside = probe <= size
        taken = inside & before(boundary(where(inside, probe - 1, 0)))
        count = where(taken, probe, count)
        step >>= 1
    return count.to(D.int32) if out_int32 else count


# Its result is an integer and has no gradient: the public function passes its inputs detached, so
# eager mode always runs a device's kernel (a composite without a gradient rule would otherwise run
# its decomposition, several ops per probe, wherever an input needs a gradient).
searchsorted_op = define(
    "searchsorted",
    inputs=("sorted_sequence", "self", "sorter"),
    meta=_searchsorted_meta,
    decomposition=_searchsorted_decomposition,
)


def searchsorted(sorted_sequence, input, *, out_int32: bool = False, right: bool = False, side=None, sorter=None):
    """Insertion points of ``input`` in the innermost dim of ``sorted_sequence`` (``side``: 'left'/'right')."""
    from munet.ops.creation import tensor

    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"searchsorted: side can only be 'left' or 'right' but got {side!r}")
        if right and side == "left":
            raise RuntimeError(
                "searchsorted: side and right can't be set to opposites, got side of left while right was True"
            )
        right = side == "right"
    if not is_tensor(input):
        if sorted_sequence.ndim != 1:
            raise RuntimeError(
                f"searchsorted: input value can be a scalar only when boundaries tensor dimension is 1, but we got "
                f"boundaries tensor dim({sorted_sequence.ndim}) and input value's dim(0) numel(1)"
            )
        input = tensor(input, device=sorted_sequence.device)
    common = D.promote_types(sorted_sequence.dtype, input.dtype)
    seq, values = sorted_sequence.to(common).detach(), input.to(common).detach()
    sorter = None if sorter is None else sorter.detach()
    return apply(searchsorted_op, seq, values, sorter, right=bool(right), out_int32=bool(out_int32))


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """Bucket index of each entry of ``input`` for the 1-d, sorted ``boundaries``."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"bucketize: boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False):
    """Whether each of ``elements`` is among ``test_elements`` (either may be a number), compared
    in their promoted dtype; ``invert`` answers the opposite. A search in the sorted test
    elements, so ``assume_unique`` (a speed hint in PyTorch) changes nothing."""
    from munet.ops.creation import tensor, zeros

    if not is_tensor(elements) and not is_tensor(test_elements):
        raise TypeError(
            f"isin: expected elements or test_elements to be a tensor, got {type(elements).__name__} and "
            f"{type(test_elements).__name__}"
        )
    device = elements.device if is_tensor(elements) else test_elements.device
    elements, test_elements = (x if is_tensor(x) else tensor(x, device=device) for x in (elements, test_elements))
    common = D.promote_types(elements.dtype, test_elements.dtype)
    values = elements.to(common).flatten()
    tests = test_elements.to(common).flatten()
    if tests.numel() == 0:
        found = zeros(values.shape, dtype=D.bool_, device=device)
    else:
        ordered = sort(tests).values
        position = searchsorted(ordered, values).clamp(max=tests.numel() - 1)
        found = ordered[position] == values
    found = found.reshape(elements.shape)
    return found.logical_not() if invert else found
