"""Shared helpers of op definitions: broadcasting, dim normalization, float result dtype, gradient reduction."""

from __future__ import annotations

from munet import _dtype as D
from munet._tensor import Tensor


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def shape_of(x) -> tuple:
    return x._shape if isinstance(x, Tensor) else tuple(getattr(x, "shape", ()))


class BroadcastError(RuntimeError):
    """Shapes that do not broadcast. A shape rule shared by many ops raises it unnamed
    (``broadcast_shapes(..., op=None)``); the dispatcher names the op it ran (:meth:`naming`)."""

    def __init__(self, reason: str, op: str | None = None):
        super().__init__(reason if op is None else f"{op}: {reason}")
        self.reason, self.op = reason, op

    def naming(self, op: str) -> BroadcastError:
        return self if self.op is not None else BroadcastError(self.reason, op)


def broadcast_shapes(*shapes, op: str | None = "broadcast_shapes") -> tuple:
    """PyTorch/NumPy broadcasting of shapes; raises :class:`BroadcastError` naming ``op`` when they
    don't broadcast (``op=None``: unnamed, for the dispatcher to name)."""
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return tuple(shapes[0])
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        offset = ndim - len(s)
        for i, n in enumerate(s):
            cur = out[offset + i]
            if cur == n or n == 1:
                continue
            if cur == 1:
                out[offset + i] = n
                continue
            raise BroadcastError(
                "the size of tensors must match or be 1 to broadcast, got shapes "
                + " and ".join(str(list(x)) for x in shapes)
                + f" (mismatch at dimension {i - len(s)})",
                op,
            )
    return tuple(out)


def wrap_dim(dim: int, ndim: int, op: str) -> int:
    rank = max(ndim, 1)
    if not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if not -rank <= dim < rank:
        raise IndexError(
            f"{op}: dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})"
        )
    return dim % rank


def wrap_dims(dims, ndim: int, op: str) -> tuple:
    """Normalize ``dim`` (None, int, or sequence) to a sorted tuple of non-negative dims."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    out = tuple(sorted(wrap_dim(d, ndim, op) for d in dims))
    if len(set(out)) != len(out):
        raise RuntimeError(f"{op}: dim {list(dims)} appears multiple times in the list of dims")
    return out


def float_result_type(*operands):
    """Promotion, then integers and bool become the default float (``sqrt``, ``div``, ...)."""
    d = D.result_type(*operands)
    return d if d.is_floating_point else D.get_default_dtype()


def reduce_grad(grad, shape):
    """Sum ``grad`` down to ``shape``: the gradient of broadcasting an input of ``shape``."""
    if grad._shape == shape:
        return grad
    shape = tuple(shape)
    if tuple(grad.shape) == shape:
        return grad
    lead = grad.ndim - len(shape)
    dims = list(range(lead))
    dims += [lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1]
    out = grad.sum(dim=dims, keepdim=True) if dims else grad
    if lead:
        out = out.reshape(shape)
    return out


def factory_shape(size_args: tuple, size, op: str) -> tuple:
    """The shape a factory was asked for: positional (``f(2, 3)``, ``f((2, 3))``) or ``size=``, not both."""
    if size is not None:
        if size_args:
            raise TypeError(f"{op}() got multiple values for argument 'size'")
        size_args = (size,)
    return as_tuple_shape(size_args, op)


def check_factory_options(op: str, *, layout=None, pin_memory: bool = False, memory_format=None) -> None:
    """Accept PyTorch's layout/pin_memory/memory_format arguments at their defaults, refuse the rest.

    MuNet's factories make dense row-major tensors in pageable memory: ``layout`` may be ``None`` or
    ``munet.strided``, ``memory_format`` ``None``, ``contiguous_format`` or ``preserve_format`` (both
    row-major here), and ``pin_memory`` only ``False``.
    """
    if layout is None and memory_format is None and pin_memory is False:
        return  # the defaults: nothing to check
    from munet import _memory_format as MF

    if layout is not None and layout is not MF.strided:
        raise NotImplementedError(
            f"{op}: MuNet's factories make strided tensors, got layout={layout!r}; build a sparse COO tensor "
            "with munet.sparse_coo_tensor or Tensor.to_sparse()"
        )
    if pin_memory:
        raise NotImplementedError(f"{op}: pin_memory=True is not supported (MuNet allocates pageable host memory)")
    fmt = MF.check_memory_format(memory_format, op)
    if fmt in MF.CHANNELS_LAST_ORDER:
        raise NotImplementedError(
            f"{op}: MuNet's factories make row-major tensors, got memory_format={fmt!r}; "
            f"use .contiguous(memory_format={fmt!r}) on the result"
        )


def as_tuple_shape(size, op: str) -> tuple:
    """Accept ``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` and ``f(Size)`` forms."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if type(s) is not int and hasattr(s, "__index__"):
            s = s.__index__()
        if not isinstance(s, int):
            raise TypeError(f"{op}: size must be a sequence of ints, got {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"{op}: negative dimension {s} in size {list(size)}")
        out.append(s)
    return tuple(out)
