"""PyTorch names that older scripts use: the legacy tensor types (``munet.FloatTensor``,
``munet.LongTensor``, ...), ``Tensor.type()`` and ``munet._assert``.

A legacy type is a constructor and an ``isinstance`` test, as in PyTorch: ``FloatTensor(2, 3)``
is an uninitialized float32 tensor, ``LongTensor([1, 2])`` holds the data, and
``isinstance(x, munet.FloatTensor)`` holds for a float32 cpu tensor. The tensors themselves are
plain ``munet.Tensor`` objects.
"""

from __future__ import annotations

from munet import _dtype as D
from munet._tensor import Size, Tensor


class _LegacyTensorType(type):
    """The metaclass of the legacy types: calling one builds a tensor of its dtype on cpu."""

    dtype: D.dtype

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args, device=None):
        return legacy_construct(cls.dtype, args, device, cls.__name__)

    def __repr__(cls) -> str:
        return f"<class 'munet.{cls.__name__}'>"


def legacy_construct(dtype: D.dtype, args: tuple, device, op: str) -> Tensor:
    """PyTorch's legacy constructor forms: ``(t)`` aliases a tensor of ``dtype``, ``(data)`` copies
    data, ``(*sizes)`` is uninitialized, ``()`` is empty."""
    from munet.ops import creation

    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype is not dtype:
            raise TypeError(f"{op}: expected a tensor of {dtype!r}, got {args[0].dtype!r}")
        return args[0].detach()
    if len(args) == 1 and not isinstance(args[0], (int, Size)):  # a Size is a shape, a tuple is data
        return creation.tensor(args[0], dtype=dtype, device=device)
    return creation.empty(*args if args else (0,), dtype=dtype, device=device)


def _legacy_type(name: str, dtype: D.dtype) -> type:
    return _LegacyTensorType(name, (), {"dtype": dtype, "__doc__": f"Legacy constructor of {dtype!r} tensors."})


FloatTensor = _legacy_type("FloatTensor", D.float32)
DoubleTensor = _legacy_type("DoubleTensor", D.float64)
HalfTensor = _legacy_type("HalfTensor", D.float16)
BFloat16Tensor = _legacy_type("BFloat16Tensor", D.bfloat16)
ByteTensor = _legacy_type("ByteTensor", D.uint8)
CharTensor = _legacy_type("CharTensor", D.int8)
ShortTensor = _legacy_type("ShortTensor", D.int16)
IntTensor = _legacy_type("IntTensor", D.int32)
LongTensor = _legacy_type("LongTensor", D.int64)
BoolTensor = _legacy_type("BoolTensor", D.bool_)
LEGACY_TYPES = {
    t.__name__: t
    for t in (
        FloatTensor,
        DoubleTensor,
        HalfTensor,
        BFloat16Tensor,
        ByteTensor,
        CharTensor,
        ShortTensor,
        IntTensor,
        LongTensor,
        BoolTensor,
    )
}
_BY_DTYPE = {t.dtype: t for t in LEGACY_TYPES.values()}


def _dtype_of_type_name(name: str) -> D.dtype:
    """The dtype a legacy type name stands for: ``"torch.FloatTensor"``, ``"munet.LongTensor"``."""
    prefix, _, short = name.rpartition(".")
    legacy = LEGACY_TYPES.get(short)
    if legacy is None or prefix not in ("torch", "munet"):
        raise ValueError(f"Tensor.type: invalid type {name!r} (expected e.g. 'torch.FloatTensor'; cpu types only)")
    return legacy.dtype


def tensor_type(self, dtype=None, non_blocking: bool = False):
    """Without ``dtype``: the legacy type name (``'munet.FloatTensor'``, ``'munet.vulkan.FloatTensor'``).
    With a dtype, a legacy type or its name: this tensor cast to it (itself if already of it)."""
    if dtype is None:
        where = "" if self.device.type == "cpu" else f"{self.device.type}."
        return f"munet.{where}{_BY_DTYPE[self.dtype].__name__}"
    if isinstance(dtype, str):
        dtype = _dtype_of_type_name(dtype)
    elif isinstance(dtype, _LegacyTensorType):
        dtype = dtype.dtype
    if not isinstance(dtype, D.dtype):
        raise TypeError(f"Tensor.type: expected a dtype, a legacy type or its name, got {type(dtype).__name__}")
    return self if dtype is self.dtype else self.to(dtype)


def _assert(condition, message) -> None:
    """``assert condition, message`` as a function (PyTorch's ``torch._assert``), kept under ``-O``."""
    if not condition:
        raise AssertionError(message)
