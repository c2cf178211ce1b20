"""The cuda Philox kernels (munet/backends/cuda/kernels_random.py) give the CPU backend's streams bit
for bit: run under the CPU emulation header, compiled by NVRTC for sm_80 and sm_90."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import munet
from munet.backends.cpu import kernels_random as cpu
from munet.backends.cuda import emulation, nvrtc
from munet.backends.cuda import kernels_random as R

SOURCES = [R.render_philox_words(), *(R.render_uniform(d) for d in ("float32", "float64", "float16", "bfloat16")),
           *(R.render_randint(d) for d in ("int64", "int32", "int8")),
           *(R.render_normal(d) for d in ("float32", "float64", "bfloat16"))]  # fmt: skip
# a counter whose low word is about to wrap, so the carry into the next words is exercised
KEY, COUNTER = 0x0123456789ABCDEF_FEDCBA9876543210, (5 << 64) | (2**64 - 3)


@pytest.fixture(scope="module")
def emulator():
    try:
        emulation.find_cxx()
    except emulation.EmulationUnavailableError as error:  # pragma: no cover - CI has g++
        pytest.skip(str(error))
    return emulation.Emulator(SOURCES)


class _Generator:
    """The CPU kernels' view of a generator: fixed (key, counter) blocks."""

    def philox_advance(self, blocks):
        return KEY, COUNTER


def _run(emulator, src, n, out, **scalars):
    args = [v for _, v in src.arguments(KEY, COUNTER, n, out, **scalars)]
    emulator.run(src, src.blocks(n), args)


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_words_are_numpys_philox_stream(emulator, n):
    out = np.zeros(n, np.uint64)
    _run(emulator, SOURCES[0], n, out)
    np.testing.assert_array_equal(out, cpu.random_words(_Generator(), n))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_uniform_is_the_cpu_kernels_bits(emulator, dtype):
    low, high = -0.3, 2.1
    src = R.render_uniform(dtype)
    out = np.zeros((5, 41), ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    _run(emulator, src, out.size, out, scale=high - low, low=low)
    want = cpu.uniform(shape=out.shape, dtype=getattr(munet, dtype), low=low, high=high, generator=_Generator())
    assert out.tobytes() == want.tobytes()


@pytest.mark.parametrize(("dtype", "low", "high"), [("int64", -(2**40), 2**41), ("int32", -5, 7), ("int8", 0, 300)])
def test_randint_is_the_cpu_kernels_values(emulator, dtype, low, high):
    src = R.render_randint(dtype)
    out = np.zeros(333, dtype)
    _run(emulator, src, out.size, out, span=high - low, low=low % 2**64)
    want = cpu.randint(shape=out.shape, dtype=getattr(munet, dtype), low=low, high=high, generator=_Generator())
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize(("dtype", "n"), [("float64", 1001), ("float32", 64), ("bfloat16", 9)])
def test_normal_is_the_cpu_kernels_box_muller(emulator, dtype, n):
    """The same words and formula; log/cos/sin from another math library: float64 to 1e-14."""
    src = R.render_normal(dtype)
    out = np.zeros(n, ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    emulator.run(src, n, [v for _, v in src.arguments(KEY, COUNTER, n, out, std=2.0, mean=0.5)])
    want = cpu.normal(shape=(n,), dtype=getattr(munet, dtype), mean=0.5, std=2.0, generator=_Generator())
    tol = {"float64": 1e-14, "float32": 2**-23, "bfloat16": 2**-7}[dtype]  # an ulp of the dtype at most
    np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_random_kernels_compile(arch):
    assert nvrtc.compile_source(nvrtc.combine(SOURCES), arch).data[:4] == b"\x7fELF"
