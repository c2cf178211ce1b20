"""``VkView``: a tensor's data on the vulkan backend, a descriptor over a ``DeviceBuffer``.

Views cost nothing: no device work happens until a kernel reads one. Kernels index their
operands through (offset, strides) so most strided views are read in place; ``coalesce``
merges dims that are contiguous in every operand so the index arithmetic stays short.
"""

from __future__ import annotations

from munet import _dtype as D
from munet._device import DeviceError

# How kernels compute with each dtype: WGSL scalars are 32-bit (``storage_type``). float16 is
# stored as ``f16`` (2 bytes, the adapter's ``shader-f16``), loaded as f32 and rounded to f16
# once when stored (``wgsl.half_storage`` rewrites the kernel's f32 bindings of f16 buffers).
STORAGE = {D.float32: "f32", D.float16: "f32", D.int32: "i32", D.int64: "i32", D.bool_: "u32"}
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

# What to do instead, for the dtypes the device cannot hold.
_UNSUPPORTED = {
    "float64": "WGSL has no 64-bit floats; cast with .float() (float32) first",
    "bfloat16": "WGSL has no bfloat16; cast with .float() (float32) or .half() (float16) first",
    "int8": "storage buffers hold 32-bit integers; cast with .int() (int32) first",
    "uint8": "storage buffers hold 32-bit integers; cast with .int() (int32) first",
    "int16": "storage buffers hold 32-bit integers; cast with .int() (int32) first",
}


def storage_type(dtype, op: str = "vulkan") -> str:
    """The WGSL scalar type kernels compute ``dtype`` in (float16 computes in f32)."""
    kind = STORAGE.get(dtype)
    if kind is None:
        advice = _UNSUPPORTED.get(dtype.name, "cast with .float() or .int() first")
        raise DeviceError(
            f"{op}: dtype {dtype.name} is not supported on the vulkan backend ({advice}; "
            "the backend holds float32, float16 with shader-f16, int32, int64 as int32, and bool)"
        )
    return kind


def element_type(dtype) -> str:
    """The WGSL type of one element of a ``dtype`` buffer: ``f16`` for float16, else ``storage_type``."""
    return "f16" if dtype is D.float16 else storage_type(dtype)


def element_bytes(dtype) -> int:
    """Bytes per element of a ``dtype`` buffer on the device."""
    return 2 if dtype is D.float16 else 4


def compute_dtype(dtype):
    """The dtype of a kernel's intermediates for ``dtype`` (float32 for float16, so partial sums
    and statistics are not rounded to 11 bits between passes)."""
    return D.float32 if dtype is D.float16 else dtype


class VkView:
    """(buffer, shape, strides, offset, dtype): what a kernel needs to read a tensor."""

    __slots__ = ("buffer", "shape", "strides", "offset", "dtype")

    def __init__(self, buffer, shape, strides, offset: int, dtype):
        self.buffer, self.shape, self.strides, self.offset, self.dtype = (
            buffer,
            tuple(shape),
            tuple(strides),
            offset,
            dtype,
        )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def is_contiguous(self) -> bool:
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def expand_to(self, shape) -> tuple:
        """Strides of this view broadcast to ``shape`` (0 along broadcast dims)."""
        lead = len(shape) - len(self.shape)
        out = [0] * lead
        for size, stride, target in zip(self.shape, self.strides, shape[lead:]):
            out.append(stride if size == target else 0)
        return tuple(out)

    def __repr__(self) -> str:
        return f"VkView(shape={self.shape}, strides={self.strides}, offset={self.offset}, dtype={self.dtype.name})"


def coalesce(shape, *stride_sets) -> tuple:
    """Merge adjacent dims that are contiguous in every stride set; drop size-1 dims."""
    dims = [(n, [s[d] for s in stride_sets]) for d, n in enumerate(shape) if n != 1]
    merged: list = []
    for n, strides in dims:
        if merged:
            pn, pstrides = merged[-1]
            if all(ps == s * n for ps, s in zip(pstrides, strides)):
                merged[-1] = (pn * n, strides)
                continue
        merged.append((n, strides))
    new_shape = tuple(n for n, _ in merged)
    return new_shape, [tuple(st[k] for _, st in merged) for k in range(len(stride_sets))]
