"""Eager cuda random kernels as CUDA C: Philox4x64-10 words reproducing the CPU streams.

The CPU backend (``munet/backends/cpu/kernels_random.py``) defines a random op's numbers as
NumPy's ``Philox`` words and fixed transforms; these kernels compute the same bits on the
device. The generator hands out ``(key, counter)`` for ``ceil(n / 4)`` blocks
(``generator.philox_advance``); block ``i`` is Philox4x64-10 of the 256-bit counter
``counter + 1 + i`` (NumPy increments before generating) and gives words ``4 i .. 4 i + 3``.
Launching is the device side's::

    src = render_uniform("float32")               # or render_philox_words(), render_randint("int64")
    args = src.arguments(key, counter, n, out_ptr, scale=high - low, low=low)
    # grid src.grid(src.blocks(n)) blocks of src.block threads: one thread per counter block

Transforms, as on the CPU: ``uniform`` takes the top significand-many bits of each word
(24 for float32 and the 16-bit floats' float32 computation, 53 for float64, 11/8 for
float16/bfloat16) times ``2**-bits``, then ``u * (high - low) + low`` in the compute dtype, rounded
to the dtype; ``randint`` is ``word % span + low`` in wrapping 64-bit arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, UnrenderableError, ctype, store
from munet.backends.cuda.source import CudaSource

BLOCK = 256
_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}  # as kernels_random.py on the CPU

PHILOX = r"""#ifndef MUNET_PHILOX
#define MUNET_PHILOX
// Philox4x64-10 (Random123's constants, NumPy's Philox): the four words of counter block c
static __device__ __forceinline__ void munet_philox(unsigned long long k0, unsigned long long k1,
                                                    unsigned long long c[4], unsigned long long w[4]) {
  unsigned long long x0 = c[0], x1 = c[1], x2 = c[2], x3 = c[3];
  for (int round = 0; round < 10; round++) {
    const unsigned long long lo0 = 0xD2E7470EE14C6C93ULL * x0, hi0 = __umul64hi(0xD2E7470EE14C6C93ULL, x0);
    const unsigned long long lo1 = 0xCA5A826395121157ULL * x2, hi1 = __umul64hi(0xCA5A826395121157ULL, x2);
    x0 = hi1 ^ x1 ^ k0; x1 = lo1; x2 = hi0 ^ x3 ^ k1; x3 = lo0;
    k0 += 0x9E3779B97F4A7C15ULL; k1 += 0xBB67AE8584CAA73BULL;
  }
  w[0] = x0; w[1] = x1; w[2] = x2; w[3] = x3;
}
// counter + 1 + b as a 256-bit little-endian integer
static __device__ __forceinline__ void munet_counter(const unsigned long long base[4], unsigned long long b,
                                                     unsigned long long c[4]) {
  unsigned long long add = b + 1, carry = 0;
  for (int i = 0; i < 4; i++) {
    const unsigned long long sum = base[i] + add + carry;
    carry = sum < base[i] ? 1 : 0;  // add is at most 2^63 (word 0) or 0, so one wrap at most
    c[i] = sum;
    add = 0;
  }
}
#endif
"""


@dataclass(frozen=True)
class RandomSource(CudaSource):
    scalars: tuple = ()  # names of the by-value transform parameters after the output

    def arguments(self, key: int, counter: int, n: int, out, **scalars) -> list:
        """``[(C type, value), ...]``: ``key``/``counter`` as the generator gives them (Python ints)."""
        words = [(key >> (64 * i)) & (2**64 - 1) for i in range(2)]
        words += [(counter >> (64 * i)) & (2**64 - 1) for i in range(4)]
        missing = set(self.scalars) - set(scalars)
        if missing:
            raise ValueError(f"{self.name}: missing {sorted(missing)}")
        values = [*words, int(n), out, *(scalars[s] for s in self.scalars)]
        return [(t, v) for (t, _), v in zip(self.params, values, strict=True)]

    def blocks(self, n: int) -> int:
        """Counter blocks (threads) for ``n`` values."""
        return -(-int(n) // 4)


_HEAD = [("unsigned long long", f"k{i}") for i in range(2)] + [("unsigned long long", f"c{i}") for i in range(4)]


def _unit(name: str, out_type: str, transform, scalars: tuple = ()) -> RandomSource:
    params = (*_HEAD, ("long long", "n"), (f"{out_type} *", "out"), *scalars)
    signature = ", ".join(f"{t}{'' if t.endswith('*') else ' '}{p}" for t, p in params)
    body = [
        f'extern "C" __global__ void {name}({signature}) {{',
        "  const unsigned long long base[4] = {c0, c1, c2, c3};",
        "  for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; 4 * b < n;"
        " b += (long long)blockDim.x * gridDim.x) {",
        "    unsigned long long c[4], w[4];",
        "    munet_counter(base, (unsigned long long)b, c);",
        "    munet_philox(k0, k1, c, w);",
        "    for (int j = 0; j < 4 && 4 * b + j < n; j++) {",
        "      const unsigned long long word = w[j];",
        f"      out[4 * b + j] = {transform};",
        "    }",
        "  }",
        "}",
    ]
    source = "\n".join([HEADER, PRELUDE, PHILOX, *body]) + "\n"
    return RandomSource(name, source, params, BLOCK, "elements", tuple(p for _, p in scalars))


def render_philox_words() -> RandomSource:
    """The raw stream: ``n`` uint64 words (``random_words`` on the CPU)."""
    return _unit("munet_philox_words", "unsigned long long", "word")


def render_uniform(dtype: str) -> RandomSource:
    """``uniform(low, high)`` of ``dtype``: pass ``scale=high - low`` (computed on the host in double,
    as the CPU's Python arithmetic does) and ``low``; both are rounded to the compute dtype."""
    if dtype not in _BITS:
        raise UnrenderableError(f"uniform: no cuda kernel for dtype {dtype}")
    bits = _BITS[dtype]
    acc = "double" if bits == 53 else "float"
    value = f"(({acc})(word >> {64 - bits}) * ({acc}){1.0 / (1 << bits)!r}) * scale + low"
    out = store(dtype, value, "float64" if acc == "double" else "float32")
    return _unit(f"munet_uniform_{dtype}", ctype(dtype), out, ((acc, "scale"), (acc, "low")))


def render_randint(dtype: str) -> RandomSource:
    """``randint(low, high)`` of an integer ``dtype``: ``word % span + low`` (``span`` < 2**64 and
    ``low`` as wrapping uint64 words: ``span`` and ``low % 2**64``)."""
    if dtype not in ("int8", "uint8", "int16", "int32", "int64"):
        raise UnrenderableError(f"randint: no cuda kernel for dtype {dtype}")
    value = f"({ctype(dtype)})(long long)(word % span + low)"
    return _unit(
        f"munet_randint_{dtype}", ctype(dtype), value, (("unsigned long long", "span"), ("unsigned long long", "low"))
    )


def render_normal(dtype: str) -> RandomSource:
    """``normal(mean, std)`` of a float ``dtype``: the CPU's Box-Muller in double (``m = ceil(n / 2)``
        pairs: word ``j`` gives the radius, word ``m + j`` the angle; element ``j`` is ``r cos``, element
        ``m + j`` is ``r sin``), then ``z * std + mean`` in double, rounded once to ``dtype`` (the CPU's
    NumPy arithmetic on float64 ``z``). One thread per element (it
        draws the two counter blocks its words sit in). CUDA's ``log``/``cos``/``sin`` are within an
        ulp or two of the C library's, so values match the CPU's to that, not bit for bit."""
    if dtype not in _BITS:
        raise UnrenderableError(f"normal: no cuda kernel for dtype {dtype}")
    params = (*_HEAD, ("long long", "n"), (f"{ctype(dtype)} *", "out"), ("double", "std"), ("double", "mean"))
    signature = ", ".join(f"{t}{'' if t.endswith('*') else ' '}{p}" for t, p in params)
    body = [
        f'extern "C" __global__ void munet_normal_{dtype}({signature}) {{',
        "  const unsigned long long base[4] = {c0, c1, c2, c3};",
        "  const long long m = (n + 1) / 2;",
        "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;"
        " i += (long long)blockDim.x * gridDim.x) {",
        "    const long long j = i < m ? i : i - m;",
        "    unsigned long long c[4], w[4];",
        "    munet_counter(base, (unsigned long long)(j / 4), c);",
        "    munet_philox(k0, k1, c, w);",
        "    const double u1 = ((double)(w[j % 4] >> 11) + 1.0) * (1.0 / 9007199254740992.0);  // (0, 1]",
        "    munet_counter(base, (unsigned long long)((m + j) / 4), c);",
        "    munet_philox(k0, k1, c, w);",
        "    const double u2 = (double)(w[(m + j) % 4] >> 11) * (1.0 / 9007199254740992.0);",
        "    const double radius = sqrt(-2.0 * log(u1)), angle = 2.0 * 3.141592653589793 * u2;",
        "    const double z = i < m ? radius * cos(angle) : radius * sin(angle);",
        f"    out[i] = {store(dtype, 'z * std + mean', 'float64')};",
        "  }",
        "}",
    ]
    source = "\n".join([HEADER, PRELUDE, PHILOX, *body]) + "\n"
    return RandomSource(f"munet_normal_{dtype}", source, params, BLOCK, "elements", ("std", "mean"))
