"""Sparse COO tensors: PyTorch's ``torch.sparse_coo`` layout, the part that sparse gradients use.

A :class:`SparseCOOTensor` is a ``Tensor`` of layout ``munet.sparse_coo`` made of two dense tensors
on one device: ``indices`` (int64, ``(sparse_dim, nnz)``) and ``values`` (``(nnz, *dense_shape)``);
its shape is ``(*sparse_shape, *dense_shape)``. An index may occur more than once (the tensor is then
uncoalesced, and the element is the sum of its values); :meth:`~SparseCOOTensor.coalesce` sorts the
indices and sums duplicates. Sparse tensors carry no autograd history.

Its storage is a :class:`SparseStorage`, which has a version counter and refuses to give a backend:
every dense op reaches its inputs' backends before it reads any data, so a dense op given a sparse
tensor raises ``LayoutError`` naming the op and listing what sparse tensors support
(:data:`SUPPORTED`), instead of computing on memory that is not there.
"""

from __future__ import annotations

import numbers

from munet import _dtype as D
from munet._memory_format import LayoutError, sparse_coo
from munet._tensor import Size, Tensor
from munet.autograd.grad_mode import is_grad_enabled, no_grad
from munet.ops import creation
from munet.ops.movement import cat, stack

__all__ = ["SparseCOOTensor", "sparse_coo_tensor"]

SUPPORTED = (
    "indices(), values(), _indices(), _values(), coalesce(), is_coalesced(), sparse_dim(), dense_dim(), "
    "_nnz(), to_dense(), to(), clone(), detach(), zero_(), sum(), norm(), + and - of sparse tensors (and "
    "dense + sparse), * and / by a scalar (mul_, div_), neg, munet.sparse.mm and munet.sparse.sum"
)
REFUSED = (
    f"not supported on a sparse COO tensor (layout munet.sparse_coo), which supports only {SUPPORTED}; "
    "convert it with .to_dense() first"
)


class SparseStorage:
    """What a sparse tensor holds where a dense one holds its ``Storage``: a version counter that its
    in-place operations bump, and a ``backend`` that raises ``LayoutError`` for any dense use."""

    __slots__ = ("version", "__weakref__")
    shared = None

    def __init__(self):
        self.version = 0

    @property
    def backend(self):
        raise LayoutError(REFUSED)

    data = device = backend

    def numel(self) -> int:
        raise LayoutError(REFUSED)


def _refuse(what: str):
    raise LayoutError(f"{what}: {REFUSED}")


class SparseCOOTensor(Tensor):
    """A sparse tensor in COO layout (``layout == munet.sparse_coo``, ``is_sparse``). Make one with
    :func:`sparse_coo_tensor` or ``dense.to_sparse()``; ``nn.Embedding(sparse=True)`` gives one as its
    weight's gradient."""

    __slots__ = ("_sparse_indices", "_sparse_values", "_coalesced")

    @classmethod
    def _build(cls, indices: Tensor, values: Tensor, shape, coalesced: bool) -> SparseCOOTensor:
        """The tensor over ``indices`` and ``values`` as given (they are shared, not copied)."""
        shape = Size(tuple(int(n) for n in shape))
        t = cls._make(SparseStorage(), shape, (0,) * len(shape), 0, values._dtype, None)  # no dense data
        t._sparse_indices = indices
        t._sparse_values = values
        t._coalesced = bool(coalesced) or indices.shape[1] < 2
        return t

    # layout and structure -----------------------------------------------------------------------
    @property
    def layout(self):
        return sparse_coo

    @property
    def is_sparse(self) -> bool:
        return True

    @property
    def device(self):
        return self._sparse_values.device

    @property
    def requires_grad(self) -> bool:
        return False

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value:
            raise RuntimeError(_NO_AUTOGRAD.format(what="requires_grad=True"))

    def requires_grad_(self, requires_grad: bool = True) -> SparseCOOTensor:
        self.requires_grad = requires_grad
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
        raise RuntimeError(_NO_AUTOGRAD.format(what="backward()"))

    def sparse_dim(self) -> int:
        return self._sparse_indices.shape[0]

    def dense_dim(self) -> int:
        return self._sparse_values.ndim - 1

    def _nnz(self) -> int:
        return self._sparse_indices.shape[1]

    def is_coalesced(self) -> bool:
        return self._coalesced

    def _indices(self) -> Tensor:
        """The ``(sparse_dim, nnz)`` int64 indices, duplicates included (shared, not copied)."""
        return self._sparse_indices

    def _values(self) -> Tensor:
        """The ``(nnz, *dense_shape)`` values, one per index column (shared, not copied)."""
        return self._sparse_values

    def indices(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._sparse_indices

    def values(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._sparse_values

    def stride(self, dim=None):
        """Zeros, as PyTorch answers for a sparse tensor (it has no strided memory)."""
        return (0,) * self.ndim if dim is None else 0

    def is_contiguous(self, memory_format=None) -> bool:
        return False

    # conversions ----------------------------------------------------------------------------------
    def coalesce(self) -> SparseCOOTensor:
        """This tensor with its indices sorted (row-major) and unique, the values of duplicates summed;
        ``self`` when it is coalesced already."""
        if self._coalesced:
            return self
        sparse_shape = self._shape[: self.sparse_dim()]
        keys = _linear_index(self._sparse_indices, sparse_shape)
        unique, inverse = keys.unique(sorted=True, return_inverse=True)
        values = self._sparse_values
        summed = creation.zeros((unique.shape[0], *values.shape[1:]), dtype=values.dtype, device=values.device)
        with no_grad():
            summed.index_add_(0, inverse, values)
        return SparseCOOTensor._build(_unravel(unique, sparse_shape), summed, self._shape, True)

    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        """The dense (strided) tensor: each value added at its index, so duplicates sum."""
        out = creation.zeros(self._shape, dtype=self._dtype, device=self.device)
        if self._nnz():
            with no_grad():
                out.index_put_(tuple(self._sparse_indices.unbind(0)), self._sparse_values, accumulate=True)
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None) -> SparseCOOTensor:
        _check_coo_target(layout, blocksize, "to_sparse")
        wanted = _wanted_sparse_dim(self, sparse_dim, dense_dim)
        if wanted != self.sparse_dim():
            raise RuntimeError(
                f"to_sparse: MuNet does not change the sparse_dim of a sparse tensor ({self.sparse_dim()} to "
                f"{wanted}); use .to_dense().to_sparse({wanted})"
            )
        return self

    def to_sparse_coo(self) -> SparseCOOTensor:
        return self

    def to(self, *args, **kwargs) -> SparseCOOTensor:
        """Another dtype or device (``Tensor.to``'s arguments; ``memory_format`` is refused)."""
        if "memory_format" in kwargs:
            raise RuntimeError("to: memory_format is not supported for sparse COO tensors")
        values = self._sparse_values.to(*args, **kwargs)
        if values is self._sparse_values:
            return self
        return SparseCOOTensor._build(self._sparse_indices.to(values.device), values, self._shape, self._coalesced)

    def cpu(self) -> SparseCOOTensor:
        return self.to("cpu")

    def clone(self, *, memory_format=None) -> SparseCOOTensor:
        if memory_format is not None:
            raise RuntimeError("clone: memory_format is not supported for sparse COO tensors")
        return SparseCOOTensor._build(
            self._sparse_indices.clone(), self._sparse_values.clone(), self._shape, self._coalesced
        )

    def detach(self) -> SparseCOOTensor:
        """A sparse tensor sharing these indices and values."""
        return SparseCOOTensor._build(self._sparse_indices, self._sparse_values, self._shape, self._coalesced)

    def detach_(self) -> SparseCOOTensor:
        return self

    @property
    def data(self) -> SparseCOOTensor:
        return self.detach()

    @data.setter
    def data(self, other) -> None:
        raise RuntimeError("Tensor.data: assigning to the data of a sparse COO tensor is not supported")

    def numpy(self, *, force: bool = False):
        _refuse("numpy")

    def sum(self, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
        """``munet.sparse.sum(self, dim, dtype)``: a 0-d dense tensor for all dims (``keepdim`` is refused)."""
        if keepdim:
            raise RuntimeError("sum: keepdim=True is not supported for sparse COO tensors")
        from munet.sparse.reduce import sum as sparse_sum

        return sparse_sum(self, dim, dtype=dtype)

    def norm(self, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
        """The ``p``-norm of all elements (a 0-d dense tensor), from the coalesced values as PyTorch's."""
        if dim is not None or keepdim:
            raise RuntimeError(
                "norm: MuNet takes the norm of a sparse COO tensor over all its elements only (dim=None)"
            )
        values = self.coalesce()._sparse_values
        values = values if dtype is None else values.to(dtype)
        return values.norm(p)

    # arithmetic ------------------------------------------------------------------------------------
    def zero_(self) -> SparseCOOTensor:
        """No stored elements left (``_nnz() == 0``), in place."""
        values = self._sparse_values
        self._sparse_indices = creation.zeros((self.sparse_dim(), 0), dtype=D.int64, device=values.device)
        self._sparse_values = creation.zeros((0, *values.shape[1:]), dtype=values.dtype, device=values.device)
        self._coalesced = True
        self._storage.version += 1
        return self

    def add(self, other, *, alpha=1) -> SparseCOOTensor:
        """``self + alpha * other`` for a sparse ``other`` of the same shape; a dense ``other`` raises as
        in PyTorch (``dense + sparse`` is the supported order)."""
        if not isinstance(other, SparseCOOTensor):
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
        indices, values, coalesced = _sum_parts(self, other, alpha, "add")
        result = SparseCOOTensor._build(indices, values, self._shape, False)
        return result.coalesce() if coalesced else result

    def add_(self, other, *, alpha=1) -> SparseCOOTensor:
        result = self.add(other, alpha=alpha)
        if result._dtype is not self._dtype:
            raise RuntimeError(
                f"add_: result type {result._dtype.name} can't be cast to the desired output type {self._dtype.name}"
            )
        self._sparse_indices, self._sparse_values, self._coalesced = (
            result._sparse_indices,
            result._sparse_values,
            result._coalesced,
        )
        self._storage.version += 1
        return self

    def sub(self, other, *, alpha=1) -> SparseCOOTensor:
        return self.add(other, alpha=-alpha)

    def sub_(self, other, *, alpha=1) -> SparseCOOTensor:
        return self.add_(other, alpha=-alpha)

    def __add__(self, other):
        return self.add(other)

    def __radd__(self, other):
        """``dense + sparse``: a dense result."""
        if isinstance(other, Tensor) and not isinstance(other, SparseCOOTensor):
            return add_to_dense(other, self)
        return self.add(other)

    def __iadd__(self, other):
        return self.add_(other)

    def __sub__(self, other):
        return self.sub(other)

    def __rsub__(self, other):
        if isinstance(other, Tensor) and not isinstance(other, SparseCOOTensor):
            return add_to_dense(other, self, alpha=-1)
        return -self.sub(other)

    def __isub__(self, other):
        return self.sub_(other)

    def neg(self) -> SparseCOOTensor:
        return self.mul(-1)

    __neg__ = negative = neg

    def mul(self, other) -> SparseCOOTensor:
        """The values times a number or a 0-d dense tensor."""
        return self._scaled(_scalar_operand(other, "mul"))

    def mul_(self, other) -> SparseCOOTensor:
        return self._scale_(_scalar_operand(other, "mul_"))

    def div(self, other) -> SparseCOOTensor:
        return self._scaled(_scalar_operand(other, "div"), divide=True)

    def div_(self, other) -> SparseCOOTensor:
        return self._scale_(_scalar_operand(other, "div_"), divide=True)

    def _scale_(self, factor, divide: bool = False) -> SparseCOOTensor:
        """The values multiplied (or divided) by ``factor`` in place; they may be shared, as PyTorch's are."""
        with no_grad():
            if divide:
                self._sparse_values.div_(factor)
            else:
                self._sparse_values.mul_(factor)
        self._storage.version += 1
        return self

    __mul__ = __rmul__ = mul
    __imul__ = mul_
    __truediv__ = div
    __itruediv__ = div_

    def _scaled(self, factor, divide: bool = False) -> SparseCOOTensor:
        values = self._sparse_values / factor if divide else self._sparse_values * factor
        return SparseCOOTensor._build(self._sparse_indices, values, self._shape, self._coalesced)

    # copies and printing ---------------------------------------------------------------------------
    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = self.clone()
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        """Pickled as its indices, values, shape and coalesced flag."""
        return (_rebuild_sparse, (self._sparse_indices, self._sparse_values, tuple(self._shape), self._coalesced))

    def __repr__(self) -> str:
        return (
            f"tensor(indices={self._sparse_indices!r},\n       values={self._sparse_values!r},\n"
            f"       size={tuple(self._shape)}, nnz={self._nnz()}, layout=munet.sparse_coo)"
        )


_NO_AUTOGRAD = (
    "{what}: MuNet's sparse COO tensors carry no autograd history (they serve as gradients, e.g. of "
    "nn.Embedding(sparse=True)); compute with a dense tensor instead"
)


def _rebuild_sparse(indices, values, shape, coalesced) -> SparseCOOTensor:
    if not (isinstance(indices, Tensor) and isinstance(values, Tensor)):
        raise TypeError("unpickling a sparse tensor: expected indices and values tensors")
    return SparseCOOTensor._build(indices, values, shape, coalesced)


# helpers ---------------------------------------------------------------------------------------------------


def _linear_index(indices: Tensor, sparse_shape) -> Tensor:
    """Each index column as one row-major int64 number over ``sparse_shape``."""
    key = indices[0]
    for d in range(1, len(sparse_shape)):
        key = key * sparse_shape[d] + indices[d]
    return key


def _unravel(keys: Tensor, sparse_shape) -> Tensor:
    """The ``(sparse_dim, n)`` indices of row-major numbers ``keys`` over ``sparse_shape``."""
    rows = []
    for size in reversed(sparse_shape):
        rows.append(keys % size if size else keys)
        keys = keys // size if size else keys
    return stack(list(reversed(rows)))


def _scalar_operand(other, op: str):
    """``other`` if it is a number or a 0-d dense tensor (what sparse tensors multiply by)."""
    if isinstance(other, bool) or not isinstance(other, (numbers.Number, Tensor)):
        raise TypeError(f"{op}: a sparse COO tensor multiplies by a number or a 0-d tensor, got {type(other).__name__}")
    if isinstance(other, Tensor) and (other.is_sparse or other.ndim != 0):
        raise RuntimeError(
            f"{op}: MuNet multiplies a sparse COO tensor only by a number or a 0-d dense tensor, got "
            f"{'a sparse tensor' if other.is_sparse else f'a tensor of shape {list(other.shape)}'}"
        )
    return other


def _sum_parts(a: SparseCOOTensor, b: SparseCOOTensor, alpha, op: str):
    """The indices and values of ``a + alpha * b`` side by side, and whether the sum should be coalesced
    (both operands are, as PyTorch's merge of two coalesced tensors is)."""
    if a._shape != b._shape:
        raise RuntimeError(
            f"{op}: expected 'self' and 'other' to have same size, but self has size {list(a._shape)} while "
            f"other has size {list(b._shape)} (FYI: dense-sparse addition does not currently support broadcasting)"
        )
    if a.sparse_dim() != b.sparse_dim():
        raise RuntimeError(
            f"{op}: expected sparse tensors with the same sparse_dim, got {a.sparse_dim()} and {b.sparse_dim()}"
        )
    if a.device != b.device:
        raise RuntimeError(f"{op}: expected both sparse tensors on the same device, got {a.device} and {b.device}")
    dtype = D.promote_types(a._dtype, b._dtype)
    other = b._sparse_values if alpha == 1 else b._sparse_values * alpha
    with no_grad():
        values = cat([a._sparse_values.to(dtype), other.to(dtype)], 0)
        indices = cat([a._sparse_indices, b._sparse_indices], 1)
    return indices, values, a._coalesced and b._coalesced


def add_to_dense(dense: Tensor, sparse: SparseCOOTensor, *, alpha=1, out: Tensor | None = None) -> Tensor:
    """``dense + alpha * sparse`` as a new dense tensor, or added into ``out`` (``dense.add_(sparse)``)
    in place. Duplicate indices all add."""
    if tuple(dense.shape) != tuple(sparse.shape):
        raise RuntimeError(
            f"add: expected 'self' and 'other' to have same size, but self has size {list(dense.shape)} while "
            f"other has size {list(sparse.shape)} (FYI: dense-sparse addition does not currently support broadcasting)"
        )
    if dense.device != sparse.device:
        raise RuntimeError(f"add: expected both tensors on the same device, got {dense.device} and {sparse.device}")
    values = sparse._values() if alpha == 1 else sparse._values() * alpha
    if out is None:
        out = dense.to(D.promote_types(dense.dtype, sparse.dtype)).clone()
    elif not D.can_cast(D.promote_types(dense.dtype, sparse.dtype), dense.dtype):
        raise RuntimeError(
            f"add_: result type {sparse.dtype.name} can't be cast to the desired output type {dense.dtype.name}"
        )
    if sparse._nnz():
        out.index_put_(tuple(sparse._indices().unbind(0)), values.to(out.dtype), accumulate=True)
    return out


# construction ------------------------------------------------------------------------------------------------


def sparse_coo_tensor(
    indices,
    values,
    size=None,
    *,
    dtype=None,
    device=None,
    pin_memory: bool = False,
    requires_grad: bool = False,
    check_invariants: bool | None = None,
    is_coalesced: bool | None = None,
) -> SparseCOOTensor:
    """A sparse COO tensor with ``values[k]`` at column ``k`` of ``indices`` (``(sparse_dim, nnz)``),
    PyTorch's ``torch.sparse_coo_tensor``: ``size`` defaults to the smallest that holds the indices;
    duplicates are kept (``coalesce()`` sums them); ``check_invariants=True`` checks every index is in
    range. The indices and values are used as given, not copied, when their dtype and device fit.

    >>> s = munet.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    """
    op = "sparse_coo_tensor"
    if requires_grad:
        raise RuntimeError(_NO_AUTOGRAD.format(what=f"{op}: requires_grad=True"))
    if pin_memory:
        raise RuntimeError(f"{op}: pin_memory=True is not supported (MuNet allocates pageable host memory)")
    values = values if isinstance(values, Tensor) else creation.tensor(values, dtype=dtype, device=device)
    if values.is_sparse:
        raise TypeError(f"{op}: expected dense values, got a sparse tensor")
    if values.requires_grad and is_grad_enabled():
        raise RuntimeError(_NO_AUTOGRAD.format(what=f"{op}: values that require grad"))
    if dtype is not None or device is not None:
        values = values.to(device=device, dtype=dtype)
    indices = indices if isinstance(indices, Tensor) else creation.tensor(indices, dtype=D.int64, device=values.device)
    _check_parts(indices, values, op)
    indices = indices.to(D.int64)
    if indices.ndim == 1 and indices.shape[0] == 0:
        indices = indices.reshape(1, 0)
    sparse_dim, nnz = indices.shape
    if sparse_dim == 0:
        raise RuntimeError(
            f"{op}: MuNet's sparse COO tensors need at least one sparse dimension, got indices of shape "
            f"{list(indices.shape)}"
        )
    if size is None:
        shape = _inferred_size(indices, values)
    else:
        shape = tuple(int(n) for n in size)
        _check_size(shape, sparse_dim, values, op)
    if check_invariants:
        _check_in_bounds(indices, shape[:sparse_dim], op)
    result = SparseCOOTensor._build(indices, values, shape, False)
    if is_coalesced:
        if check_invariants and not _indices_coalesced(indices, shape[:sparse_dim]):
            raise RuntimeError(f"{op}: is_coalesced=True but the indices are not sorted and unique")
        result._coalesced = True
    return result


def _check_parts(indices: Tensor, values: Tensor, op: str) -> None:
    if indices.is_sparse or indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype is D.bool_:
        raise RuntimeError(f"{op}: indices must be an int64 tensor, got {indices.dtype.name}")
    if indices.device != values.device:
        raise RuntimeError(f"{op}: device of indices ({indices.device}) must match device of values ({values.device})")
    if indices.ndim != 2 and not (indices.ndim == 1 and indices.shape[0] == 0):
        raise RuntimeError(f"{op}: indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    nnz = indices.shape[-1] if indices.ndim == 2 else 0
    if values.ndim == 0 or values.shape[0] != nnz:
        got = values.shape[0] if values.ndim else "a 0-d tensor"
        raise RuntimeError(
            f"{op}: indices and values must have same nnz, but got nnz from indices: {nnz}, nnz from values: {got}"
        )


def _inferred_size(indices: Tensor, values: Tensor) -> tuple:
    sparse_dim, nnz = indices.shape
    if nnz == 0:
        sparse_shape = (0,) * sparse_dim
    else:
        sparse_shape = tuple(int(n) + 1 for n in indices.amax(1).tolist())
    return (*sparse_shape, *values.shape[1:])


def _check_size(shape: tuple, sparse_dim: int, values: Tensor, op: str) -> None:
    dense_dim = values.ndim - 1
    if len(shape) != sparse_dim + dense_dim:
        raise RuntimeError(
            f"{op}: 'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(shape)}, "
            f"sparse_dim = {sparse_dim}, dense_dim = {dense_dim}"
        )
    if tuple(values.shape[1:]) != shape[sparse_dim:]:
        raise RuntimeError(
            f"{op}: values has incorrect size, expected {[values.shape[0], *shape[sparse_dim:]]}, "
            f"got {list(values.shape)}"
        )


def _check_in_bounds(indices: Tensor, sparse_shape: tuple, op: str) -> None:
    if indices.shape[1] == 0:
        return
    low = indices.amin(1).tolist()
    high = indices.amax(1).tolist()
    for d, (lo, hi, size) in enumerate(zip(low, high, sparse_shape)):
        if lo < 0:
            raise RuntimeError(f"{op}: found negative index {lo} for dim {d}")
        if hi >= size:
            raise RuntimeError(
                f"{op}: size is inconsistent with indices: for dim {d}, size is {size} but found index {hi}"
            )


def _indices_coalesced(indices: Tensor, sparse_shape: tuple) -> bool:
    keys = _linear_index(indices, sparse_shape)
    return indices.shape[1] < 2 or bool((keys[1:] > keys[:-1]).all())


def _check_coo_target(layout, blocksize, op: str) -> None:
    if layout not in (None, sparse_coo) or blocksize is not None:
        raise RuntimeError(
            f"{op}: MuNet has only the sparse COO layout (layout=munet.sparse_coo, no blocksize), got "
            f"layout={layout!r}" + (f", blocksize={blocksize!r}" if blocksize is not None else "")
        )


def _wanted_sparse_dim(t: Tensor, sparse_dim, dense_dim) -> int:
    if sparse_dim is not None and dense_dim is not None:
        raise RuntimeError("to_sparse: give sparse_dim or dense_dim, not both")
    if dense_dim is not None:
        return t.ndim - int(dense_dim)
    return t.ndim if sparse_dim is None else int(sparse_dim)


# dense tensors' sparse methods ---------------------------------------------------------------------------


def dense_to_sparse(self: Tensor, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None) -> SparseCOOTensor:
    """``Tensor.to_sparse``: the nonzero entries (with ``sparse_dim`` < ndim, the slices over the first
    ``sparse_dim`` dims that hold a nonzero) as a coalesced COO tensor."""
    op = "to_sparse"
    _check_coo_target(layout, blocksize, op)
    wanted = _wanted_sparse_dim(self, sparse_dim, dense_dim)
    if not 0 < wanted <= self.ndim:
        raise RuntimeError(
            f"{op}: sparse_dim must be in [1, {self.ndim}] for a tensor of {self.ndim} dims, got {wanted} "
            "(MuNet's sparse COO tensors need at least one sparse dimension)"
        )
    if self.requires_grad and is_grad_enabled():
        raise RuntimeError(_NO_AUTOGRAD.format(what=f"{op} of a tensor that requires grad"))
    with no_grad():
        nonzero = self != 0
        if wanted < self.ndim:
            nonzero = nonzero.flatten(wanted).any(-1)
        indices = nonzero.nonzero().t().contiguous()
        values = self[tuple(indices.unbind(0))]
    return SparseCOOTensor._build(indices, values, self.shape, True)


def dense_to_sparse_coo(self: Tensor) -> SparseCOOTensor:
    return dense_to_sparse(self)


def dense_to_dense(self: Tensor, dtype=None, *, masked_grad=None) -> Tensor:
    """A strided tensor's ``to_dense()``: itself (or a cast to ``dtype``), as in PyTorch."""
    return self if dtype is None else self.to(dtype)


def sparse_mask(self: Tensor, mask: SparseCOOTensor) -> SparseCOOTensor:
    """``self``'s elements at ``mask``'s indices (its values are ignored), as a sparse tensor with
    those indices; ``self`` and ``mask`` have the same shape."""
    if not isinstance(mask, SparseCOOTensor):
        raise RuntimeError(f"sparse_mask: expected mask to be a sparse COO tensor, got layout {mask.layout!r}")
    if tuple(self.shape) != tuple(mask.shape):
        raise RuntimeError(
            f"sparse_mask(): operands have incompatible sizes; self has size {list(self.shape)} but mask has "
            f"size {list(mask.shape)}"
        )
    indices = mask._indices()
    values = self[tuple(indices.unbind(0))] if mask._nnz() else self.new_zeros((0, *self.shape[mask.sparse_dim() :]))
    return SparseCOOTensor._build(indices, values, self.shape, mask.is_coalesced())


def sparse_only(name: str):
    """The method ``name`` of a strided tensor for a query only sparse tensors answer (``indices``,
    ``values``, ``coalesce``, ...): it raises PyTorch's error."""
    layouts = "sparse tensor" if name == "values" else "sparse coordinate tensor"

    def method(self: Tensor):
        raise RuntimeError(f"{name} expected {layouts} layout but got Strided")

    method.__name__ = name
    return method
