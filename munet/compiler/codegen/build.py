"""Compile generated C with the system compiler and load it with ctypes.

The compiler is found at run time: ``$CC`` when set (a missing binary means "no compiler";
that is how tests simulate a machine without one), else ``cc``, ``gcc`` or ``clang`` on
``PATH``. Flags: ``-O3`` (vectorizes) for the baseline ISA, so cached binaries stay
portable; ``-ffp-contract=off`` keeps ``a * b + c`` two roundings as NumPy does;
``-fno-math-errno`` lets ``sqrt`` vectorize; ``-fno-trapping-math`` lets a select next to a
float/double conversion vectorize (gcc 12 otherwise keeps it a branch; IEEE results are unchanged,
only exception flags, which nothing reads); ``-fopenmp`` when the compiler accepts it.

``load_kernel(source, name)`` returns ``(function, cache_hit)``; it raises
:class:`CompilerUnavailableError` when no compiler works.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from munet import metrics
from munet.compiler.codegen import cache

_log = logging.getLogger(__name__)

BASE_FLAGS = ("-O3", "-fPIC", "-shared", "-std=c99", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math")


class CompilerUnavailableError(RuntimeError):
    """No working C compiler: the cpu plan runs NumPy kernels instead."""


@functools.cache
def _probe(cc_env: str | None, path_env: str | None):
    names = [cc_env] if cc_env else ["cc", "gcc", "clang"]
    for name in names:
        exe = shutil.which(name)
        if exe is None:
            continue
        try:
            version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        flags = BASE_FLAGS + (("-fopenmp",) if _accepts(exe, "-fopenmp") else ())
        return exe, f"{exe}\n{version}", flags
    return None


def _accepts(exe: str, flag: str) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text("int probe(void) { return 0; }\n")
        result = subprocess.run(
            [exe, *BASE_FLAGS, flag, str(src), "-o", str(Path(tmp) / "probe.so")], capture_output=True, timeout=60
        )
        return result.returncode == 0


def find_compiler():
    """``(path, identity, flags)`` of the C compiler to use, or None."""
    return _probe(os.environ.get("CC"), os.environ.get("PATH"))


def compiler_name() -> str | None:
    found = find_compiler()
    return None if found is None else found[0]


def _compile(
    exe: str, flags: tuple, source: str, target: Path, what: str = "munet codegen: a generated kernel"
) -> None:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.c"
        src.write_text(source)
        out = Path(tmp) / "kernel.so"
        result = subprocess.run([exe, *flags, str(src), "-o", str(out), "-lm"], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{what} failed to compile with {exe}:\n{result.stderr}\n{source}")
        cache.write_entry(target, out.read_bytes())
    seconds = time.perf_counter() - start
    metrics.observe_kernel_compile("cpu", seconds)
    _log.debug("compiled kernel %s with %s in %.3f s", target.name, exe, seconds)


_loaded: dict = {}  # path -> CDLL, so a process loads each entry once


_FUSED_ARGTYPES = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]


def load_library(source: str, name: str | None, options: tuple = (), what: str = "munet codegen: a generated kernel"):
    """Compile (or fetch from the disk cache) ``source`` with the base flags and ``options`` into a
    shared library that defines ``name`` (when given; its absence marks a corrupt entry); returns ``(library, cache_hit)``. ``what`` names the
    source in a compile error (``munet.rtc`` passes the user's module)."""
    found = find_compiler()
    if found is None:
        raise CompilerUnavailableError("no C compiler found ($CC, cc, gcc or clang)")
    exe, identity, flags = found
    flags = (*flags, *options)
    path = cache.entry_path(cache.cache_key(source, identity, flags))
    hit = cache.entry_valid(path)
    lib = _loaded.get(str(path))
    if lib is None:
        if not hit:
            _compile(exe, flags, source, path, what)
        try:
            lib = ctypes.CDLL(str(path))
            if name is not None:
                getattr(lib, name)
        except (OSError, AttributeError):  # a corrupt or truncated entry: rebuild it
            hit = False
            _compile(exe, flags, source, path, what)
            lib = ctypes.CDLL(str(path))
        _loaded[str(path)] = lib
    if hit:
        metrics.count_kernel_cache_hit("cpu")
        _log.debug("kernel cache hit: %s (%s)", name, path.name)
    return lib, hit


def load_kernel(source: str, name: str, argtypes: list | None = None):
    """Compile (or fetch from the disk cache) ``source`` and return ``(function, cache_hit)``.

    ``argtypes``: the ctypes argument types of ``name`` (default: the fused kernels' ``(in, out, p, threads)``)."""
    lib, hit = load_library(source, name)
    fn = getattr(lib, name)
    fn.restype = None
    fn.argtypes = _FUSED_ARGTYPES if argtypes is None else argtypes
    return fn, hit
