"""``munet.save`` / ``munet.load``: tamper-evident safetensors files with a JSON manifest. No pickle.

A file is a standard safetensors file (8-byte little-endian header size, JSON header,
raw little-endian tensor bytes), readable by any safetensors reader. Its ``__metadata__``
holds two marks of a MuNet file: ``munet.manifest``, the structure of the saved object
(dicts, lists, tuples, numbers, strings, None, tensors by name) with a SHA-256 per tensor,
and ``munet.digest``, the SHA-256 of the size field and the header with the digest's own
value written as 64 zeros. A flat ``{str: Tensor}`` dict (a state dict) is stored under its
own keys, so ``safetensors.torch.load_file`` reads it as one.

MuNet writes the header as canonical JSON (compact, ASCII, no NaN, spaces to a multiple of
8 bytes); ``load`` parses it (duplicate keys are refused), writes it again canonically and
requires the same bytes, checks the digest, requires the tensors to tile the data section
exactly and checks every tensor's SHA-256. So any change to a MuNet file (a byte changed,
inserted or removed anywhere, a truncation) raises ``CheckpointError`` naming the file. A
file with any ``munet.`` metadata key must have the manifest, and a format-2 manifest the
digest, so no single change turns a MuNet file into a plain one. A safetensors file from
another writer (``safetensors.torch.save_file``) carries no marks and no hashes: it is checked
for structure only and loads as a state dict. Files written before the digest (format 1)
still load, checked by their tensor hashes only.

``f`` is a path or a binary file object (``io.BytesIO``, ``open(path, "rb"/"wb")``; written or
read from its current position, as ``torch.save``/``torch.load`` do). A save to a path is
atomic: a temporary file beside the target (named after the target and the writer's host,
boot, pid and start time), fsync, rename. A symbolic link is written through (its target is
replaced), an existing file keeps its permission bits and a new one follows the umask, as
with ``open()``; a save removes the temporary files of earlier saves of the
same target whose writer has died (a killed process cannot remove its own). ``load`` refuses
anything but a regular file before opening it and validates the whole file (header, sizes,
offsets, digest, hashes, structure) before it returns anything; it reads each tensor once,
hashing as it reads. ``load(path, mmap=True)`` maps the file instead, as ``torch.load`` does:
tensors are copy-on-write views of the mapping (``MAP_PRIVATE``; writing to them never
changes the file). Because ``save`` replaces a file by renaming, tensors mapped from the old
file keep their contents; truncating or rewriting a mapped file in place by other means is
undefined (the process may get ``SIGBUS``), as with ``torch.load(mmap=True)``.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import mmap as _mmap
import os
import secrets
import socket
import stat
import struct
from collections import OrderedDict

import numpy as np

from munet import _dtype as D
from munet._tensor import Tensor

__all__ = ["load", "save"]
_log = logging.getLogger(__name__)

MANIFEST_KEY = "munet.manifest"
DIGEST_KEY = "munet.digest"
_RESERVED_PREFIX = "munet."
_BLANK_DIGEST = "0" * 64
FORMAT_VERSION = 2  # 2: the header digest (version 1 files, without it, still load)
_DIGEST_VERSION = 2
PROGRAM_FORMAT = "munet-program"  # a compiled program (munet.compiler.saving)
_MAX_HEADER = 100 * 1024 * 1024
_MAX_NUMEL = 2**63 - 1  # an element count must fit in int64, as in PyTorch
_READ_CHUNK = 16 * 1024 * 1024
_TEMP_PREFIX = ".munet-save."

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
    D.complex64: "C64",  # safetensors has no complex128 code: write_file refuses those
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
    """Save ``obj`` (tensors, state dicts, nested containers) to ``f``, a path (atomically) or a binary file object.

    ``metadata`` (str to str, keys not starting with ``munet.``) is stored in ``__metadata__``.

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

    The manifest gets a SHA-256 per tensor and the header its digest; a write to a path is atomic.
    """
    tensors: dict = {}
    hashes = {}
    chunks = []
    offset = 0
    for name, dtype, shape, data in entries:
        if dtype not in _CODE_OF:
            raise TypeError(
                f"save: tensor '{name}' is {dtype.name}, which safetensors cannot store (its complex type is "
                "complex64, C64); save view_as_real(tensor) or tensor.cfloat() instead"
            )
        tensors[name] = {"dtype": _CODE_OF[dtype], "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        hashes[name] = hashlib.sha256(data).hexdigest()
        chunks.append(data)
        offset += len(data)
    meta = {MANIFEST_KEY: _canonical_json({**manifest, "sha256": hashes})}
    for k, v in (metadata or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("munet.save: metadata must map str to str")
        if k.startswith(_RESERVED_PREFIX):
            raise ValueError(f"munet.save: metadata key {k!r}: keys starting with 'munet.' are reserved")
        meta[k] = v
    meta[DIGEST_KEY] = _BLANK_DIGEST  # last, far from the manifest key: the two marks are independent
    header = {"__metadata__": meta, **tensors}
    meta[DIGEST_KEY] = _header_digest(_header_bytes(header))
    header_bytes = _header_bytes(header)
    _write(f, [struct.pack("<Q", len(header_bytes)), header_bytes, *chunks])
    _log.info("saved %s: %d tensors, %d bytes of tensor data", _describe(f), len(entries), offset)


def _canonical_json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _header_bytes(header: dict) -> bytes:
    """The canonical header: compact ASCII JSON, padded with spaces to a multiple of 8 bytes."""
    text = _canonical_json(header).encode("ascii")
    return text + b" " * (-len(text) % 8)


def _header_digest(blanked_header: bytes) -> str:
    """SHA-256 of the size field and the header whose digest value is ``_BLANK_DIGEST``."""
    return hashlib.sha256(struct.pack("<Q", len(blanked_header)) + blanked_header).hexdigest()


def _write(f, chunks) -> None:
    if not isinstance(f, (str, bytes, os.PathLike)):
        _write_stream(f, chunks)
        return
    path = os.path.realpath(os.fspath(f))  # through symbolic links, as open() writes
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    _remove_stale_temporaries(path)
    _atomic_write(path, chunks)


def _write_stream(f, chunks) -> None:
    if not hasattr(f, "write"):
        raise TypeError(f"munet.save: f must be a path or a binary file object, got {type(f).__name__}")
    if isinstance(f, io.TextIOBase):
        raise TypeError("munet.save: the file object is a text stream; open it in binary mode ('wb') or use io.BytesIO")
    if hasattr(f, "writable") and not f.writable():
        raise ValueError(f"munet.save: the file object {_describe(f)} is not open for writing")
    for chunk in chunks:
        f.write(chunk)
    if hasattr(f, "flush"):
        f.flush()


def _atomic_write(path: str, chunks) -> None:
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, _temporary_name(os.path.basename(path)))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode) & 0o777  # not setuid/setgid/sticky
    except OSError:
        mode = None  # a new file: 0o666 less the umask, as open() creates it
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        if mode is not None:
            os.chmod(tmp, mode)
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


# temporary files ------------------------------------------------------------------------------------
#
# A temporary is named ".munet-save.<target>.<host>.<boot>.<pid>.<start>.<random>": host and boot
# tell whether the pid can be checked here, the process start time tells a reused pid apart.


def _temporary_stem(target_name: str) -> str:
    if len(target_name) > 120:  # keep the whole name under NAME_MAX
        target_name = hashlib.sha256(target_name.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return _TEMP_PREFIX + target_name


def _temporary_name(target_name: str) -> str:
    host, boot = _machine_marks()
    pid = os.getpid()
    return f"{_temporary_stem(target_name)}.{host}.{boot}.{pid}.{_start_time(pid)}.{secrets.token_hex(4)}"


def _machine_marks() -> tuple[str, str]:
    """Where pids can be checked: this host and pid namespace (a container); the boot."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    host = hashlib.sha256(f"{socket.gethostname()}\0{namespace}".encode()).hexdigest()[:8]
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip().replace("-", "")[:8]
    except OSError:
        boot = "noboot"
    return host, boot


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), or ``"0"`` where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return "0"
    return fields[19].decode() if len(fields) > 19 else "0"


def _writer_is_gone(host: str, boot: str, pid: int, start: str) -> bool:
    """Whether the process that named a temporary has exited (False when that cannot be known)."""
    here_host, here_boot = _machine_marks()
    if host != here_host:
        return False  # another machine (or container) on a shared file system
    if boot != here_boot:
        return boot != "noboot" and here_boot != "noboot"  # written before a reboot
    if os.name != "posix":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's
    return start != "0" and _start_time(pid) not in (start, "0")  # the pid was reused


def _remove_stale_temporaries(path: str) -> None:
    """Delete temporaries of earlier saves of ``path`` whose writer has died (SIGKILL, power loss)."""
    stem = _temporary_stem(os.path.basename(path))
    try:
        names = [e.name for e in os.scandir(os.path.dirname(path)) if e.name.startswith(stem + ".")]
    except OSError:
        return
    for name in names:
        parts = name.rsplit(".", 5)
        if len(parts) != 6 or parts[0] != stem or not parts[3].isdigit():
            continue
        _, host, boot, pid, start, _ = parts
        if _writer_is_gone(host, boot, int(pid), start):
            try:
                os.unlink(os.path.join(os.path.dirname(path), name))
            except OSError:
                pass  # removed by a concurrent save


# loading ----------------------------------------------------------------------------------------


def _fail(path, message: str):
    raise CheckpointError(f"munet.load: {path}: {message}")


def _describe(f) -> str:
    """How error messages name ``f``: its path, or the file object's name or type."""
    if isinstance(f, (str, bytes, os.PathLike)):
        return os.fsdecode(os.fspath(f))
    name = getattr(f, "name", None)
    return name if isinstance(name, str) else f"<{type(f).__name__}>"


class _Source:
    """A checkpoint opened for reading: a regular file (checked before it is opened) or a binary stream."""

    def __init__(self, f):
        self.name = _describe(f)
        self.size = None  # bytes from the start position, where known
        self.fileno = None
        if isinstance(f, (str, bytes, os.PathLike)):
            self._open_path(os.fspath(f))
        else:
            self._check_stream(f)
            self.stream, self.owned = f, False

    def _open_path(self, path) -> None:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            _fail(self.name, f"not a regular file ({_file_kind(info.st_mode)}); munet.load reads only regular files")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced between stat and open
            os.close(fd)
            _fail(self.name, f"not a regular file ({_file_kind(info.st_mode)}); munet.load reads only regular files")
        self.stream, self.owned = os.fdopen(fd, "rb", buffering=0), True
        self.size, self.fileno = info.st_size, fd

    def _check_stream(self, f) -> None:
        if not hasattr(f, "read"):
            raise TypeError(f"munet.load: f must be a path or a binary file object, got {type(f).__name__}")
        if isinstance(f, io.TextIOBase):
            raise TypeError("munet.load: the file object is a text stream; open it in binary mode ('rb')")
        if hasattr(f, "readable") and not f.readable():
            raise ValueError(f"munet.load: the file object {self.name} is not open for reading")

    def read_exact(self, n: int, what: str) -> bytes:
        buffer = bytearray(n)
        self.read_into(memoryview(buffer), what)
        return bytes(buffer)

    def read_into(self, view: memoryview, what: str, hasher=None) -> None:
        done = 0
        while done < len(view):
            part = view[done : done + _READ_CHUNK]
            got = self.stream.readinto(part) if hasattr(self.stream, "readinto") else None
            if got is None:
                data = self.stream.read(len(part))
                if isinstance(data, str):
                    raise TypeError("munet.load: the file object returned str; open it in binary mode ('rb')")
                got = len(data)
                part[:got] = data
            if not got:
                _fail(self.name, f"file ends inside {what} (truncated)")
            if hasher is not None:
                hasher.update(part[:got])
            done += got

    def at_end(self) -> bool:
        return not self.stream.read(1)

    def close(self) -> None:
        if self.owned:
            self.stream.close()


def _file_kind(mode: int) -> str:
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")]
    kinds += [(stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _check_not_pickle(path, raw: bytes) -> None:
    if raw[:4] == b"PK\x03\x04":
        _fail(
            path,
            "this is a zip archive (a torch.save checkpoint), not a safetensors file; munet.load reads such "
            "checkpoints of tensors and containers, this reader does not",
        )
    if raw[:1] == b"\x80" and raw[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        _fail(
            path, "this is a Python pickle; MuNet never unpickles files. Save tensors with munet.save or safetensors."
        )


def _no_duplicates(pairs):
    keys = set()
    for k, _ in pairs:
        if k in keys:
            raise ValueError(f"duplicate key {k!r} in a JSON object")
        keys.add(k)
    return dict(pairs)


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


_JSON = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constant)


def _parse_json(path, text: str, what: str):
    """``text`` parsed as strict JSON (no duplicate keys, no NaN); ``CheckpointError`` naming ``what``."""
    try:
        return _JSON.decode(text)
    except RecursionError:
        _fail(path, f"{what} is nested too deeply")
    except ValueError as exc:  # JSONDecodeError, a duplicate key, NaN
        _fail(path, f"{what} is not valid JSON ({exc})")


def _read_header(source: _Source) -> tuple[bytes, dict]:
    path = source.name
    if source.size is not None and source.size < 8:
        _fail(path, f"file is {source.size} bytes, too short for a safetensors header")
    prefix = source.read_exact(8, "the header size")
    _check_not_pickle(path, prefix)
    (n,) = struct.unpack("<Q", prefix)
    if source.size is not None and 8 + n > source.size:
        _fail(path, f"header size {n} exceeds the file size {source.size} (truncated or not a safetensors file)")
    if n > _MAX_HEADER:
        _fail(path, f"header size {n} exceeds the limit of {_MAX_HEADER} bytes (damaged or not a safetensors file)")
    raw = source.read_exact(n, "the header")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(path, f"header is not valid UTF-8 ({exc})")
    header = _parse_json(path, text, "header")
    if not isinstance(header, dict):
        _fail(path, "header is not a JSON object")
    return raw, header


def _decode_layout(path, header: dict) -> tuple[OrderedDict, int]:
    """Each tensor's ``(dtype, shape, begin, end)``, checked to tile the data section; and its length."""
    layout = OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            _fail(path, f"tensor '{name}' has a malformed entry {info!r}")
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(code, str) or code not in _DTYPE_OF:
            _fail(path, f"tensor '{name}' has unknown dtype {code!r}; supported: {', '.join(_DTYPE_OF)}")
        dtype = _DTYPE_OF[code]
        if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
            _fail(path, f"tensor '{name}' has an invalid shape {shape!r} (expected a list of integers >= 0)")
        if math.prod(s for s in shape if s) > _MAX_NUMEL:
            _fail(path, f"tensor '{name}' has shape {shape}, whose element count overflows int64")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
            _fail(path, f"tensor '{name}' has invalid data_offsets {offsets!r}")
        begin, end = offsets
        needed = math.prod(shape) * dtype.itemsize
        if begin < 0 or end - begin != needed:
            _fail(
                path,
                f"tensor '{name}' ({code}, shape {shape}) needs {needed} bytes but its offsets are [{begin}, {end}]",
            )
        layout[name] = (dtype, shape, begin, end)
    covered = 0
    for name, (_, _, begin, end) in sorted(layout.items(), key=lambda item: item[1][2:]):
        if begin != covered:
            _fail(path, f"tensor data is not contiguous at '{name}' (expected offset {covered}, got {begin})")
        covered = end
    return layout, covered


def _read_metadata(path, header: dict, raw_header: bytes) -> dict | None:
    """The checked manifest of a MuNet file, or None for a plain safetensors file (no munet marks)."""
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        _fail(path, "__metadata__ is not a JSON object of strings")
    marks = [k for k in metadata if k.startswith(_RESERVED_PREFIX)]
    if not marks:
        return None
    if MANIFEST_KEY not in metadata:
        _fail(path, f"has {', '.join(repr(k) for k in marks)} but no '{MANIFEST_KEY}' (the file is damaged)")
    if DIGEST_KEY in metadata:
        _check_digest(path, header, raw_header)
    manifest = _parse_json(path, metadata[MANIFEST_KEY], "manifest")
    if not isinstance(manifest, dict) or manifest.get("format") not in ("munet", PROGRAM_FORMAT):
        _fail(path, "manifest is malformed (expected an object with format 'munet' or 'munet-program')")
    version = manifest.get("version", 0)
    if type(version) is not int:
        _fail(path, f"manifest version must be an integer, got {version!r}")
    if version > FORMAT_VERSION:
        _fail(path, f"written by a newer MuNet (format version {version}); this one reads {FORMAT_VERSION}")
    if DIGEST_KEY not in metadata and version >= _DIGEST_VERSION:
        _fail(path, f"has '{MANIFEST_KEY}' (format version {version}) but no '{DIGEST_KEY}' (the file is damaged)")
    if manifest["format"] == "munet" and "tree" not in manifest:
        _fail(path, "manifest is malformed (no tree)")
    return manifest


def _check_digest(path, header: dict, raw_header: bytes) -> None:
    """The header must be byte for byte what MuNet writes for it, and match its digest."""
    if _header_bytes(header) != raw_header:
        _fail(path, "header is not in the canonical form MuNet writes (the file is damaged or was edited)")
    metadata = header["__metadata__"]
    stored = metadata[DIGEST_KEY]
    metadata[DIGEST_KEY] = _BLANK_DIGEST
    computed = _header_digest(_header_bytes(header))
    metadata[DIGEST_KEY] = stored
    if stored != computed:
        _fail(path, "header fails its SHA-256 digest check (the file is damaged or was edited)")


def _check_hashes(path, manifest: dict | None, layout: dict) -> None:
    if manifest is None:
        return
    hashes = manifest.get("sha256")
    if not isinstance(hashes, dict) or set(hashes) != set(layout):
        _fail(path, "manifest hashes do not list exactly the tensors in the file")
    if not all(isinstance(h, str) for h in hashes.values()):
        _fail(path, "manifest hashes are not strings")


def read_file(f, *, mmap: bool = False) -> tuple[dict | None, OrderedDict]:
    """The manifest (None for a plain safetensors file) and the tensors as NumPy arrays.

    Header, sizes, offsets, format version, the digest and every SHA-256 are checked before
    this returns. The arrays are the caller's own (``mmap=True``: copy-on-write views of the
    file, a path only).
    """
    source = _Source(f)
    try:
        path = source.name
        raw_header, header = _read_header(source)
        layout, data_len = _decode_layout(path, header)
        manifest = _read_metadata(path, header, raw_header)
        _check_hashes(path, manifest, layout)
        start = 8 + len(raw_header)
        if source.size is not None and source.size != start + data_len:
            _fail(
                path,
                f"data section has {source.size - start} bytes but the tensors cover {data_len} "
                "(truncated file or trailing bytes)",
            )
        if mmap:
            arrays = _map_tensors(source, layout, start, manifest)
        else:
            arrays = _read_tensors(source, layout, manifest)
            if source.size is None and not source.at_end():
                _fail(path, f"trailing bytes after the {data_len} bytes of tensor data")
        _log.info("loaded %s: %d tensors, %d bytes", path, len(arrays), start + data_len)
        return manifest, arrays
    finally:
        source.close()


def _read_tensors(source: _Source, layout: dict, manifest: dict | None) -> OrderedDict:
    """Each tensor read once into its own array, hashed as it is read."""
    arrays = OrderedDict()
    for name, (dtype, shape, _, _) in sorted(layout.items(), key=lambda item: item[1][2]):
        array = np.empty(shape, dtype=dtype.np)
        hasher = hashlib.sha256()
        source.read_into(memoryview(array.reshape(-1).view(np.uint8)), f"tensor '{name}'", hasher)
        _check_hash(source.name, manifest, name, hasher)
        arrays[name] = array
    return OrderedDict((name, arrays[name]) for name in layout)


def _map_tensors(source: _Source, layout: dict, start: int, manifest: dict | None) -> OrderedDict:
    """Each tensor a copy-on-write view of the mapped file (copied where its offset is unaligned)."""
    if source.fileno is None:
        raise ValueError("munet.load: mmap=True needs a file path, as torch.load's does")
    mapping = _mmap.mmap(source.fileno, 0, access=_mmap.ACCESS_COPY)
    arrays = OrderedDict()
    for name, (dtype, shape, begin, end) in layout.items():
        view = memoryview(mapping)[start + begin : start + end]
        _check_hash(source.name, manifest, name, hashlib.sha256(view))
        if begin == end:
            arrays[name] = np.empty(shape, dtype=dtype.np)
            continue
        array = np.frombuffer(mapping, dtype=dtype.np, count=math.prod(shape), offset=start + begin).reshape(shape)
        arrays[name] = array if array.flags.aligned else array.copy()
    return arrays


def _check_hash(path, manifest: dict | None, name: str, hasher) -> None:
    if manifest is not None and hasher.hexdigest() != manifest["sha256"][name]:
        _fail(path, f"tensor '{name}' fails its SHA-256 check (the file is damaged)")


def _unpack(path, node, tensors: dict):
    if not isinstance(node, dict) or "t" not in node:
        _fail(path, f"manifest node is malformed: {node!r}")
    kind = node["t"]
    if kind == "tensor":
        name = node.get("name")
        if not isinstance(name, str) or name not in tensors:
            _fail(path, f"manifest refers to tensor {name!r} that the file does not contain")
        t = tensors[name]
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
        name = node.get("v")
        try:
            return D._by_name(name)
        except (KeyError, TypeError):
            _fail(path, f"manifest names unknown dtype {name!r}")
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
    _fail(path, f"manifest has an unknown node type {kind!r}")


def load(f, map_location=None, *, device=None, weights_only: bool = True, mmap: bool | None = None):
    """Load what ``save`` wrote (or any safetensors file, as a state dict), fully validated first.

    ``f`` is a path or a binary file object. ``device`` (or ``map_location``) names the device
    to load onto. ``mmap=True`` (a path only) maps the file: cpu tensors are copy-on-write views
    of it, as with ``torch.load(mmap=True)``. A saved compiled program comes back as a runnable
    ``munet.compiler.saving.LoadedProgram``. Any damage raises ``CheckpointError``.
    """
    name = _describe(f)
    device = _map_device(device if device is not None else map_location)
    if _starts_with_zip(f):  # a torch.save checkpoint: read by a restricted unpickler
        from munet.serialization_torch import load_torch_zip

        return load_torch_zip(f, name, device, bool(mmap), _fail)
    manifest, arrays = read_file(f, mmap=bool(mmap))
    try:
        return _build(name, manifest, arrays, device)
    except RecursionError:
        _fail(name, "manifest is nested too deeply")


def _starts_with_zip(f) -> bool:
    """Whether ``f`` (a regular file path or a seekable stream, left where it was) starts like a zip."""
    from munet.serialization_torch import is_torch_zip

    if isinstance(f, (str, bytes, os.PathLike)):
        if not os.path.isfile(f):
            return False  # read_file names what it is
        with open(f, "rb") as stream:
            return is_torch_zip(stream.read(4))
    if isinstance(f, io.TextIOBase) or not (hasattr(f, "seekable") and f.seekable() and hasattr(f, "read")):
        return False  # read_file names what is wrong with it
    start = f.tell()
    prefix = f.read(4)
    f.seek(start)
    return isinstance(prefix, bytes) and is_torch_zip(prefix)


def _build(name: str, manifest: dict | None, arrays: OrderedDict, device):
    if manifest is not None and manifest["format"] == PROGRAM_FORMAT:
        from munet.compiler.saving import load_program

        return load_program(name, manifest, arrays, device)
    from munet.ops.creation import as_tensor

    # Everything is validated; the arrays are ours, so cpu tensors wrap them without a copy.
    tensors = {key: as_tensor(arr, device=device) for key, arr in arrays.items()}
    if manifest is None:
        return OrderedDict((key, tensors[key]) for key in arrays)
    return _unpack(name, manifest["tree"], tensors)


def _map_device(map_location):
    """The device to load onto: ``map_location`` when it names one, else cpu."""
    from munet._device import device

    return map_location if isinstance(map_location, (str, device)) else "cpu"
