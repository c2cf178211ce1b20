"""The on-disk cache of compiled kernels.

Entries live in ``MUNET_CACHE_DIR`` (default ``$XDG_CACHE_HOME/munet`` or ``~/.cache/munet``)
under ``kernels/``, one shared library per key. The key hashes the kernel source, the
compiler's identity (path and ``--version`` text) and the flags, so a new compiler or a new
renderer never reuses an old binary. Entries are written to a temporary name and renamed,
so concurrent processes never see half a file. Each entry has a ``.sha256`` beside it; an
entry whose bytes do not match it (truncated, overwritten), or that fails to load, is rebuilt.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_dir() -> Path:
    """Where compiled kernels are kept (created on first use)."""
    root = os.environ.get("MUNET_CACHE_DIR")
    if root:
        base = Path(root)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "munet"
    path = base / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_key(source: str, compiler_id: str, flags: tuple) -> str:
    h = hashlib.sha256()
    for part in (source, compiler_id, " ".join(flags)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def entry_path(key: str) -> Path:
    return cache_dir() / f"{key}.so"


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_entry(path: Path, data: bytes) -> None:
    """Store a compiled entry and its checksum (checksum last: a lone entry reads as corrupt)."""
    write_atomically(path, data)
    write_atomically(path.with_suffix(".sha256"), hashlib.sha256(data).hexdigest().encode())


def entry_valid(path: Path) -> bool:
    """Whether ``path`` exists and its bytes match the stored checksum."""
    try:
        expected = path.with_suffix(".sha256").read_bytes().decode().strip()
        return hashlib.sha256(path.read_bytes()).hexdigest() == expected
    except (OSError, UnicodeDecodeError):
        return False
