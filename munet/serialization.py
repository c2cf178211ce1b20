"""``munet.save`` / ``munet.load``: safetensors files with a hashed JSON manifest. No pickle.

A file is a standard safetensors file (8-byte little-endian header size, JSON header,
raw little-endian tensor bytes), readable by any safetensors reader. Its ``__metadata__``
holds ``munet.manifest``: the structure of the saved object (dicts, lists, tuples, numbers,
strings, None, tensors by name) and a SHA-256 per tensor. A flat ``{str: Tensor}`` dict (a
state dict) is stored under its own keys, so ``safetensors.torch.load_file`` reads it as one.

Writes are atomic (temporary file, fsync, rename). ``load`` validates the whole file — header,
sizes, offsets, hashes, structure — before it returns anything.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import tempfile
from collections import OrderedDict

import numpy as np

from munet import _dtype as D
from munet._tensor import Tensor

__all__ = ["load", "save"]
_log = logging.getLogger(__name__)

MANIFEST_KEY = "munet.manifest"
FORMAT_VERSION = 1
PROGRAM_FORMAT = "munet-program"  # a compiled program (munet.compiler.saving)
_MAX_HEADER = 100 * 1024 * 1024

_CODE_OF = {
    D.float64: "F64",
    D.float32: "F32",
    D.float16: "F16",
    D.bfloat16: "BF16",
    D.int64: "I64",
    D.int32: "I32",
    D.int16: "I16",
    D.int8: "I8",
    D.uint8: "U8",
    D.bool_: "BOOL",
}
_DTYPE_OF = {code: dtype for dtype, code in _CODE_OF.items()}


class CheckpointError(ValueError):
    """A checkpoint file is malformed, damaged or not a MuNet/safetensors file."""


# saving -----------------------------------------------------------------------------------------


def _is_state_dict(obj) -> bool:
    return (
        isinstance(obj, dict)
        and bool(obj)
        and all(isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items())
    )


class _Packer:
    """Walks an object, collecting tensors under unique names and building the manifest tree."""

    def __init__(self):
        self.tensors: OrderedDict[str, Tensor] = OrderedDict()
        self._seen: dict[int, str] = {}

    def add_tensor(self, t: Tensor, name: str) -> dict:
        if id(t) in self._seen:
            return {"t": "tensor", "name": self._seen[id(t)], "requires_grad": t.requires_grad}
        unique = name
        k = 1
        while unique in self.tensors:
            unique = f"{name}#{k}"
            k += 1
        self.tensors[unique] = t
        self._seen[id(t)] = unique
        node = {"t": "tensor", "name": unique, "requires_grad": bool(t.requires_grad)}
        from munet.nn.parameter import Parameter

        if isinstance(t, Parameter):
            node["parameter"] = True
        return node

    def pack(self, obj, path: str):
        if isinstance(obj, Tensor):
            return self.add_tensor(obj, path or "tensor")
        if obj is None:
            return {"t": "none"}
        if isinstance(obj, bool):
            return {"t": "bool", "v": obj}
        if isinstance(obj, (int, np.integer)):
            return {"t": "int", "v": int(obj)}
        if isinstance(obj, (float, np.floating)):
            return {"t": "float", "v": float(obj).hex()}
        if isinstance(obj, str):
            return {"t": "str", "v": obj}
        if isinstance(obj, D.dtype):
            return {"t": "dtype", "v": obj.name}
        if isinstance(obj, dict):
            keys, values = [], []
            for k, v in obj.items():
                if not isinstance(k, (str, int, float, bool)) and k is not None:
                    raise TypeError(
                        f"munet.save: dict keys must be str, int, float, bool or None, got {type(k).__name__}"
                    )
                keys.append(self.pack(k, ""))
                values.append(self.pack(v, _join(path, k)))
            return {"t": "dict", "k": keys, "v": values}
        if isinstance(obj, (list, tuple)):
            kind = "list" if isinstance(obj, list) else "tuple"
            return {"t": kind, "v": [self.pack(v, _join(path, i)) for i, v in enumerate(obj)]}
        raise TypeError(
            f"munet.save: cannot save an object of type {type(obj).__name__}; supported: dicts, lists, tuples, "
            "tensors, numbers, strings, dtypes and None"
        )


def _join(path: str, key) -> str:
    return f"{path}.{key}" if path else str(key)


def _tensor_bytes(t: Tensor) -> bytes:
    arr = t.detach().cpu().contiguous().numpy()
    return np.ascontiguousarray(arr).tobytes()


def save(obj, f, *, metadata: dict | None = None) -> None:
    """Save ``obj`` (tensors, state dicts, nested containers) to the file ``f`` atomically.

    A compiled step (``munet.compile``) or a loaded program is saved as a program: its optimized
    graph and current state, loadable without the Python code (see ``munet.compiler.saving``).
    """
    from munet.compiler.saving import is_program, save_program

    if is_program(obj):
        save_program(obj, f, metadata=metadata)
        return
    packer = _Packer()
    if _is_state_dict(obj):
        tree = {"t": "dict", "k": [], "v": []}
        for k, v in obj.items():
            tree["k"].append({"t": "str", "v": k})
            tree["v"].append(packer.add_tensor(v, k))
    else:
        tree = packer.pack(obj, "")
    entries = [(name, t.dtype, tuple(t.shape), _tensor_bytes(t)) for name, t in packer.tensors.items()]
    write_file(f, entries, {"format": "munet", "version": FORMAT_VERSION, "tree": tree}, metadata)


def write_file(f, entries, manifest: dict, metadata: dict | None = None) -> None:
    """Write ``entries`` (``(name, dtype, shape, raw bytes)``) and ``manifest`` as one safetensors file.

    The manifest gets a SHA-256 per tensor; the write is atomic.
    """
    header: dict = {}
    hashes = {}
    chunks = []
    offset = 0
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": _CODE_OF[dtype], "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        hashes[name] = hashlib.sha256(data).hexdigest()
        chunks.append(data)
        offset += len(data)
    manifest = {**manifest, "sha256": hashes}
    meta = {MANIFEST_KEY: json.dumps(manifest, separators=(",", ":"))}
    for k, v in (metadata or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("munet.save: metadata must map str to str")
        meta[k] = v
    header = {"__metadata__": meta, **header}
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    _atomic_write(f, [struct.pack("<Q", len(header_bytes)), header_bytes, *chunks])
    _log.info("saved %s: %d tensors, %d bytes of tensor data", f, len(entries), offset)


def _atomic_write(path, chunks) -> None:
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".munet-save-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# loading ----------------------------------------------------------------------------------------


def _fail(path, message: str):
    raise CheckpointError(f"munet.load: {path}: {message}")


def _read_file(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _check_not_pickle(path, raw: bytes) -> None:
    if raw[:4] == b"PK\x03\x04":
        _fail(
            path,
            "this is a zip archive (a torch.save / pickle checkpoint); MuNet never unpickles files. "
            "Convert it with safetensors (safetensors.torch.save_file) and load that.",
        )
    if raw[:1] == b"\x80" and raw[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        _fail(
            path, "this is a Python pickle; MuNet never unpickles files. Save tensors with munet.save or safetensors."
        )


def _parse_header(path, raw: bytes) -> tuple[dict, int]:
    if len(raw) < 8:
        _fail(path, f"file is {len(raw)} bytes, too short for a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > _MAX_HEADER or 8 + n > len(raw):
        _fail(path, f"header size {n} exceeds the file size {len(raw)} (truncated or not a safetensors file)")
    try:
        header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        _fail(path, f"header is not valid JSON ({exc})")
    if not isinstance(header, dict):
        _fail(path, "header is not a JSON object")
    return header, 8 + n


def _decode_tensors(path, header: dict, raw: bytes, start: int) -> OrderedDict:
    entries = [(k, v) for k, v in header.items() if k != "__metadata__"]
    data_len = len(raw) - start
    spans = []
    arrays = OrderedDict()
    for name, info in entries:
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            _fail(path, f"tensor '{name}' has a malformed entry {info!r}")
        dtype = _DTYPE_OF.get(info["dtype"])
        if dtype is None:
            _fail(path, f"tensor '{name}' has unknown dtype '{info['dtype']}'; supported: {', '.join(_DTYPE_OF)}")
        shape = info["shape"]
        if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            _fail(path, f"tensor '{name}' has an invalid shape {shape!r}")
        offsets = info["data_offsets"]
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            _fail(path, f"tensor '{name}' has invalid data_offsets {offsets!r}")
        begin, end = offsets
        numel = int(np.prod(shape)) if shape else 1
        if end - begin != numel * dtype.itemsize or begin < 0 or end > data_len:
            _fail(
                path,
                f"tensor '{name}' ({info['dtype']}, shape {shape}) needs {numel * dtype.itemsize} bytes but its "
                f"offsets are [{begin}, {end}] in a data section of {data_len} bytes (truncated or damaged file)",
            )
        spans.append((begin, end, name))
        arrays[name] = (dtype, shape, begin, end)
    covered = 0
    for begin, end, name in sorted(spans):
        if begin != covered:
            _fail(path, f"tensor data is not contiguous at '{name}' (expected offset {covered}, got {begin})")
        covered = end
    if covered != data_len:
        _fail(path, f"data section has {data_len} bytes but tensors cover {covered} (trailing or missing bytes)")
    return arrays


def _unpack(path, node, tensors: dict):
    if not isinstance(node, dict) or "t" not in node:
        _fail(path, f"manifest node is malformed: {node!r}")
    kind = node["t"]
    if kind == "tensor":
        if node.get("name") not in tensors:
            _fail(path, f"manifest refers to tensor '{node.get('name')}' that the file does not contain")
        t = tensors[node["name"]]
        if node.get("parameter"):
            from munet.nn.parameter import Parameter

            return Parameter(t, requires_grad=bool(node.get("requires_grad", True)))
        if node.get("requires_grad") and t.is_floating_point():
            return t.detach().requires_grad_(True)
        return t
    if kind == "none":
        return None
    if kind in ("bool", "int", "str"):
        expected = {"bool": bool, "int": int, "str": str}[kind]
        if not isinstance(node.get("v"), expected):
            _fail(path, f"manifest {kind} node holds {node.get('v')!r}")
        return node["v"]
    if kind == "float":
        try:
            return float.fromhex(node["v"])
        except (KeyError, TypeError, ValueError):
            _fail(path, f"manifest float node holds {node.get('v')!r}")
    if kind == "dtype":
        try:
            return D._by_name(node["v"])
        except KeyError:
            _fail(path, f"manifest names unknown dtype {node.get('v')!r}")
    if kind == "dict":
        keys, values = node.get("k"), node.get("v")
        if not isinstance(keys, list) or not isinstance(values, list) or len(keys) != len(values):
            _fail(path, "manifest dict node is malformed")
        return OrderedDict((_unpack(path, k, tensors), _unpack(path, v, tensors)) for k, v in zip(keys, values))
    if kind in ("list", "tuple"):
        if not isinstance(node.get("v"), list):
            _fail(path, f"manifest {kind} node is malformed")
        items = [_unpack(path, v, tensors) for v in node["v"]]
        return items if kind == "list" else tuple(items)
    _fail(path, f"manifest has an unknown node type '{kind}'")


def load(f, map_location=None, *, device=None, weights_only: bool = True, mmap=None):
    """Load what ``save`` wrote (or any safetensors file, as a state dict), fully validated first.

    ``device`` (or ``map_location``) names the device to load onto. A saved compiled program
    comes back as a runnable ``munet.compiler.saving.LoadedProgram``.
    """
    from munet.ops.creation import tensor as make_tensor

    manifest, arrays = read_file(f)
    device = _map_device(device if device is not None else map_location)
    if manifest is not None and manifest["format"] == PROGRAM_FORMAT:
        from munet.compiler.saving import load_program

        return load_program(f, manifest, arrays, device)
    # Everything is validated; now build tensors and the structure.
    tensors = {
        name: make_tensor(arr, dtype=D.from_numpy_dtype(arr.dtype), device=device) for name, arr in arrays.items()
    }
    if manifest is None:
        return OrderedDict((name, tensors[name]) for name in arrays)
    return _unpack(f, manifest["tree"], tensors)


def read_file(f) -> tuple[dict | None, OrderedDict]:
    """The manifest (None for a plain safetensors file) and the tensors as read-only NumPy arrays.

    Header, sizes, offsets, format version and every SHA-256 are checked first.
    """
    raw = _read_file(f)
    _check_not_pickle(f, raw)
    header, start = _parse_header(f, raw)
    metadata = header.get("__metadata__") or {}
    if not isinstance(metadata, dict):
        _fail(f, "__metadata__ is not a JSON object")
    layout = _decode_tensors(f, header, raw, start)
    manifest = None
    if MANIFEST_KEY in metadata:
        try:
            manifest = json.loads(metadata[MANIFEST_KEY])
        except json.JSONDecodeError as exc:
            _fail(f, f"manifest is not valid JSON ({exc})")
        if not isinstance(manifest, dict) or manifest.get("format") not in ("munet", PROGRAM_FORMAT):
            _fail(f, "manifest is malformed")
        if manifest["format"] == "munet" and "tree" not in manifest:
            _fail(f, "manifest is malformed")
        if manifest.get("version", 0) > FORMAT_VERSION:
            _fail(
                f,
                f"written by a newer MuNet (format version {manifest.get('version')}); this one reads {FORMAT_VERSION}",
            )
        hashes = manifest.get("sha256", {})
        if not isinstance(hashes, dict) or set(hashes) != set(layout):
            _fail(f, "manifest hashes do not list exactly the tensors in the file")
    arrays = OrderedDict()
    for name, (dtype, shape, begin, end) in layout.items():
        chunk = raw[start + begin : start + end]
        if manifest is not None and hashlib.sha256(chunk).hexdigest() != manifest["sha256"][name]:
            _fail(f, f"tensor '{name}' fails its SHA-256 check (the file is damaged)")
        arrays[name] = np.frombuffer(chunk, dtype=dtype.np).reshape(shape)
    _log.info("loaded %s: %d tensors, %d bytes", f, len(arrays), len(raw))
    return manifest, arrays


def _map_device(map_location):
    """The device to load onto: ``map_location`` when it names one, else cpu."""
    from munet._device import device

    return map_location if isinstance(map_location, (str, device)) else "cpu"
