"""``munet.backends.cpu.get_cpu_capability()``: the widest x86 vector ISA of this CPU, in PyTorch's
words ("AVX512", "AVX2", "NO AVX"), or "DEFAULT" elsewhere. NumPy's kernels (which run MuNet's cpu
ops) dispatch to it at run time; MuNet's generated C is compiled for the baseline ISA."""

from __future__ import annotations

import functools
import platform

_AVX512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"}


@functools.cache
def _cpu_flags() -> frozenset:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def get_cpu_capability() -> str:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "DEFAULT"
    flags = _cpu_flags()
    if not flags:
        return "DEFAULT"
    if _AVX512 <= flags:
        return "AVX512"
    if {"avx2", "fma"} <= flags:
        return "AVX2"
    return "NO AVX" if "avx" not in flags else "DEFAULT"
