"""MuNet dtypes and PyTorch's type-promotion rules.

A :class:`dtype` names an element type and knows its NumPy equivalent (bfloat16 comes from
``ml_dtypes``). Promotion follows PyTorch: categories bool < integer < floating < complex, and among
operands of the winning category, dimensioned tensors outrank zero-dim tensors, which
outrank Python scalars.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np


class dtype:  # noqa: N801 - PyTorch's name
    """An element type. Compare with ``is`` or ``==``; instances are singletons."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_signed", "_rank", "is_complex")

    def __init__(self, name: str, np_dtype, rank: int, floating: bool, signed: bool, complex_: bool = False):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.is_floating_point = floating
        self.is_signed = signed
        self.is_complex = complex_
        self._rank = rank

    def __repr__(self) -> str:
        return f"munet.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    def to_real(self) -> dtype:
        """The dtype of the real and imaginary parts of a complex dtype; a real dtype itself."""
        return _REAL_OF.get(self, self)

    def to_complex(self) -> dtype:
        """The complex dtype whose parts are this floating dtype (float16/bfloat16 widen to complex64)."""
        if self.is_complex:
            return self
        if not self.is_floating_point:
            raise TypeError(f"to_complex: expected a floating dtype, got {self!r}")
        return complex128 if self is float64 else complex64

    @property
    def category(self) -> int:
        """0 for bool, 1 for integers, 2 for floating types, 3 for complex types."""
        if self is bool_:
            return 0
        if self.is_complex:
            return 3
        return 2 if self.is_floating_point else 1


bool_ = dtype("bool", np.bool_, 0, False, False)
uint8 = dtype("uint8", np.uint8, 1, False, False)
int8 = dtype("int8", np.int8, 2, False, True)
int16 = dtype("int16", np.int16, 3, False, True)
int32 = dtype("int32", np.int32, 4, False, True)
int64 = dtype("int64", np.int64, 5, False, True)
float16 = dtype("float16", np.float16, 6, True, True)
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, 6, True, True)
float32 = dtype("float32", np.float32, 7, True, True)
float64 = dtype("float64", np.float64, 8, True, True)
# complex: cpu only (munet/ops/complex.py); not in ALL_DTYPES, the dtypes every device holds
complex64 = dtype("complex64", np.complex64, 7, False, True, complex_=True)
complex128 = dtype("complex128", np.complex128, 8, False, True, complex_=True)

ALL_DTYPES = (float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64, bool_)
FLOATING_DTYPES = (float32, float64, float16, bfloat16)
COMPLEX_DTYPES = (complex64, complex128)
_REAL_OF = {complex64: float32, complex128: float64}
_BY_NAME = {d.name: d for d in ALL_DTYPES + COMPLEX_DTYPES}
_BY_NP = {d.np: d for d in ALL_DTYPES + COMPLEX_DTYPES}


def _by_name(name: str) -> dtype:
    return _BY_NAME[name]


def from_numpy_dtype(np_dtype) -> dtype:
    """The MuNet dtype for a NumPy dtype; raises TypeError for unsupported ones."""
    d = _BY_NP.get(np.dtype(np_dtype))
    if d is None:
        supported = ", ".join(x.name for x in ALL_DTYPES + COMPLEX_DTYPES)
        raise TypeError(f"munet: unsupported NumPy dtype {np.dtype(np_dtype)}; supported: {supported}")
    return d


_default_dtype = float32


def get_default_dtype() -> dtype:
    return _default_dtype


def set_default_dtype(d: dtype) -> None:
    """Set the dtype of floating tensors created from Python floats (float32 or float64, ...)."""
    global _default_dtype
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"set_default_dtype: expected a floating dtype, got {d!r}")
    _default_dtype = d


def promote_types(a: dtype, b: dtype) -> dtype:
    """PyTorch's ``promote_types`` for the supported dtypes."""
    if a is b:
        return a
    if a.is_complex or b.is_complex:  # the complex dtype of the wider real part
        parts = [d.to_real() if d.is_complex else d for d in (a, b)]
        return complex128 if float64 in parts else complex64
    if a.is_floating_point and b.is_floating_point:
        if a._rank == b._rank:  # float16 with bfloat16
            return float32
        return a if a._rank > b._rank else b
    if a.is_floating_point:
        return a
    if b.is_floating_point:
        return b
    if a is bool_:
        return b
    if b is bool_:
        return a
    if {a, b} == {uint8, int8}:
        return int16
    if a is uint8 or b is uint8:
        other = b if a is uint8 else a
        return other if other._rank > int8._rank else int16
    return a if a._rank > b._rank else b


def scalar_dtype(value) -> dtype:
    """The dtype a Python scalar takes when it becomes a tensor on its own."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return _default_dtype
    if isinstance(value, (complex, np.complexfloating)):
        return _default_dtype.to_complex()
    raise TypeError(f"munet: expected a number, got {type(value).__name__}")


def _combine_categories(higher: dtype | None, lower: dtype | None) -> dtype | None:
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:  # a floating tensor keeps its precision; an integer one takes the complex dtype
        return higher.to_complex() if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is bool_ or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def result_type(*operands) -> dtype:
    """The dtype of an op over ``operands`` (tensors and Python scalars), as PyTorch computes it."""
    if len(operands) == 2:
        fast = _result_type_fast(*operands)
        if fast is not None:
            return fast
    dim_result = zero_result = wrapped_result = None
    for x in operands:
        d = getattr(x, "dtype", None)
        if isinstance(d, dtype):
            if x.ndim > 0:
                dim_result = d if dim_result is None else promote_types(dim_result, d)
            else:
                zero_result = d if zero_result is None else promote_types(zero_result, d)
        elif x is not None:
            d = scalar_dtype(x)
            wrapped_result = d if wrapped_result is None else promote_types(wrapped_result, d)
    result = _combine_categories(_combine_categories(dim_result, zero_result), wrapped_result)
    if result is None:
        raise TypeError("result_type: expected at least one tensor or number")
    return result


def _result_type_fast(a, b):
    """The common cases: two tensors of one dtype, or a tensor and a number of a lower category."""
    da = getattr(a, "dtype", None)
    db = getattr(b, "dtype", None)
    if da is not None and da is db:
        return da
    if isinstance(da, dtype) and db is None and isinstance(b, (int, float)):
        category = 2 if isinstance(b, float) else (0 if isinstance(b, bool) else 1)
        if category <= da.category and not (category == 1 and da is bool_):
            return da
    return None


def can_cast(from_: dtype, to: dtype) -> bool:
    """PyTorch's ``can_cast``: no cast that lowers the category (float->int, int->bool)."""
    return from_.category <= to.category


class _TypeInfo:
    """Limits of one dtype; two are equal when they describe the same dtype."""

    dtype: str

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.dtype))


class finfo(_TypeInfo):  # noqa: N801 - PyTorch's name
    """Machine limits of a floating dtype (default: the default dtype), as Python floats:
    ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (= ``smallest_normal``), ``resolution``, ``dtype``."""

    def __init__(self, type: dtype | None = None):  # noqa: A002 - PyTorch's parameter name
        type = get_default_dtype() if type is None else type
        if isinstance(type, dtype) and type.is_complex:  # the limits of its parts, as PyTorch
            type = type.to_real()
        if not isinstance(type, dtype) or not type.is_floating_point:
            raise TypeError(f"munet.finfo() requires a floating point input type, got {type!r}; use munet.iinfo")
        info = ml_dtypes.finfo(type.np) if type is bfloat16 else np.finfo(type.np)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))  # 10**-(decimal digits), as PyTorch
        self.dtype = type.name

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
            f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})"
        )


class iinfo(_TypeInfo):  # noqa: N801 - PyTorch's name
    """Limits of an integer dtype, as Python ints: ``bits``, ``max``, ``min``, ``dtype``."""

    def __init__(self, type: dtype):  # noqa: A002 - PyTorch's parameter name
        if type is bool_:
            raise TypeError("munet.bool is not supported by munet.iinfo")
        if not isinstance(type, dtype) or type.is_floating_point:
            raise TypeError(f"munet.iinfo() requires an integer input type, got {type!r}; use munet.finfo")
        info = np.iinfo(type.np)
        self.bits = int(info.bits)
        self.max = int(info.max)
        self.min = int(info.min)
        self.dtype = type.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
