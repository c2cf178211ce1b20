"""PyTorch names that older scripts use: the legacy tensor types (``munet.FloatTensor``,
``munet.LongTensor``, ...), ``Tensor.type()`` and ``munet._assert``.

A legacy type is a constructor and an ``isinstance`` test, as in PyTorch: ``FloatTensor(2, 3)``
is an uninitialized float32 tensor, ``LongTensor([1, 2])`` holds the data, and
``isinstance(x, munet.FloatTensor)`` holds for a float32 cpu tensor. The cuda types
(``munet.cuda.FloatTensor``, ...) do the same on the current cuda device. The tensors themselves
are plain ``munet.Tensor`` objects.
"""

from __future__ import annotations

from munet import _dtype as D
from munet._tensor import Size, Tensor


class _LegacyTensorType(type):
    """The metaclass of the legacy types: calling one builds a tensor of its dtype on its device type."""

    dtype: D.dtype
    device_type: str

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == cls.device_type

    def __call__(cls, *args, device=None):
        device = cls.device_type if device is None and cls.device_type != "cpu" else device
        return legacy_construct(cls.dtype, args, device, cls.__name__, cls.device_type)

    def __repr__(cls) -> str:
        where = "" if cls.device_type == "cpu" else f"{cls.device_type}."
        return f"<class 'munet.{where}{cls.__name__}'>"


def legacy_construct(dtype: D.dtype, args: tuple, device, op: str, device_type: str | None = None) -> Tensor:
    """PyTorch's legacy constructor forms: ``(t)`` aliases a tensor of ``dtype`` (moved to
    ``device_type`` when given and it is elsewhere), ``(data)`` copies data, ``(*sizes)`` is
    uninitialized, ``()`` is empty."""
    from munet.ops import creation

    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype is not dtype:
            raise TypeError(f"{op}: expected a tensor of {dtype!r}, got {args[0].dtype!r}")
        t = args[0].detach()
        return t if device_type is None or t.device.type == device_type else t.to(device or device_type)
    if len(args) == 1 and not isinstance(args[0], (int, Size)):  # a Size is a shape, a tuple is data
        return creation.tensor(args[0], dtype=dtype, device=device)
    return creation.empty(*args if args else (0,), dtype=dtype, device=device)


def _legacy_type(name: str, dtype: D.dtype, device_type: str = "cpu") -> type:
    doc = f"Legacy constructor of {dtype!r} tensors on {device_type}."
    return _LegacyTensorType(name, (), {"dtype": dtype, "device_type": device_type, "__doc__": doc})


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
# munet.cuda.FloatTensor, ...: the same types on the cuda device type
CUDA_LEGACY_TYPES = {name: _legacy_type(name, t.dtype, "cuda") for name, t in LEGACY_TYPES.items()}
_COMPLEX_TYPE_NAMES = {"complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor"}  # names, no types


def legacy_type_name(dtype) -> str:
    """PyTorch's legacy type name of ``dtype`` (``FloatTensor``, ``ComplexDoubleTensor``)."""
    legacy = _BY_DTYPE.get(dtype)
    return legacy.__name__ if legacy is not None else _COMPLEX_TYPE_NAMES[dtype.name]


def _legacy_of_type_name(name: str) -> type:
    """The legacy type a name stands for: ``"torch.FloatTensor"``, ``"munet.cuda.LongTensor"``."""
    prefix, _, short = name.rpartition(".")
    types = {"torch": LEGACY_TYPES, "munet": LEGACY_TYPES, "torch.cuda": CUDA_LEGACY_TYPES}
    types["munet.cuda"] = CUDA_LEGACY_TYPES
    legacy = types.get(prefix, {}).get(short)
    if legacy is None:
        raise ValueError(
            f"Tensor.type: invalid type {name!r} (expected e.g. 'torch.FloatTensor' or 'torch.cuda.FloatTensor')"
        )
    return legacy


def tensor_type(self, dtype=None, non_blocking: bool = False):
    """Without ``dtype``: the legacy type name (``'munet.FloatTensor'``, ``'munet.vulkan.FloatTensor'``).
    With a dtype, a legacy type or its name: this tensor cast to it (itself if already of it); a
    cuda type (``'torch.cuda.FloatTensor'``) also moves a tensor of another device type to cuda."""
    if dtype is None:
        where = "" if self.device.type == "cpu" else f"{self.device.type}."
        return f"munet.{where}{legacy_type_name(self.dtype)}"
    if isinstance(dtype, str):
        dtype = _legacy_of_type_name(dtype)
    if isinstance(dtype, _LegacyTensorType):
        if dtype.device_type == "cuda" and self.device.type != "cuda":
            return self.to(device="cuda", dtype=dtype.dtype, non_blocking=non_blocking)
        dtype = dtype.dtype
    if not isinstance(dtype, D.dtype):
        raise TypeError(f"Tensor.type: expected a dtype, a legacy type or its name, got {type(dtype).__name__}")
    return self if dtype is self.dtype else self.to(dtype)


def _assert(condition, message) -> None:
    """``assert condition, message`` as a function (PyTorch's ``torch._assert``), kept under ``-O``."""
    if not condition:
        raise AssertionError(message)
