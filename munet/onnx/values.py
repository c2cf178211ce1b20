"""How an imported program holds ONNX values that are not MuNet tensors of a MuNet dtype.

- ``uint16``, ``uint32`` and ``uint64`` tensors (MuNet has no such dtypes) are held in a wider or
  same-width signed dtype: uint16 in int32 and uint32 in int64, always in ``[0, 2**bits)`` (every
  node's result is reduced modulo ``2**bits``, so add/sub/mul wrap as ONNX defines and comparisons,
  division and shifts of the held values are exact); uint64 as the same 64 bits in int64 (two's
  complement), where add/sub/mul, bitwise ops and equality are exact as they are, and the rules that
  order or divide (``Less``, ``Max``, ``Div``, ``Mod``, a right ``BitShift``, ``Cast`` to float) use
  the unsigned forms below. An operator without an exact uint64 form is refused at load
  (:data:`UINT64_OPS` lists those that have one). Program outputs are these held tensors;
  :meth:`Program.to_numpy` (and ``munet.onnx.backend``) gives them back as NumPy's unsigned types.
- strings are NumPy object arrays on the host (they are not tensor math): only the operators in
  ``STRING_RULES`` read them.
- a sequence is a :class:`Sequence` (a Python list) of values; an optional is its value, or None when empty.
"""

from __future__ import annotations

import numpy as np

import munet

INT64_MIN = -(2**63)


class Unsigned:
    """An unsigned ONNX element type of ``bits`` bits held in the signed MuNet dtype ``storage``."""

    def __init__(self, name: str, bits: int, storage):
        self.name, self.bits, self.storage = name, bits, storage
        self.np = np.dtype(name)

    def __repr__(self) -> str:
        return f"{self.name} (held as {self.storage})"

    def held(self, value):
        """``value`` (a tensor or NumPy array of any integer type) in the held form."""
        if isinstance(value, np.ndarray) or np.isscalar(value):
            value = np.asarray(value)
            if value.dtype.kind == "f":
                value = value.astype(np.int64)
            out = value.astype(self.storage.np)
            return out & (2**self.bits - 1) if self.bits < 64 else out
        if value.dtype is not self.storage:
            value = value.to(self.storage)
        return value & (2**self.bits - 1) if self.bits < 64 else value

    def to_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.asarray(array).astype(self.np)


class HostKind:
    """A kind of value held on the host: strings, sequences (with their element type), optionals."""

    def __init__(self, kind: str, element=None):
        self.kind, self.element = kind, element

    def __repr__(self) -> str:
        return self.kind if self.element is None else f"{self.kind}({self.element!r})"


STRING = HostKind("string")


class Sequence(list):
    """An ONNX sequence value (a rule returning a plain list returns several outputs)."""


_UNSIGNED = {"UINT16": ("uint16", 16, "int32"), "UINT32": ("uint32", 32, "int64"), "UINT64": ("uint64", 64, "int64")}


def unsigned_type(onnx, code: int) -> Unsigned | None:
    name = onnx.TensorProto.DataType.Name(code)
    if name not in _UNSIGNED:
        return None
    np_name, bits, storage = _UNSIGNED[name]
    return Unsigned(np_name, bits, getattr(munet, storage))


def element_type(onnx, code: int):
    """The held type of an ONNX tensor element type: a MuNet dtype, an :class:`Unsigned`, STRING,
    or None when MuNet cannot hold it (complex, float8, 4-bit and 2-bit types)."""
    from munet.onnx._deps import munet_dtype

    if code == onnx.TensorProto.STRING:
        return STRING
    return munet_dtype(code) or unsigned_type(onnx, code)


def value_type(onnx, type_proto):
    """The held type of an ONNX ``TypeProto``: an element type (above), ``HostKind('sequence', e)``
    or ``HostKind('optional', e)``; ``...`` when the type is not (yet) known; None when unsupported."""
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        code = type_proto.tensor_type.elem_type
        return ... if code == 0 else element_type(onnx, code)
    if which in ("sequence_type", "optional_type"):
        inner = getattr(type_proto, which).elem_type
        element = value_type(onnx, inner) if inner.WhichOneof("value") else ...
        return None if element is None else HostKind(which.split("_")[0], element)
    if which is None:
        return ...
    return None  # map and sparse tensor values


def is_string(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in ("O", "U", "S")


def as_held(value, kind):
    """``value`` in the held form of ``kind`` (MuNet tensors and NumPy arrays of MuNet dtypes are kept
    as they come; program.py casts them to their declared dtype)."""
    if value is None or kind is None or kind is ...:
        return value
    if isinstance(kind, Unsigned):
        return kind.held(value)
    if kind is STRING:
        return np.asarray(value, dtype=object)
    if isinstance(kind, HostKind):  # sequence or optional
        if kind.kind == "optional":
            return as_held(value, kind.element)
        return Sequence(as_held(v, kind.element) for v in value)
    return value


def to_numpy(value, kind=None):
    """A program output as NumPy: tensors in their declared ONNX element types (uint16/32/64 given
    back from their held form), strings as object arrays, sequences as lists, an empty optional as None."""
    if value is None:
        return None
    if isinstance(kind, HostKind) and kind.kind == "optional":
        return to_numpy(value, kind.element)
    if isinstance(value, list):
        element = kind.element if isinstance(kind, HostKind) else None
        return [to_numpy(v, element) for v in value]
    array = value if isinstance(value, np.ndarray) else value.detach().cpu().numpy()
    if isinstance(kind, Unsigned):
        return kind.to_numpy(array)
    return array


# unsigned 64-bit forms of the signed int64 ops (uint64 held as its bits in int64) -------------------


def flip(x):
    """``x`` with its sign bit flipped: signed order of the result is the unsigned order of ``x``."""
    return x ^ INT64_MIN


def logical_shift_right(x, shift):
    """``x >> shift`` filling with zeros (for 0 <= shift < 64)."""
    mask = ~((munet.full_like(x, -1) << (63 - shift)) << 1)
    return (x >> shift) & mask


def divide(n, d):
    """Unsigned ``(n // d, n % d)`` of uint64 values held in int64 (Hacker's Delight, section 9-3):
    a divisor with its top bit set goes at most once; otherwise divide ``n >> 1`` (non-negative),
    double, and correct by one."""
    big = d < 0
    safe = munet.where(big, munet.ones_like(d), d)
    q = munet.div(logical_shift_right(n, 1), safe, rounding_mode="trunc") << 1
    r = n - q * safe
    q = q + (flip(r) >= flip(safe)).to(munet.int64)
    q = munet.where(big, (flip(n) >= flip(d)).to(munet.int64), q)
    return q, n - q * d


def to_float(x, dtype):
    """uint64 values held in int64 as floats of ``dtype`` (those with the top bit set gain 2**64)."""
    f = x.to(munet.float64)
    f = munet.where(x < 0, f + 2.0**64, f)
    return f.to(dtype)


# operators with an exact form on uint64 held as int64 (the others are refused at load)
UINT64_OPS = {
    *("Add", "Sub", "Mul", "Div", "Mod", "Neg", "Sum", "Pow"),
    *("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift"),
    *("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Max", "Min", "Or", "Not"),
    *("Identity", "Cast", "CastLike", "Where", "Constant", "Shape", "Size", "BitCast", "TensorScatter"),
    *("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Expand", "Tile"),
    *("Gather", "GatherElements", "GatherND", "Compress"),
    *("If", "Loop", "Scan", "SequenceConstruct", "SequenceInsert", "SequenceAt", "Optional"),
}
