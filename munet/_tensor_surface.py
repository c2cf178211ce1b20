"""The rest of ``torch.Tensor``'s surface that scripts touch: device and layout predicates
(``is_vulkan``, ``is_sparse``, ...), ``layout``, ``ndimension``, ``output_nr``, ``dim_order``,
``get_device``, the legacy ``new``, ``apply_``/``map_``/``map2_`` (Python callables on cpu),
``sum_to_size``, ``split_with_sizes`` and the ``unsafe_*`` splits, ``resize``/``resize_as``,
``as_subclass``, ``module_load``; and their ``munet.*`` function forms
(``munet.is_nonzero(x)`` is ``x.is_nonzero()``).

Dense MuNet tensors are strided on cpu, cuda, vulkan or webgpu, so the predicates for other layouts
(sparse, quantized, nested, mkldnn) and devices (meta, mps, xla, xpu, ipu, maia, mtia) are False, and
``is_vulkan`` is True on the vulkan device; ``munet.sparse``'s COO tensors answer ``is_sparse`` and
``layout`` themselves.
"""

from __future__ import annotations

from munet import _memory_format as MF
from munet._tensor import Size, Tensor

__all__ = [
    "get_device",
    "is_distributed",
    "is_nonzero",
    "is_same_size",
    "is_signed",
    "split_with_sizes",
    "unsafe_chunk",
    "unsafe_split",
    "unsafe_split_with_sizes",
]

_FALSE_PROPERTIES = (
    "is_ipu",
    "is_maia",
    "is_meta",
    "is_mkldnn",
    "is_mps",
    "is_mtia",
    "is_nested",
    "is_quantized",
    "is_sparse",
    "is_sparse_csr",
    "is_xla",
    "is_xpu",
)


def is_nonzero(input: Tensor) -> bool:
    """Whether the one element of ``input`` is nonzero; more or fewer elements raise, as in PyTorch."""
    n = input.numel()
    if n != 1:
        what = "no values" if n == 0 else "more than one value"
        raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
    return bool(input.item())


def is_same_size(input: Tensor, other: Tensor) -> bool:
    return input.shape == other.shape


def is_signed(input: Tensor) -> bool:
    return input.is_signed()


def is_distributed(input: Tensor) -> bool:
    """False: a MuNet tensor lives in one process (``munet.distributed`` moves copies)."""
    return False


def get_device(input: Tensor) -> int:
    """The device index: -1 for cpu tensors, as in PyTorch."""
    return -1 if input.device.type == "cpu" else input.device.index or 0


def split_with_sizes(input: Tensor, split_sizes, dim: int = 0):
    """Views of the consecutive pieces of ``split_sizes`` along ``dim`` (they must add up to its size)."""
    from munet.ops.movement import split

    if not isinstance(split_sizes, (list, tuple, Size)):
        raise TypeError(f"split_with_sizes: expected a list of sizes, got {type(split_sizes).__name__}")
    return split(input, list(split_sizes), dim)


def unsafe_split(input: Tensor, split_size: int, dim: int = 0):
    """``split``: MuNet lets every output of a split be written in place, so the unsafe form is it."""
    from munet.ops.movement import split

    return split(input, split_size, dim)


def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0):
    return split_with_sizes(input, split_sizes, dim)


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0):
    from munet.ops.movement import chunk

    return chunk(input, chunks, dim)


def ndimension(self: Tensor) -> int:
    return self.ndim


def const_data_ptr(self: Tensor) -> int:
    return self.data_ptr()


def dim_order(self: Tensor, *, ambiguity_check=False) -> tuple:
    """The dimensions from outermost to innermost in memory (PyTorch's rule for ties and size-1 dims).
    ``ambiguity_check=True`` (or a list of memory formats it may match) raises when that order is not
    unique."""
    shape, stride = tuple(self.shape), self.stride()
    formats = ambiguity_check if isinstance(ambiguity_check, list) else []
    check = ambiguity_check if isinstance(ambiguity_check, bool) else True
    if check and (len(set(stride)) != len(stride) or 1 in shape):
        matches = sum(1 for fmt in formats if self.is_contiguous(memory_format=fmt))
        if matches != 1:
            raise RuntimeError(
                "The tensor does not have unique dim order, or cannot map to exact one of the given memory formats."
            )
    perm, ambiguous = _physical_order(self, shape, stride, bool(ambiguity_check))
    if ambiguous:
        raise RuntimeError("The tensor does not have unique dim order.")
    return tuple(perm)


def _physical_order(self: Tensor, shape, stride, ambiguity_check: bool):
    """PyTorch's ``compute_elementwise_output_logical_to_physical_perm`` for one tensor."""
    ndim = len(shape)
    if ndim <= 1:
        return list(range(ndim)), False
    rowmajor = self.is_contiguous()
    channels_last = ndim == 4 and self.is_contiguous(memory_format=MF.channels_last)
    if rowmajor and not channels_last:
        return list(range(ndim)), False
    if channels_last and not rowmajor:
        return [0, *range(2, ndim), 1], False

    def should_swap(a: int, b: int) -> int:
        sa, sb = stride[a], stride[b]
        if sa == 0 or sb == 0:
            return 0
        if sa == sb:
            return 0 if _ge(shape[b], shape[a]) else 1
        if _ge(sb, sa):
            return -1
        return 1 if _ge(sa, sb) else 0

    perm = list(reversed(range(ndim)))
    for i in range(1, ndim):
        dim1 = i
        for dim0 in reversed(range(i)):
            order = should_swap(perm[dim0], perm[dim1])
            if order > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif order < 0:
                break
    ambiguous = ambiguity_check and any(should_swap(perm[i], perm[i + 1]) != -1 for i in range(ndim - 1))
    return list(reversed(perm)), ambiguous


def _ge(a: int, b: int) -> bool:
    return b == 0 or (a != 0 and (a >= b or a % b == 0))


def new(self: Tensor, *args, device=None) -> Tensor:
    """PyTorch's legacy constructor with this tensor's dtype and device: ``x.new(2, 3)`` is uninitialized,
    ``x.new([1, 2])`` holds the data, ``x.new()`` is empty."""
    from munet._compat import legacy_construct

    return legacy_construct(self.dtype, args, self.device if device is None else device, "Tensor.new")


def _host_callable_check(self: Tensor, op: str) -> None:
    if self.device.type != "cpu":
        raise TypeError(f"{op} is only implemented on CPU tensors, got a tensor on {self.device}")
    if self.requires_grad:
        raise RuntimeError(f"Can't call {op}() on Variable that requires grad. Use var.detach().{op}() instead.")


def _write_values(self: Tensor, values: list) -> Tensor:
    from munet.ops.creation import tensor

    self.copy_(tensor(values, dtype=self.dtype).reshape(self.shape))
    return self


def _flat_values(t: Tensor, shape) -> list:
    return t.expand(shape).reshape(-1).tolist()


def apply_(self: Tensor, callable) -> Tensor:
    """In place: each element replaced by ``callable(element)`` (a Python function; cpu only, slow)."""
    _host_callable_check(self, "apply_")
    return _write_values(self, [callable(v) for v in _flat_values(self, self.shape)])


def map_(self: Tensor, tensor: Tensor, callable) -> Tensor:
    """In place: ``self[i] = callable(self[i], tensor[i])``, ``tensor`` broadcast to this shape."""
    _host_callable_check(self, "map_")
    pairs = zip(_flat_values(self, self.shape), _flat_values(tensor, self.shape))
    return _write_values(self, [callable(a, b) for a, b in pairs])


def map2_(self: Tensor, x: Tensor, y: Tensor, callable) -> Tensor:
    """In place: ``self[i] = callable(self[i], x[i], y[i])``, ``x`` and ``y`` broadcast to this shape."""
    _host_callable_check(self, "map2_")
    triples = zip(_flat_values(self, self.shape), _flat_values(x, self.shape), _flat_values(y, self.shape))
    return _write_values(self, [callable(a, b, c) for a, b, c in triples])


def sum_to_size(self: Tensor, *size) -> Tensor:
    """Sum to ``size``, which must broadcast to this tensor's shape (the gradient of a broadcast)."""
    from munet.ops._utils import as_tuple_shape, reduce_grad

    shape = as_tuple_shape(size, "sum_to_size")
    lead = self.ndim - len(shape)
    if lead < 0 or any(n not in (1, m) for n, m in zip(shape, self.shape[lead:])):
        raise RuntimeError(f"sum_to_size: size {list(shape)} is not expandable to size {list(self.shape)}")
    return reduce_grad(self, shape)


def resize_as_(self: Tensor, the_template: Tensor, *, memory_format=None) -> Tensor:
    return self.resize_(the_template.shape, memory_format=memory_format)


def resize(self: Tensor, *sizes) -> Tensor:
    """Out of place (deprecated in PyTorch): a new tensor of ``sizes`` holding this one's elements in
    row-major order; it must have as many."""
    import warnings

    from munet.ops._utils import as_tuple_shape

    warnings.warn("non-inplace resize is deprecated", stacklevel=2)
    return self.reshape(as_tuple_shape(sizes, "resize")).clone()


def resize_as(self: Tensor, tensor: Tensor) -> Tensor:
    import warnings

    warnings.warn("non-inplace resize_as is deprecated", stacklevel=2)
    return self.reshape(tensor.shape).clone()


def as_subclass(self: Tensor, cls) -> Tensor:
    """This tensor as an instance of ``cls`` (a Tensor subclass) over the same memory, keeping its place
    in the autograd graph."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass: expected a subclass of munet.Tensor, got {cls!r}")
    out = cls._make(self._storage, self._shape, self._stride, self._offset, self._dtype, self._data, self._base)
    out._requires_grad, out._grad_fn, out._output_nr = self._requires_grad, self._grad_fn, self._output_nr
    out._inference = self._inference
    return out


def module_load(self: Tensor, other: Tensor, assign: bool = False) -> Tensor:
    """What ``load_state_dict`` stores for ``other`` into this parameter or buffer when tensors are
    swapped: ``other.detach()`` with ``assign``, else ``self.copy_(other).detach()``."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


@property
def _layout(self: Tensor):
    return MF.strided


@property
def _output_nr(self: Tensor) -> int:
    return self._output_nr


@property
def _is_vulkan(self: Tensor) -> bool:
    return self.device.type == "vulkan"


@property
def _name(self: Tensor):
    """None: MuNet has no named tensors (PyTorch's ``Tensor.name`` is None for ordinary tensors)."""
    return None


_never = property(lambda self: False)


def bind() -> None:
    for name in _FALSE_PROPERTIES:
        setattr(Tensor, name, _never)
    Tensor.layout, Tensor.output_nr, Tensor.is_vulkan, Tensor.name = _layout, _output_nr, _is_vulkan, _name
    for fn in (is_nonzero, is_same_size, is_distributed, get_device, split_with_sizes, unsafe_split,
               unsafe_split_with_sizes, unsafe_chunk, ndimension, const_data_ptr, dim_order,
               new, apply_, map_, map2_, sum_to_size, resize_as_, resize, resize_as, as_subclass, module_load):  # fmt: skip
        setattr(Tensor, fn.__name__, fn)
