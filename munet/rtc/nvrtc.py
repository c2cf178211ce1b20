"""NVRTC through ``cuda.bindings.nvrtc``: compile CUDA C to PTX or a cubin, no GPU needed.

``compile_cuda(source, options, name_expressions)`` returns a :class:`Program` (the image, whether
it is a cubin, and each name expression's lowered name); a compile error raises with NVRTC's log.
The CUDA headers (``cuda_fp16.h``, ``cuda_bf16.h``, ...) come from the ``nvidia-cuda-runtime``
wheel; its include folder is passed with ``-I`` when it is installed.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import NamedTuple

from munet._device import DeviceError


class Program(NamedTuple):
    image: bytes  # PTX text (NUL-terminated, as the driver takes it) or a cubin
    cubin: bool
    lowered: dict  # name expression -> lowered (mangled) name
    log: str


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise DeviceError(
            "munet.rtc: NVRTC is not installed (pip install cuda-bindings nvidia-cuda-nvrtc, or munet[cuda]); "
            f"it compiles CudaModule sources ({exc})"
        ) from exc
    return nvrtc


@functools.cache
def include_dirs() -> tuple[str, ...]:
    """The CUDA header folders of the installed ``nvidia-cuda-runtime`` wheel (cu13, then cu12)."""
    found = []
    for package in ("nvidia.cu13", "nvidia.cuda_runtime"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        for root in spec.submodule_search_locations or ():
            path = os.path.join(root, "include")
            if os.path.isfile(os.path.join(path, "cuda_fp16.h")):
                found.append(path)
    return tuple(dict.fromkeys(found))


def supported_archs() -> tuple[int, ...]:
    """The compute capabilities NVRTC can produce a cubin for (``80`` is sm_80)."""
    nvrtc = _nvrtc()
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    _check(nvrtc, err, "nvrtcGetSupportedArchs")
    return tuple(archs)


def _check(nvrtc, err, call: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, text = nvrtc.nvrtcGetErrorString(err)
        raise RuntimeError(f"munet.rtc: {call} failed: {text.decode()}")


def _text(nvrtc, prog, size_call, get_call) -> bytes:
    err, size = size_call(prog)
    _check(nvrtc, err, size_call.__name__)
    # a fresh mutable buffer: NVRTC writes into it (into a bytes object it would overwrite an
    # immutable value, even the interpreter's shared one-byte b" ")
    buf = bytearray(size)
    (err,) = get_call(prog, buf)
    _check(nvrtc, err, get_call.__name__)
    return bytes(buf)


def compile_cuda(source: str, options: tuple, name_expressions: tuple = (), label: str = "CudaModule") -> Program:
    """Compile ``source`` with ``options`` (which choose the architecture); raises with the log."""
    nvrtc = _nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"rtc.cu", 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        for expr in name_expressions:
            (err,) = nvrtc.nvrtcAddNameExpression(prog, expr.encode())
            _check(nvrtc, err, f"nvrtcAddNameExpression({expr!r})")
        opts = [o.encode() for o in (*options, *(f"-I{d}" for d in include_dirs()))]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        log = _text(nvrtc, prog, nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog).rstrip(b"\0").decode()
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"{label}: NVRTC failed to compile the source (options {list(options)}):\n{log}")
        err, cubin_size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(nvrtc, err, "nvrtcGetCUBINSize")
        if cubin_size:
            image = _text(nvrtc, prog, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        else:
            image = _text(nvrtc, prog, nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX)
        lowered = {}
        for expr in name_expressions:
            err, name = nvrtc.nvrtcGetLoweredName(prog, expr.encode())
            _check(nvrtc, err, f"nvrtcGetLoweredName({expr!r})")
            lowered[expr] = name.decode()
        return Program(image, bool(cubin_size), lowered, log)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
