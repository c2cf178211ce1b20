"""munet/backends/cpu/host_memory.py: with munet loaded, glibc serves a freed tensor's memory to the
next one from its heap instead of fresh mmap regions (whose pages fault in again)."""

import ctypes
import ctypes.util
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

import munet  # noqa: F401 - loads the cpu backend, which configures malloc
from munet.backends.cpu import host_memory


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"
    )]  # fmt: skip


def _mmapped_blocks() -> int:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    try:
        mallinfo2 = libc.mallinfo2
    except AttributeError:
        pytest.skip("not glibc 2.33+ (no mallinfo2)")
    mallinfo2.restype = _MallInfo2
    return mallinfo2().hblks


def test_a_large_array_comes_from_the_heap_not_a_fresh_mmap():
    if not host_memory.configure():
        pytest.skip("malloc tuning is off here (not glibc, MUNET_MALLOC_TUNING=0 or glibc's own MALLOC_* settings)")
    before = _mmapped_blocks()
    a = np.ones(5 << 20, np.float32)  # 20 MiB: above glibc's default threshold, below MuNet's
    assert _mmapped_blocks() == before
    del a


@pytest.mark.parametrize("env", [{"MUNET_MALLOC_TUNING": "0"}, {"MALLOC_TRIM_THRESHOLD_": "131072"}])
def test_the_users_choice_is_kept(env):
    code = "from munet.backends.cpu import host_memory; print(host_memory.configure())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_configure_applies_on_glibc():
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert host_memory.configure() is True
