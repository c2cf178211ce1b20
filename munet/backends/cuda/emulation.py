"""Run rendered CUDA kernels on the CPU: a compatibility header and the system C++ compiler.

This checks the numbers of the generated CUDA C on machines without a GPU (CI). A rendered
kernel is compiled by ``$CXX``/``c++``/``g++``/``clang++`` with :data:`COMPAT_HEADER` in place of
``cuda_fp16.h``/``cuda_bf16.h``:

- ``blockIdx``/``threadIdx``/``blockDim``/``gridDim`` are variables that a generated launcher
  ``emulate_<name>(grid, block, args)`` sets while it loops over every block and thread in order,
  calling the kernel once per thread (``args`` is ``cuLaunchKernel``'s ``void **kernelParams``);
  many kernels compile into one library (:class:`Emulator`), one compiler run for a suite;
- a kernel with shared memory (``CudaSource.shared_memory``: the one-block-per-row reductions)
  runs each block's threads as ``std::thread`` s, one block at a time: ``__shared__`` is a
  function-static array, ``__syncthreads()`` a ``std::barrier`` of the block (a thread that has
  returned drops out of it, as an exited CUDA thread does);
- ``__global__``, ``__device__`` and ``__forceinline__`` are macros for plain C++ functions
  (``__launch_bounds__`` expands to nothing),
  CUDA's float math (``expf``, ``erfinvf``...) is the C library's (``erfinv`` by Giles'
  approximation and Newton steps), ``__int_as_float`` and friends are ``memcpy`` bit casts;
  ``atomicCAS``/``atomicAdd``/``atomicMax`` (the types the kernels use) are GCC's atomic builtins;
- ``__half`` and ``__nv_bfloat16`` are structs of 16 bits whose conversions from float and double
  round to nearest even once (subnormals, overflow to infinity, NaN kept), as CUDA's ``_rn``
  conversions do.

Flags: ``-O0 -std=c++20 -pthread -fwrapv -ffp-contract=off`` (no contraction, as ``--fmad=false`` on the
device; ``-O0`` because a suite of hundreds of kernels compiles in seconds, and the checks are of
numbers, not speed). Binaries are cached like the C renderer's (``munet/compiler/codegen/cache.py``).
:func:`emulate` runs a kernel on NumPy buffers. Warp-level primitives (shuffles, votes) are not
emulated; the renderers use none.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from munet.backends.cuda.scalar_cuda import HEADER
from munet.compiler.codegen import cache

FLAGS = ("-O0", "-std=c++20", "-pthread", "-fwrapv", "-ffp-contract=off", "-fPIC", "-shared")

COMPAT_HEADER = r"""// munet: CUDA built-ins for running generated kernels on the CPU (emulation.py)
#include <math.h>
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>
struct dim3 { unsigned x, y, z; };
static thread_local dim3 blockIdx, threadIdx;
static dim3 blockDim, gridDim;
// a block's threads run as std::threads (one block at a time), __syncthreads is their barrier
static thread_local std::barrier<> *munet_block_barrier = nullptr;
#define __shared__ static
static inline void __syncthreads() { munet_block_barrier->arrive_and_wait(); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
using std::isinf;
using std::isnan;
using std::signbit;
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline unsigned long long atomicCAS(unsigned long long *address, unsigned long long compare,
                                           unsigned long long value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;  // the old value, as CUDA's
}
static inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, sizeof f); return f; }
static inline double __longlong_as_double(long long x) { double f; std::memcpy(&f, &x, sizeof f); return f; }
static inline unsigned __float_as_uint(float x) { unsigned u; std::memcpy(&u, &x, sizeof u); return u; }
static inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, sizeof f); return f; }
static inline long long __double_as_longlong(double x) { long long u; std::memcpy(&u, &x, sizeof u); return u; }
// the other atomics the kernels use (the put kernels'), as compare-and-swap loops over the builtins
template <typename T, typename F> static inline T munet_atomic_update(T *address, F next) {
  T old;
  __atomic_load(address, &old, __ATOMIC_SEQ_CST);
  T value = next(old);
  while (!__atomic_compare_exchange(address, &old, &value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) value = next(old);
  return old;  // the old value, as CUDA's
}
static inline unsigned atomicCAS(unsigned *address, unsigned compare, unsigned value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}
static inline float atomicAdd(float *a, float v) { return munet_atomic_update(a, [v](float o) { return o + v; }); }
static inline double atomicAdd(double *a, double v) { return munet_atomic_update(a, [v](double o) { return o + v; }); }
static inline unsigned atomicAdd(unsigned *a, unsigned v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
static inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v) {
  return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);
}
static inline unsigned long long atomicMax(unsigned long long *a, unsigned long long v) {
  return munet_atomic_update(a, [v](unsigned long long o) { return o > v ? o : v; });
}
static inline double erfinv(double y) {
  const double a = fabs(y);
  if (!(a <= 1.0)) return NAN;
  if (a == 1.0) return copysign(INFINITY, y);
  const double w = -log((1.0 - y) * (1.0 + y));
  double p, x;
  if (w < 5.0) {
    const double v = w - 2.5;
    p = 2.81022636e-08; p = 3.43273939e-07 + p * v; p = -3.5233877e-06 + p * v; p = -4.39150654e-06 + p * v;
    p = 0.00021858087 + p * v; p = -0.00125372503 + p * v; p = -0.00417768164 + p * v;
    p = 0.246640727 + p * v; p = 1.50140941 + p * v;
  } else {
    const double v = sqrt(w) - 3.0;
    p = -0.000200214257; p = 0.000100950558 + p * v; p = 0.00134934322 + p * v; p = -0.00367342844 + p * v;
    p = 0.00573950773 + p * v; p = -0.0076224613 + p * v; p = 0.00943887047 + p * v;
    p = 1.00167406 + p * v; p = 2.83297682 + p * v;
  }
  x = p * y;
  for (int i = 0; i < 3; i++) {
    const double density = 1.1283791670955126 * exp(-x * x);
    if (density == 0.0) break;
    if (a >= 0.5) {
      const double upper = erfc(fabs(x));
      x += copysign(1.0, y) * (log(upper) - log(1.0 - a)) * upper / density;
    } else {
      x -= (erf(x) - y) / density;
    }
  }
  return x;
}
static inline float erfinvf(float y) { return (float)erfinv((double)y); }
// a double rounded once, to nearest even, to a 16-bit float of `man` mantissa and `ebits` exponent bits
static inline unsigned short munet_round16(double v, int man, int ebits) {
  const unsigned short sign = std::signbit(v) ? 0x8000 : 0;
  const int bias = (1 << (ebits - 1)) - 1;
  const unsigned short inf = (unsigned short)(((1 << ebits) - 1) << man);
  if (std::isnan(v)) return sign | inf | (unsigned short)(1 << (man - 1));
  const double a = fabs(v);
  if (std::isinf(a)) return sign | inf;
  if (a == 0.0) return sign;
  int e;
  frexp(a, &e);
  e -= 1;  // a = m 2^e, 1 <= m < 2
  if (e < 1 - bias) e = 1 - bias;  // subnormal: the smallest normal exponent's quantum
  long long r = (long long)nearbyint(ldexp(a, man - e));  // exact scaling, then ties to even
  if (r >= (2LL << man)) { r >>= 1; e += 1; }  // rounded up into the next binade
  if (e > bias) return sign | inf;
  if (r < (1LL << man)) return sign | (unsigned short)r;  // subnormal
  return sign | (unsigned short)(((e + bias) << man) | (r - (1LL << man)));
}
static inline double munet_widen16(unsigned short h, int man, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const int e = (h >> man) & ((1 << ebits) - 1);
  const int m = h & ((1 << man) - 1);
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << ebits) - 1) return m ? NAN : s * INFINITY;
  if (e == 0) return s * ldexp((double)m, 1 - bias - man);
  return s * ldexp((double)(m | (1 << man)), e - bias - man);
}
struct __half { unsigned short x; };
struct __nv_bfloat16 { unsigned short x; };
static inline float __half2float(__half h) { return (float)munet_widen16(h.x, 10, 5); }
static inline __half __float2half_rn(float f) { return __half{munet_round16((double)f, 10, 5)}; }
static inline __half __double2half(double f) { return __half{munet_round16(f, 10, 5)}; }
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)munet_widen16(h.x, 7, 8); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{munet_round16((double)f, 7, 8)}; }
static inline __nv_bfloat16 __double2bfloat16(double f) { return __nv_bfloat16{munet_round16(f, 7, 8)}; }
"""

_CTYPES = {
    "long long": ctypes.c_longlong,
    "unsigned": ctypes.c_uint,
    "unsigned long long": ctypes.c_ulonglong,
    "int": ctypes.c_int,
    "short": ctypes.c_short,
    "signed char": ctypes.c_byte,
    "unsigned char": ctypes.c_ubyte,
    "bool": ctypes.c_bool,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
}


class EmulationUnavailableError(RuntimeError):
    """No working C++ compiler: the emulation checks skip with this reason."""


@functools.cache
def find_cxx(cxx_env: str | None = None) -> tuple:
    """``(path, identity)`` of the C++ compiler (``$CXX``, else ``c++``, ``g++``, ``clang++``)."""
    for name in [cxx_env] if cxx_env else ["c++", "g++", "clang++"]:
        exe = shutil.which(name)
        if exe is None:
            continue
        try:
            version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        return exe, f"{exe}\n{version}"
    raise EmulationUnavailableError("cuda emulation: no C++ compiler found ($CXX, c++, g++ or clang++)")


def _launcher(src) -> str:
    if HEADER not in src.source:
        raise ValueError(f"cuda emulation: {src.name} does not start with the renderers' header")
    args = ", ".join(f"*({t}{'' if t.endswith('*') else ' '}*)args[{k}]" for k, (t, _) in enumerate(src.params))
    if src.shared_memory:
        return f"""
extern "C" void emulate_{src.name}(unsigned grid, unsigned block, void **args) {{
  gridDim = dim3{{grid, 1, 1}};
  blockDim = dim3{{block, 1, 1}};
  for (unsigned b = 0; b < grid; b++) {{
    std::barrier<> bar(block);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; t++) {{
      threads.emplace_back([&bar, args, b, t] {{
        blockIdx = dim3{{b, 0, 0}};
        threadIdx = dim3{{t, 0, 0}};
        munet_block_barrier = &bar;
        {src.name}({args});
        bar.arrive_and_drop();  // an exited thread no longer holds the block's barriers back
      }});
    }}
    for (auto &thread : threads) thread.join();
  }}
}}
"""
    return f"""
extern "C" void emulate_{src.name}(unsigned grid, unsigned block, void **args) {{
  gridDim = dim3{{grid, 1, 1}};
  blockDim = dim3{{block, 1, 1}};
  for (unsigned b = 0; b < grid; b++) {{
    for (unsigned t = 0; t < block; t++) {{
      blockIdx = dim3{{b, 0, 0}};
      threadIdx = dim3{{t, 0, 0}};
      {src.name}({args});
    }}
  }}
}}
"""


def emulation_source(sources) -> str:
    """The C++ translation unit running CudaSources ``sources`` on the CPU (see the module docstring):
    each kernel with a launcher ``emulate_<name>(grid, block, args)``."""
    sources = list({s.name: s for s in sources}.values())
    launchers = [_launcher(s) for s in sources]
    body = "\n".join(s.source.replace(HEADER, "", 1) for s in sources)
    return COMPAT_HEADER + body + "".join(launchers)


class Emulator:
    """Kernels compiled together for the CPU; :meth:`run` launches one of them."""

    def __init__(self, sources):
        self.sources = {s.name: s for s in sources}
        self.lib = _library(emulation_source(self.sources.values()))

    def run(self, src, n: int, arguments: list) -> None:
        """Run CudaSource ``src`` for ``n`` work items (its grid rule) with ``arguments``, one per
        parameter: a NumPy array for a pointer (its data address is passed), a number otherwise."""
        self.launch(src, src.grid(n), src.block, arguments)

    def launch(self, src, grid: int, block: int, arguments: list) -> None:
        """Run ``src`` as ``grid`` blocks of ``block`` threads (1-D), arguments as for :meth:`run`."""
        if src.name not in self.sources:
            raise KeyError(f"cuda emulation: {src.name} was not compiled into this emulator")
        if len(arguments) != len(src.params):
            raise ValueError(f"{src.name}: expected {len(src.params)} arguments, got {len(arguments)}")
        holders = []
        for (ctype, _), value in zip(src.params, arguments):
            if ctype.endswith("*"):
                holders.append(ctypes.c_void_p(value.ctypes.data if isinstance(value, np.ndarray) else int(value)))
            else:
                holders.append(_CTYPES[ctype](value))
        pointers = (ctypes.c_void_p * len(holders))(*(ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders))
        launch = getattr(self.lib, f"emulate_{src.name}")
        launch.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        launch.restype = None
        launch(grid, block, pointers)


_loaded: dict = {}


def _library(text: str):
    exe, identity = find_cxx(os.environ.get("CXX"))
    path = cache.cache_dir() / f"{cache.cache_key(text, identity, FLAGS)}.emu.so"
    lib = _loaded.get(path)
    if lib is not None:
        return lib
    if not cache.entry_valid(path):
        with tempfile.TemporaryDirectory() as tmp:
            source, out = Path(tmp) / "kernel.cpp", Path(tmp) / "kernel.so"
            source.write_text(text)
            result = subprocess.run([exe, *FLAGS, str(source), "-o", str(out)], capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(f"cuda emulation: {exe} failed:\n{result.stderr[:20000]}")
            cache.write_entry(path, out.read_bytes())
    lib = _loaded[path] = ctypes.CDLL(str(path))
    return lib


def emulate(src, n: int, arguments: list) -> None:
    """Compile ``src`` alone and run it (see :meth:`Emulator.run`)."""
    Emulator([src]).run(src, n, arguments)
