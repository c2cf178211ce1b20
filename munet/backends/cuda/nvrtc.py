"""Compile CUDA C with NVRTC (``cuda.bindings.nvrtc``), cached on disk; no GPU is needed.

The one NVRTC wrapper of MuNet: the cuda backend's kernels (:func:`compile_source`) and user
kernels (``munet.rtc.CudaModule``, through :func:`compile_program`) both compile here.

``compile_source(source, arch="sm_90") -> Cubin`` compiles one translation unit for one real
architecture and returns its cubin (what ``cuModuleLoadData`` and CuPy's ``RawModule`` load),
the NVRTC log and whether it came from the cache. Options: ``--gpu-architecture=<arch>``,
``--std=c++17``, ``--fmad=false`` (``a * b + c`` rounds twice, as NumPy and the C renderer do;
see ``scalar_cuda.py``) and ``-I`` the CUDA headers' directory (:func:`include_dir`: the
``include`` folder of the installed runtime headers wheel, ``nvidia-cuda-runtime`` for CUDA 13 or
``nvidia-cuda-runtime-cu12``, found through its package, so ``cuda_fp16.h`` resolves).

The cache is the compiler's (``munet/compiler/codegen/cache.py``: ``MUNET_CACHE_DIR``, atomic
writes, a checksum per entry, a corrupt entry rebuilt), keyed by the source, NVRTC's version and
the options, so a new NVRTC or other options never reuse an old cubin. A failed compilation raises
:class:`NvrtcError` carrying NVRTC's log (and the source's name and architecture);
:class:`NvrtcUnavailableError` (a ``munet.DeviceError``) says that ``cuda-bindings``/``nvidia-cuda-nvrtc``
are not installed.

:func:`compile_program(source, options, name_expressions)` is the general form (no cache, the
caller's options as given): it returns a :class:`Program` holding a cubin (``sm_XX``) or PTX
(``compute_XX``, NUL-terminated as the driver takes it) and each name expression's lowered
(mangled) name (``nvrtcAddNameExpression``/``nvrtcGetLoweredName``: ``"axpy<float>"``).
"""

from __future__ import annotations

import functools
import importlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from munet import metrics
from munet._device import DeviceError
from munet.compiler.codegen import cache

_log = logging.getLogger(__name__)

BASE_OPTIONS = ("--std=c++17", "--fmad=false")
_HEADER_PACKAGES = ("nvidia.cu13", "nvidia.cuda_runtime")  # CUDA 13 wheels, then CUDA 12's


class NvrtcUnavailableError(DeviceError):
    """NVRTC (``cuda-bindings`` with ``nvidia-cuda-nvrtc``) or the CUDA headers are not installed."""


class NvrtcError(RuntimeError):
    """NVRTC rejected a source; ``log`` is its compilation log."""

    def __init__(self, message: str, log: str):
        super().__init__(f"{message}:\n{log}")
        self.log = log


@dataclass(frozen=True)
class Cubin:
    data: bytes
    arch: str
    log: str
    cache_hit: bool


@dataclass(frozen=True)
class Program:
    image: bytes  # a cubin, or PTX text (NUL-terminated, as the driver takes it)
    cubin: bool
    lowered: dict  # name expression -> lowered (mangled) name
    log: str


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as error:  # pragma: no cover - the test extra installs it
        raise NvrtcUnavailableError(
            "cuda: NVRTC is not installed (pip install 'munet[cuda13]' or 'munet[cuda12]')"
        ) from error
    return nvrtc


def _check(result, what: str):
    """The values of an NVRTC call's result tuple after its status, raising on an error status."""
    nvrtc = _nvrtc()
    status, *values = result
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, message = nvrtc.nvrtcGetErrorString(status)
        raise RuntimeError(f"nvrtc: {what} failed: {message.decode(errors='replace')}")
    return values[0] if len(values) == 1 else values


@functools.cache
def version() -> tuple:
    """NVRTC's ``(major, minor)``."""
    return tuple(_check(_nvrtc().nvrtcVersion(), "nvrtcVersion"))


@functools.cache
def supported_archs() -> tuple:
    """The ``sm_XY`` numbers this NVRTC compiles for (``(75, 80, ..., 90, ...)``)."""
    return tuple(_check(_nvrtc().nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))


def arch_for(capability: tuple) -> str:
    """``sm_XY`` for a device of compute capability ``(X, Y)``; raises when this NVRTC lacks it."""
    number = 10 * int(capability[0]) + int(capability[1])
    if number not in supported_archs():
        raise NvrtcUnavailableError(
            f"cuda: NVRTC {'.'.join(map(str, version()))} cannot compile for sm_{number} "
            f"(it supports {', '.join(f'sm_{a}' for a in supported_archs())}); install a newer nvidia-cuda-nvrtc"
        )
    return f"sm_{number}"


@functools.cache
def include_dir() -> Path:
    """The directory holding ``cuda_fp16.h``, from the installed CUDA runtime headers wheel."""
    for name in _HEADER_PACKAGES:
        try:
            package = importlib.import_module(name)
        except ImportError:
            continue
        for root in getattr(package, "__path__", ()):
            candidate = Path(root) / "include"
            if (candidate / "cuda_fp16.h").is_file():
                return candidate
    raise NvrtcUnavailableError(
        "cuda: the CUDA headers (cuda_fp16.h) are not installed: pip install nvidia-cuda-runtime "
        "(CUDA 13) or nvidia-cuda-runtime-cu12"
    )


def options_for(arch: str, extra: tuple = ()) -> tuple:
    """The NVRTC options a source is compiled with for ``arch`` (part of the cache key)."""
    return (f"--gpu-architecture={arch}", *BASE_OPTIONS, f"-I{include_dir()}", *extra)


def _entry(source: str, options: tuple) -> Path:
    identity = f"nvrtc {'.'.join(map(str, version()))}"
    return cache.cache_dir() / f"{cache.cache_key(source, identity, options)}.cubin"


def compile_source(source: str, arch: str = "sm_90", *, name: str = "munet.cu", extra_options: tuple = ()) -> Cubin:
    """The cubin of CUDA C ``source`` for ``arch``, from the disk cache when it holds it."""
    options = options_for(arch, tuple(extra_options))
    path = _entry(source, options)
    if cache.entry_valid(path):
        metrics.count_kernel_cache_hit("cuda")
        return Cubin(path.read_bytes(), arch, "", True)
    start = time.perf_counter()
    data, log = _compile(source, name, arch, options)
    cache.write_entry(path, data)
    seconds = time.perf_counter() - start
    metrics.observe_kernel_compile("cuda", seconds)
    _log.debug("nvrtc compiled %s for %s in %.3f s", name, arch, seconds)
    return Cubin(data, arch, log, False)


def compile_program(
    source: str, options: tuple, name_expressions: tuple = (), *, name: str = "munet.cu", label: str | None = None
) -> Program:
    """Compile ``source`` with ``options`` as given (they choose the architecture: ``sm_XX`` gives a
    cubin, ``compute_XX`` PTX) plus ``-I`` the CUDA headers when installed; not cached. A failed
    compilation raises :class:`NvrtcError` whose message starts with ``label`` (default: the name)."""
    headers = None if any(o.startswith("-I") for o in options) else _optional_include()
    options = (*options, *((f"-I{headers}",) if headers else ()))
    nvrtc = _nvrtc()
    program = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        for expr in name_expressions:
            _check((nvrtc.nvrtcAddNameExpression(program, expr.encode())[0], None), f"nvrtcAddNameExpression({expr!r})")
        encoded = [o.encode() for o in options]
        (status,) = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
        log = _read(nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, program)
        log = log.rstrip(b"\0 ").decode(errors="replace")
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            shown = [o for o in options if not o.startswith("-I")]
            raise NvrtcError(f"{label or name}: NVRTC failed to compile the source (options {shown})", log)
        cubin = _check(nvrtc.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize") > 0
        if cubin:
            image = _read(nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, program)
        else:
            image = _read(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, program)
        lowered = {}
        for expr in name_expressions:
            lowered[expr] = _check(nvrtc.nvrtcGetLoweredName(program, expr.encode()), "nvrtcGetLoweredName").decode()
        return Program(image, cubin, lowered, log)
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def _optional_include() -> Path | None:
    """The CUDA headers' directory, or None when the wheel is absent (a source may not need it)."""
    try:
        return include_dir()
    except NvrtcUnavailableError:
        return None


def _compile(source: str, name: str, arch: str, options: tuple) -> tuple:
    """(cubin, log) of ``source``; ``options`` already hold ``-I`` the headers (options_for)."""
    try:
        program = compile_program(source, options, name=name, label=f"nvrtc: compiling {name} for {arch}")
    except NvrtcError as error:
        raise NvrtcError(f"nvrtc: compiling {name} for {arch} failed", error.log) from None
    return program.image, program.log


def _read(size_call, get_call, program) -> bytes:
    """An NVRTC output (log, cubin) read into a fresh mutable buffer: NVRTC writes into the buffer it
    is given, and writing into a ``bytes`` object would overwrite an immutable (possibly shared) value."""
    size = _check(size_call(program), size_call.__name__)
    buffer = bytearray(size)
    _check((get_call(program, buffer)[0], None), get_call.__name__)
    return bytes(buffer)


def combine(sources) -> str:
    """One translation unit of several rendered :class:`CudaSource` s (distinct names compiled once).

    Rendered sources guard their shared prelude, so they concatenate; a test compiles a whole op
    suite as one NVRTC program this way (one NVRTC start instead of hundreds)."""
    seen, parts = set(), []
    for s in sources:
        if s.name not in seen:
            seen.add(s.name)
            parts.append(s.source)
    return "\n".join(parts)
