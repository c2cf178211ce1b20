"""Reading ``torch.save`` zip checkpoints of tensors and containers, executing nothing from the file.

A ``torch.save`` file is a zip archive: ``<prefix>/data.pkl`` (a pickle of the saved object whose
tensors refer to storages by key), ``<prefix>/data/<key>`` (each storage's raw bytes) and
``<prefix>/byteorder``. ``data.pkl`` is read by a ``pickle.Unpickler`` whose ``find_class``
accepts exactly the globals of PyTorch's ``weights_only=True`` set that describe tensors and
containers (``_rebuild_tensor_v2``, ``_rebuild_parameter``, the storage types, ``OrderedDict``,
``torch.Size``, ...), each answered by a MuNet function of its own, never by importing the named
object; every other global (``os.system``, ``builtins.eval``, a module class) is refused with a
``CheckpointError`` naming the file and the global. The pickle builds inert records; only when it
has been read whole, and every storage checked against its size and zip CRC, are MuNet tensors
made from them (shared storages and views stay shared), so a refused file yields nothing.
"""

from __future__ import annotations

import io
import math
import mmap as _mmap
import pickle
import sys
import zipfile
from collections import Counter, OrderedDict

import numpy as np

from munet import _dtype as D

__all__ = ["is_torch_zip", "load_torch_zip"]

_MAX_PICKLE = 256 * 1024 * 1024  # data.pkl holds structure only; the tensor bytes are in data/N

_STORAGE_DTYPES = {
    "FloatStorage": D.float32,
    "DoubleStorage": D.float64,
    "HalfStorage": D.float16,
    "BFloat16Storage": D.bfloat16,
    "LongStorage": D.int64,
    "IntStorage": D.int32,
    "ShortStorage": D.int16,
    "CharStorage": D.int8,
    "ByteStorage": D.uint8,
    "BoolStorage": D.bool_,
    "ComplexFloatStorage": D.complex64,
    "ComplexDoubleStorage": D.complex128,
}
_UNSUPPORTED_STORAGES = (
    "QInt8Storage",
    "QUInt8Storage",
    "QInt32Storage",
    "QUInt4x2Storage",
    "QUInt2x4Storage",
)
_DTYPE_NAMES = {
    "float32": D.float32,
    "float64": D.float64,
    "float16": D.float16,
    "bfloat16": D.bfloat16,
    "int64": D.int64,
    "int32": D.int32,
    "int16": D.int16,
    "int8": D.int8,
    "uint8": D.uint8,
    "bool": D.bool_,
    "complex64": D.complex64,
    "complex128": D.complex128,
}


class _RefusedError(Exception):
    """Raised inside the unpickler; becomes a ``CheckpointError`` naming the file."""


class _StorageType:
    """The value of a ``torch.FloatStorage``-like global: names a dtype, never called."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype):
        self.name, self.dtype = name, dtype

    def __reduce__(self):
        raise _RefusedError("a storage type cannot be pickled")


class _StorageRecord:
    """A storage named by ``data.pkl``: its key in ``data/`` and its dtype and element count."""

    __slots__ = ("key", "dtype", "numel")

    def __init__(self, key: str, dtype, numel: int):
        self.key, self.dtype, self.numel = key, dtype, numel

    def __setstate__(self, state):
        raise _RefusedError("a BUILD instruction on a storage")


class _TensorRecord:
    """A tensor to rebuild: geometry over a storage, and whether it is a Parameter."""

    __slots__ = ("storage", "offset", "size", "stride", "requires_grad", "parameter")

    def __init__(self, storage, offset, size, stride, requires_grad, parameter=False):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
        self.requires_grad, self.parameter = requires_grad, parameter

    def __setstate__(self, state):
        raise _RefusedError("a BUILD instruction on a tensor")


class _DeviceRecord(str):
    """``torch.device(...)`` in a pickle: kept as its string."""


def _ints(value, what: str) -> tuple:
    if not isinstance(value, (tuple, list)) or not all(type(v) is int for v in value):
        raise _RefusedError(f"{what} must be a tuple of integers, got {value!r}")
    return tuple(value)


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    if not isinstance(storage, _StorageRecord):
        raise _RefusedError(f"_rebuild_tensor_v2 expects a storage, got {type(storage).__name__}")
    if type(storage_offset) is not int or storage_offset < 0:
        raise _RefusedError(f"storage offset must be an integer >= 0, got {storage_offset!r}")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if len(size) != len(stride) or any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise _RefusedError(f"size {size} and stride {stride} do not describe a tensor")
    if math.prod(size):
        last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= storage.numel:
            raise _RefusedError(
                f"a tensor of size {size}, stride {stride}, offset {storage_offset} reaches element {last} "
                f"of a storage of {storage.numel}"
            )
    if backward_hooks:
        raise _RefusedError("tensors with backward hooks are not loaded (hooks are code)")
    return _TensorRecord(storage, storage_offset, size, stride, bool(requires_grad))


def _rebuild_tensor_v1(storage, storage_offset, size, stride):
    return _rebuild_tensor(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=True, backward_hooks=None, state=None):
    if not isinstance(data, _TensorRecord):
        raise _RefusedError(f"_rebuild_parameter expects a tensor, got {type(data).__name__}")
    if backward_hooks:
        raise _RefusedError("parameters with backward hooks are not loaded (hooks are code)")
    if state:
        raise _RefusedError("parameters with Python attributes are not loaded")
    return _TensorRecord(data.storage, data.offset, data.size, data.stride, bool(requires_grad), True)


def _rebuild_from_type_v2(func, new_type, args, state):
    if func not in (_rebuild_tensor, _rebuild_tensor_v1, _rebuild_parameter):
        raise _RefusedError("_rebuild_from_type_v2 with a function other than a tensor rebuild")
    if new_type is not _TORCH_TENSOR or state:
        raise _RefusedError("tensor subclasses and tensors with Python attributes are not loaded")
    if not isinstance(args, tuple):
        raise _RefusedError("_rebuild_from_type_v2 expects a tuple of arguments")
    return func(*args)


def _parameter(data=None, requires_grad=True):
    return _rebuild_parameter(data, requires_grad)


def _size(dims=()):
    return tuple(_ints(dims, "torch.Size"))


def _device(kind, index=None):
    if not isinstance(kind, str) or not (index is None or type(index) is int):
        raise _RefusedError(f"torch.device({kind!r}, {index!r}) is malformed")
    return _DeviceRecord(kind if index is None else f"{kind}:{index}")


def _encode(text, encoding="utf-8"):
    """``_codecs.encode``, as pickle protocol 2 writes bytes: only text codecs, never a compressor."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        raise _RefusedError(f"_codecs.encode with {type(text).__name__} and {encoding!r}")
    return text.encode(encoding)


def _bytearray(data=b""):
    if not isinstance(data, (bytes, bytearray)):  # bytearray(10**12) would allocate a terabyte
        raise _RefusedError(f"bytearray of {type(data).__name__}")
    return bytearray(data)


def _not_tensor_type(*args):
    raise _RefusedError("torch.Tensor cannot be called in a checkpoint")


_TORCH_TENSOR = _not_tensor_type


def _allowed_globals() -> dict:
    """PyTorch's ``weights_only=True`` set, for tensors and containers, answered by MuNet stand-ins."""
    allowed = {
        "collections.OrderedDict": OrderedDict,
        "collections.Counter": Counter,
        "builtins.set": set,
        "builtins.complex": complex,
        "builtins.bytearray": _bytearray,
        "_codecs.encode": _encode,
        "torch._utils._rebuild_tensor": _rebuild_tensor_v1,
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.nn.parameter.Parameter": _parameter,
        "torch.Size": _size,
        "torch.Tensor": _TORCH_TENSOR,
        "torch.device": _device,
    }
    for name, dtype in _STORAGE_DTYPES.items():
        allowed[f"torch.{name}"] = _StorageType(name, dtype)
    for name, dtype in _DTYPE_NAMES.items():
        allowed[f"torch.{name}"] = dtype
    return allowed


_ALLOWED = _allowed_globals()


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only ``_ALLOWED``; a storage reference becomes a ``_StorageRecord``."""

    def __init__(self, data: bytes, storages: dict):
        super().__init__(io.BytesIO(data), encoding="utf-8")
        self._storages = storages

    def find_class(self, module: str, name: str):
        full = f"{module}.{name}"
        if full in _ALLOWED:
            return _ALLOWED[full]
        if name in _UNSUPPORTED_STORAGES:
            raise _RefusedError(f"the checkpoint holds {full}, a dtype MuNet does not have")
        raise _RefusedError(
            f"global '{full}' is not allowed: only tensors and containers are loaded, nothing is executed "
            "(for a pickled model, save model.state_dict() with torch.save instead and load that)"
        )

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise _RefusedError(f"unknown persistent id {pid!r}")
        _, kind, key, _location, numel = pid
        if not isinstance(kind, _StorageType):
            raise _RefusedError(f"storage of unknown type {kind!r}")
        if not isinstance(key, str) or type(numel) is not int or numel < 0:
            raise _RefusedError(f"storage reference {pid!r} is malformed")
        record = self._storages.get(key)
        if record is None:
            record = self._storages[key] = _StorageRecord(key, kind.dtype, numel)
        elif record.dtype is not kind.dtype or record.numel != numel:
            raise _RefusedError(f"storage {key} is referred to with two dtypes or sizes")
        return record


def is_torch_zip(prefix: bytes) -> bool:
    """Whether a file starting with ``prefix`` is a zip archive (what ``torch.save`` writes)."""
    return prefix[:4] == b"PK\x03\x04"


def load_torch_zip(f, name: str, device, mmap: bool, fail):
    """The object a ``torch.save`` zip checkpoint holds, as MuNet tensors and containers.

    ``f`` is a path or a binary file object at the archive's start; ``fail(path, message)``
    raises the ``CheckpointError``.
    """
    from munet.serialization import CheckpointError

    try:
        with zipfile.ZipFile(f) as archive:
            members = _members(archive, name, fail)
            storages: dict = {}
            obj = _unpickle(_read_member(archive, members["data.pkl"], _MAX_PICKLE), storages, name, fail)
            _check_byteorder(archive, members, name, fail)
            arrays = {
                key: _storage_array(archive, members, record, f, mmap, name, fail) for key, record in storages.items()
            }
    except CheckpointError:
        raise
    except _ZIP_ERRORS as exc:
        fail(name, f"not a readable torch.save zip archive ({type(exc).__name__}: {exc})")
    try:
        return _Builder(arrays, device).build(obj)
    except RecursionError:
        fail(name, "the checkpoint is nested too deeply")
    except _RefusedError as exc:
        fail(name, str(exc))


_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    NotImplementedError,
    RuntimeError,
    EOFError,
    OSError,
    ValueError,
    OverflowError,
    KeyError,
    IndexError,
    TypeError,
)


def _members(archive: zipfile.ZipFile, name: str, fail) -> dict:
    """The archive's records by their name under the common prefix (``data.pkl``, ``data/0``, ...)."""
    infos = archive.infolist()
    if not infos:
        fail(name, "empty zip archive (not a torch.save checkpoint)")
    prefix = infos[0].filename.split("/", 1)[0] + "/"
    members = {i.filename[len(prefix) :]: i for i in infos if i.filename.startswith(prefix)}
    if "data.pkl" not in members:
        if any(i.filename.endswith("constants.pkl") or "/code/" in i.filename for i in infos):
            fail(name, "this is a TorchScript archive (torch.jit.save); MuNet loads state dicts, not scripted code")
        fail(name, "zip archive has no data.pkl (not a torch.save checkpoint)")
    return members


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    if info.file_size > limit:
        raise ValueError(f"{info.filename} is {info.file_size} bytes, over the limit of {limit}")
    with archive.open(info) as member:
        data = member.read(info.file_size + 1)  # reading to the end checks the CRC
    if len(data) != info.file_size:
        raise zipfile.BadZipFile(f"{info.filename} holds {len(data)} bytes, its entry says {info.file_size}")
    return data


def _unpickle(data: bytes, storages: dict, name: str, fail):
    unpickler = _RestrictedUnpickler(data, storages)
    try:
        return unpickler.load()
    except _RefusedError as exc:
        fail(name, f"data.pkl: {exc}")
    except RecursionError:
        fail(name, "data.pkl is nested too deeply")
    except Exception as exc:  # noqa: BLE001 - only our stand-ins run: any error is a malformed pickle
        fail(name, f"data.pkl is not a valid pickle ({type(exc).__name__}: {exc})")


def _check_byteorder(archive, members: dict, name: str, fail) -> None:
    info = members.get("byteorder")
    order = _read_member(archive, info, 16) if info is not None else b"little"  # old files: little-endian
    if order not in (b"little", b"big"):
        fail(name, f"byteorder record says {order!r}, expected 'little' or 'big'")
    members["byteorder"] = order.decode()


def _storage_array(archive, members: dict, record: _StorageRecord, f, mmap: bool, name: str, fail) -> np.ndarray:
    info = members.get(f"data/{record.key}")
    if not isinstance(info, zipfile.ZipInfo):
        fail(name, f"data.pkl refers to storage {record.key!r}, which the archive does not hold")
    needed = record.numel * record.dtype.itemsize
    if info.file_size != needed:
        fail(
            name, f"storage {record.key} holds {info.file_size} bytes, {record.numel} {record.dtype.name} need {needed}"
        )
    if mmap and info.compress_type == zipfile.ZIP_STORED:
        array = _mapped(archive, info, f, record, name, fail)
    else:
        array = np.frombuffer(bytearray(_read_member(archive, info, needed)), dtype=record.dtype.np)
    if members["byteorder"] != sys.byteorder:
        array = array.byteswap()
    return array


def _mapped(archive, info: zipfile.ZipInfo, f, record: _StorageRecord, name: str, fail) -> np.ndarray:
    """A copy-on-write view of a stored member in the mapped file, its CRC checked."""
    import struct
    import zlib

    if not isinstance(f, (str, bytes)) and not hasattr(f, "__fspath__"):
        raise ValueError("munet.load: mmap=True needs a file path, as torch.load's does")
    with open(f, "rb") as raw:
        mapping = _mmap.mmap(raw.fileno(), 0, access=_mmap.ACCESS_COPY)
    header = mapping[info.header_offset : info.header_offset + 30]
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        fail(name, f"{info.filename}: bad local file header")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    start = info.header_offset + 30 + name_len + extra_len
    view = memoryview(mapping)[start : start + info.file_size]
    if len(view) != info.file_size or zlib.crc32(view) != info.CRC:
        fail(name, f"{info.filename} fails its CRC check (the file is damaged)")
    if not info.file_size:
        return np.empty(0, dtype=record.dtype.np)
    array = np.frombuffer(mapping, dtype=record.dtype.np, count=record.numel, offset=start)
    return array if array.flags.aligned else array.copy()


class _Builder:
    """Turns the unpickled records into MuNet tensors: one storage per key, views into it."""

    def __init__(self, arrays: dict, device):
        self.arrays, self.device = arrays, device
        self.bases: dict = {}
        self.done: dict = {}

    def build(self, obj):
        key = id(obj)
        if key in self.done:
            return self.done[key]
        result = self._build(obj)
        self.done[key] = result
        return result

    def _build(self, obj):
        if isinstance(obj, _TensorRecord):
            return self._tensor(obj)
        if isinstance(obj, _DeviceRecord):
            from munet._device import device

            return device(str(obj))
        if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, bytearray, D.dtype)):
            return obj
        if isinstance(obj, dict):  # dict, OrderedDict, Counter: same type, built in place for cycles
            out = type(obj)()
            self.done[id(obj)] = out
            for k, v in obj.items():
                out[self.build(k)] = self.build(v)
            if isinstance(obj, OrderedDict) and getattr(obj, "_metadata", None) is not None:
                out._metadata = self.build(obj._metadata)  # state_dict()'s per-module versions
            return out
        if isinstance(obj, list):
            out = []
            self.done[id(obj)] = out
            out.extend(self.build(v) for v in obj)
            return out
        if isinstance(obj, tuple):
            return tuple(self.build(v) for v in obj)
        if isinstance(obj, set):
            return {self.build(v) for v in obj}
        raise _RefusedError(f"the checkpoint holds a {type(obj).__name__}, which munet.load does not load")

    def _tensor(self, record: _TensorRecord):
        from munet.autograd.grad_mode import no_grad
        from munet.nn.parameter import Parameter
        from munet.ops.creation import as_tensor

        base = self.bases.get(record.storage.key)
        if base is None:
            base = self.bases[record.storage.key] = as_tensor(self.arrays[record.storage.key], device=self.device)
        with no_grad():
            t = base.as_strided(record.size, record.stride, record.offset)
        t = t.detach()
        if record.parameter:
            return Parameter(t, requires_grad=record.requires_grad)
        if record.requires_grad and t.is_floating_point():
            t.requires_grad_(True)
        return t
