"""Memory formats and layouts: PyTorch's ``munet.channels_last``, ``munet.strided``, ...

A memory format names an order in which a tensor's dims are laid out in memory. MuNet makes
tensors row-major (``contiguous_format``); ``clone``, ``contiguous`` and ``to`` honour
``channels_last`` (NHWC strides for a 4-D tensor) and ``channels_last_3d`` (NDHWC, 5-D) as views
with those strides, and ``Tensor.is_contiguous(memory_format=)`` answers for each format.
``preserve_format`` (the default of copies) gives a row-major copy: unlike PyTorch, MuNet does not
carry a dense input's strides over to its copy.

Layouts: ``strided`` (every dense tensor) and ``sparse_coo`` (``munet.sparse``'s COO tensors, which
support only the operations ``docs/sparse.md`` lists). A tensor whose layout does not support an
operation raises :class:`LayoutError` naming the operation.
"""

from __future__ import annotations


class memory_format:  # noqa: N801 - PyTorch's name
    """A memory format; compare with ``is``. Pickles by name."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"munet.{self.name}"

    def __reduce__(self):
        return self.name  # the module-level instance of that name


class layout:  # noqa: N801 - PyTorch's name
    """A tensor layout: ``strided`` (dense tensors with strides) or ``sparse_coo``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"munet.{self.name}"

    def __reduce__(self):
        return self.name


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
strided = layout("strided")
sparse_coo = layout("sparse_coo")


class LayoutError(RuntimeError):
    """An operation that a tensor's layout does not support (a dense op on a sparse COO tensor).

    ``reason`` says what is refused and what the layout supports; :meth:`naming` gives the error
    prefixed with the operation's name, which the dispatcher adds when an op meets such a tensor."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason

    def naming(self, op: str) -> LayoutError:
        return LayoutError(f"{op}: {self.reason}")


# channels-last formats: (the rank they need, the dims from outermost to innermost in memory)
CHANNELS_LAST_ORDER = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def check_memory_format(fmt, op: str):
    """``fmt`` if it is a memory format (None reads as ``preserve_format``); else TypeError naming ``op``."""
    if fmt is None:
        return preserve_format
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{op}: memory_format must be a munet.memory_format, got {type(fmt).__name__}")
    return fmt


def channels_last_order(fmt, ndim: int, op: str) -> tuple | None:
    """The memory order of ``fmt`` for a tensor of rank ``ndim`` (None for row-major formats); a
    channels-last format on the wrong rank raises as in PyTorch."""
    entry = CHANNELS_LAST_ORDER.get(fmt)
    if entry is None:
        return None
    rank, order = entry
    if ndim != rank:
        raise RuntimeError(f"{op}: required rank {rank} tensor to use {fmt.name} format, got rank {ndim}")
    return order


def is_dense_in_order(shape, stride, order) -> bool:
    """Whether ``stride`` lays ``shape`` out densely with ``order[-1]`` innermost (size-1 dims skipped,
    as PyTorch's channels-last check does)."""
    expected = 1
    for d in reversed(order):
        if shape[d] != 1:
            if stride[d] != expected:
                return False
            expected *= shape[d]
    return True


def channels_last_strides(shape, order) -> tuple:
    """PyTorch's strides for ``shape`` laid out in ``order`` (from raw sizes, so a size-0 dim zeroes
    the strides outside it, as PyTorch's channels-last strides do)."""
    stride = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        stride[d] = acc
        acc *= shape[d]
    return tuple(stride)


def _strides_like(shape, stride, order) -> bool:
    """PyTorch's ``is_channels_last_strides_2d/3d``: whether the strides are ordered like ``order``
    (ties on size-1 dims fall back to row-major, as PyTorch decides them)."""
    if stride[order[-1]] == 0:
        return False
    channel = order[-1]
    low = 0
    for d in reversed(order):
        if shape[d] == 0 or stride[d] < low:
            return False
        if d == 0 and low == stride[channel]:
            return False
        low = stride[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def suggest_memory_format(shape, stride):
    """The memory format PyTorch reads off these strides (``suggest_memory_format``)."""
    for fmt, (rank, order) in CHANNELS_LAST_ORDER.items():
        if len(shape) == rank and _strides_like(shape, stride, order):
            return fmt
    return contiguous_format
