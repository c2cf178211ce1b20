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

A graph freezes a kernel's by-value arguments, so every kernel also takes ``philox``, a device
pointer: null in eager launches; in a captured plan (``kernels_draws.PhiloxSlots``) the address of
a slot of six uint64 words (``philox_slot_words``: the key, then the counter) that the replay writes
from the generator before each launch of the graph, and the kernel reads its key and counter there
(``k0..c3`` are then ignored), as PyTorch's graph-safe Philox state is read from device memory.

Every op advances the generator by the CPU kernel's number of blocks (``ceil(words / 4)`` for the
words the CPU draws), so the draw after it is the CPU's too. Transforms, as on the CPU:

- ``uniform``: the top significand-many bits of each word (24 for float32 and the 16-bit floats'
  float32 computation, 53 for float64, 11/8 for float16/bfloat16) times ``2**-bits``, then
  ``u * (high - low) + low`` in the compute dtype, rounded to the dtype. Bit-identical.
- ``randint``: ``word % span + low`` in wrapping 64-bit arithmetic. Bit-identical.
- ``bernoulli``: 1 where the 53-bit uniform ``(word >> 11) * 2**-53`` is below ``p`` (compared in
  double: exact for every float dtype), else 0. Bit-identical.
- ``randperm``: a stable sort of the words (as int64 with the top bit flipped, ``render_sort_keys``,
  through ``kernels_sort.py``'s stable sort: ties keep index order). Bit-identical.
- ``multinomial`` with replacement: per row the CPU's cdf in double (NumPy's pairwise row sum, the
  same additions in the same order, then ``p / total`` and their running sum, the last set to 1.0)
  and its ``searchsorted`` of ``u + row`` in ``cdf + row``, searched within the row (the CPU's search
  spans the stacked rows; they differ only where a non-monotone rounding at a row's end meets a
  uniform that rounds to it, probability below ``rows * 2**-53``). Bit-identical otherwise.
- ``normal``/``normal_tensor`` (Box-Muller in double), ``exponential`` (``-log1p(-u) / lambd`` in
  double) and ``multinomial`` without replacement (exponential races: the ``num_samples``
  smallest ``-log1p(-u) / p`` of each row in order, ties by index, through ``kernels_sort.py``'s ``topk``):
  the same formulas in double, but CUDA's ``log``/``log1p``/``cos``/``sin`` differ from the CPU's
  (NumPy's) by an ulp or two (``sqrt`` and the arithmetic are correctly rounded on both, ``--fmad=false``), so
  float64 values agree to a few ulps; a float32 or 16-bit value is the CPU's or its neighbour (it
  differs only when the double straddles a rounding boundary of the dtype); multinomial's races
  pick the CPU's categories unless two keys of a row are within those ulps. (NumPy's vectorized
  ``log1p``/``log`` are not glibc's either, so under the CPU emulation they agree to that too.)

Argument checks. The CPU's checks of numbers (a ``normal_tensor`` number ``std`` that is negative
or NaN) raise at the op. Its checks of tensor data are made on the device and record a fault in the
device's fault record (``device_asserts.py``), raised with the CPU's error class and message at the
next synchronization (``CUDA_LAUNCH_BLOCKING=1``: at the op): ``bernoulli``'s ``p`` outside [0, 1]
or NaN, ``normal_tensor``'s ``std`` element that is negative or NaN, and ``multinomial``'s rows (an
element not finite or negative, a sum not above 0, without replacement fewer nonzero categories
than ``num_samples``; which row's fault is reported when several fail is the first to claim the
record, where the CPU reports the first kind of failure). Unlike the CPU, which raises before
drawing, the cuda generator has advanced when such a check fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, UnrenderableError, compute_dtype, ctype, load, store
from munet.backends.cuda.source import CudaSource, kernel_head, offsets

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

    def arguments(self, key: int, counter: int, n: int, out, philox: int = 0, **scalars) -> list:
        """``[(C type, value), ...]``: ``key``/``counter`` as the generator gives them (Python ints), or
        ``philox``, the device pointer of a slot holding them (:func:`philox_slot_words`; then
        ``key``/``counter`` are ignored), for a kernel in a CUDA graph."""
        missing = set(self.scalars) - set(scalars)
        if missing:
            raise ValueError(f"{self.name}: missing {sorted(missing)}")
        values = [*philox_slot_words(key, counter), philox, int(n), out, *(scalars[s] for s in self.scalars)]
        return [(t, v) for (t, _), v in zip(self.params, values, strict=True)]

    def blocks(self, n: int) -> int:
        """Counter blocks (threads) for ``n`` values."""
        return -(-int(n) // 4)


def philox_slot_words(key: int, counter: int) -> list[int]:
    """The six uint64 words of a ``(key, counter)``: the key's two, then the 256-bit counter's four,
    low word first (the by-value arguments ``k0, k1, c0..c3``, and a ``philox`` slot's layout)."""
    return [(key >> (64 * i)) & (2**64 - 1) for i in range(2)] + [(counter >> (64 * i)) & (2**64 - 1) for i in range(4)]


PHILOX_SLOT_WORDS = 6
_HEAD = [("unsigned long long", f"k{i}") for i in range(2)] + [("unsigned long long", f"c{i}") for i in range(4)]
_HEAD += [("const unsigned long long *", "philox")]
# the counter base of the draw: by value, or (in a CUDA graph, whose launch arguments are frozen) read
# from the slot the replay writes before each launch
_BASE = (
    "  unsigned long long base[4] = {c0, c1, c2, c3};\n"
    "  if (philox != nullptr) {\n"
    "    k0 = philox[0]; k1 = philox[1];\n"
    "    for (int i = 0; i < 4; i++) base[i] = philox[2 + i];\n"
    "  }"
)


def _unit(name: str, out_type: str, transform, scalars: tuple = (), lines: tuple = ()) -> RandomSource:
    """One thread per counter block; element ``e = 4 b + j`` gets ``transform`` of its ``word``
    (after ``lines``, statements that may use ``e``, ``word`` and the parameters)."""
    params = (*_HEAD, ("long long", "n"), (f"{out_type} *", "out"), *scalars)
    body = [
        f'extern "C" __global__ void {name}({_signature(params)}) {{',
        _BASE,
        "  for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; 4 * b < n;"
        " b += (long long)blockDim.x * gridDim.x) {",
        "    unsigned long long c[4], w[4];",
        "    munet_counter(base, (unsigned long long)b, c);",
        "    munet_philox(k0, k1, c, w);",
        "    for (int j = 0; j < 4 && 4 * b + j < n; j++) {",
        "      const long long e = 4 * b + j;",
        "      const unsigned long long word = w[j];",
        *(f"      {line}" for line in lines),
        f"      out[e] = {transform};",
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


def _signature(params) -> str:
    return ", ".join(f"{t}{'' if t.endswith('*') else ' '}{p}" for t, p in params)


# word >> 11 times 2**-53: the CPU's float64 uniform in [0, 1) (uniform_open), exact in double
_U53 = "((double)(word >> 11) * (1.0 / 9007199254740992.0))"
_FAULT = (("unsigned long long *", "fault"), ("unsigned long long", "site"))


def _box_muller() -> list[str]:
    """Lines giving ``const double z``, standard normal element ``i`` of ``n`` (the CPU's
    ``standard_normal``: ``m = ceil(n / 2)`` pairs; word ``j`` gives the radius, word ``m + j`` the
    angle; element ``j`` is ``r cos``, element ``m + j`` is ``r sin``). The thread draws the two
    counter blocks its words sit in."""
    return [
        "    const long long m = (n + 1) / 2;",
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
    ]


def _per_element(name: str, params, lines) -> str:
    """A grid-stride kernel over elements ``i < n`` of a draw (``base`` holds the counter)."""
    body = [
        f'extern "C" __global__ void {name}({_signature(params)}) {{',
        _BASE,
        "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;"
        " i += (long long)blockDim.x * gridDim.x) {",
        *lines,
        "  }",
        "}",
    ]
    return "\n".join([HEADER, PRELUDE, PHILOX, *body]) + "\n"


def render_normal(dtype: str) -> RandomSource:
    """``normal(mean, std)`` of a float ``dtype``: the CPU's Box-Muller in double (``_box_muller``),
    then ``z * std + mean`` in double, rounded once to ``dtype`` (the CPU's NumPy arithmetic on
    float64 ``z``). One thread per element. CUDA's ``log``/``cos``/``sin`` are within an ulp or two of
    the C library's, so values match the CPU's to that, not bit for bit."""
    if dtype not in _BITS:
        raise UnrenderableError(f"normal: no cuda kernel for dtype {dtype}")
    params = (*_HEAD, ("long long", "n"), (f"{ctype(dtype)} *", "out"), ("double", "std"), ("double", "mean"))
    lines = [*_box_muller(), f"    out[i] = {store(dtype, '(z * std + mean)', 'float64')};"]
    source = _per_element(f"munet_normal_{dtype}", params, lines)
    return RandomSource(f"munet_normal_{dtype}", source, params, BLOCK, "elements", ("std", "mean"))


def render_normal_tensor(dtype: str, rank: int, mean_tensor: bool, std_tensor: bool) -> RandomSource:
    """``normal(mean, std)`` with tensor ``mean`` and/or ``std`` (the other a double by value), broadcast
    to an output of ``rank`` dims ``size0..``: each operand is read through its element strides
    (``ms0..``/``ss0..``, 0 along a broadcast dim; pass zeros for a number). As the CPU: ``z`` rounded
    to the compute dtype (float32, or double for float64), ``z * std + mean`` there, then stored. A
    tensor ``std`` with an element that is negative or NaN records a fault at ``site``."""
    if dtype not in _BITS:
        raise UnrenderableError(f"normal: no cuda kernel for dtype {dtype}")
    acc = "double" if dtype == "float64" else "float"
    operand = {True: f"const {ctype(dtype)} *", False: "double"}
    params = (*_HEAD, ("long long", "n"), (f"{ctype(dtype)} *", "out"))
    params += (*_FAULT, (operand[mean_tensor], "mean"), (operand[std_tensor], "std"))
    params += tuple(("long long", f"{f}{d}") for f in ("size", "ms", "ss") for d in range(rank))
    mean = f"({acc}){load(dtype, 'mean[at_ms]')}" if mean_tensor else f"({acc})mean"
    std = f"({acc}){load(dtype, 'std[at_ss]')}" if std_tensor else f"({acc})std"
    lines = [*offsets("i", "size", rank, ("ms", "ss")), *_box_muller(), f"    const {acc} s = {std};"]
    if std_tensor:
        lines.append("    if (!(s >= 0)) munet_fault(fault, site, 0ULL, (unsigned long long)i);")
    lines += [
        f"    const {acc} zs = ({acc})z;",
        f"    out[i] = {store(dtype, f'zs * s + {mean}', compute_dtype(dtype))};",
    ]
    name = f"munet_normal_tensor_{dtype}_r{rank}_{'t' if mean_tensor else 's'}{'t' if std_tensor else 's'}"
    scalars = tuple(p for _, p in params[len(_HEAD) + 2 :])
    return RandomSource(name, _per_element(name, params, lines), params, BLOCK, "elements", scalars)


def render_exponential(dtype: str) -> RandomSource:
    """``exponential(lambd)`` of a float ``dtype``: ``-log1p(-u) / lambd`` in double from the 53-bit
    uniform (the CPU's), rounded once to ``dtype``. CUDA's ``log1p`` vs the C library's: an ulp."""
    if dtype not in _BITS:
        raise UnrenderableError(f"exponential: no cuda kernel for dtype {dtype}")
    value = store(dtype, f"(-log1p(-{_U53}) / lambd)", "float64")  # parenthesized: one rounding
    return _unit(f"munet_exponential_{dtype}", ctype(dtype), value, (("double", "lambd"),))


def render_bernoulli(dtype: str) -> RandomSource:
    """``bernoulli(p)`` of a float ``dtype`` (``p`` C-contiguous, the output's dtype): 1 where the 53-bit
    uniform is below ``p`` (compared in double, exactly: the CPU's), else 0. A ``p`` outside [0, 1]
    or NaN records a fault at ``site``."""
    if dtype not in _BITS:
        raise UnrenderableError(f"bernoulli: no cuda kernel for dtype {dtype}")
    lines = (
        f"const double prob = (double){load(dtype, 'p[e]')};",
        "if (!(prob >= 0.0 && prob <= 1.0)) munet_fault(fault, site, 0ULL, (unsigned long long)e);",
    )
    value = store(dtype, f"({_U53} < prob ? 1.0 : 0.0)", "float64")
    scalars = ((f"const {ctype(dtype)} *", "p"), *_FAULT)
    return _unit(f"munet_bernoulli_{dtype}", ctype(dtype), value, scalars, lines)


def render_sort_keys() -> RandomSource:
    """``randperm``'s keys: each word as int64 with its top bit flipped, so that int64 order is the
    words' unsigned order (a stable sort of these is the CPU's ``argsort(words, kind="stable")``)."""
    return _unit("munet_randperm_keys", "long long", "(long long)(word ^ 0x8000000000000000ULL)")


def render_race_keys(dtype: str) -> RandomSource:
    """``multinomial``'s keys without replacement (exponential races, the CPU's): element ``e`` of the
    C-contiguous ``probs`` (rows x k, any float ``dtype``) gets ``-log1p(-u) / p`` in double (p = 0: inf)."""
    if dtype not in _BITS:
        raise UnrenderableError(f"multinomial: no cuda kernel for dtype {dtype}")
    value = f"-log1p(-{_U53}) / (double){load(dtype, 'probs[e]')}"
    return _unit(f"munet_race_keys_{dtype}", "double", value, ((f"const {ctype(dtype)} *", "probs"),))


_ROW_PARAMS = (
    ("long long", "rows"),
    ("long long", "k"),
    ("long long", "num_samples"),
    ("double *", "cdf"),
    ("unsigned long long *", "fault"),
    ("unsigned long long", "site_values"),
    ("unsigned long long", "site_sum"),
    ("unsigned long long", "site_count"),
)


def render_multinomial_rows(dtype: str) -> CudaSource:
    """One thread per row of the C-contiguous ``probs`` (``rows`` x ``k``, float ``dtype``): the CPU's
    checks (an element that is not finite or below 0 records a fault at ``site_values``, a row sum
    not above 0 at ``site_sum``, fewer than ``num_samples`` nonzero elements at ``site_count``; pass
    ``num_samples`` 0 with replacement) and, unless ``cdf`` is null, the row's cdf in double: NumPy's
    pairwise sum of the row (``munet_pairwise``, the same additions in the same order as
    ``rows.sum(axis=1)``), ``p / total`` and their running sum, the last one set to 1.0."""
    if dtype not in _BITS:
        raise UnrenderableError(f"multinomial: no cuda kernel for dtype {dtype}")
    value = load(dtype, "a[i]")
    t = ctype(dtype)
    name = f"munet_multinomial_rows_{dtype}"
    helpers = f"""// NumPy's pairwise_sum over n < 129 values: 8 accumulators, then the rest one by one
static __device__ double munet_pairwise_leaf_{dtype}(const {t} *a, long long n) {{
  double res = -0.0;
  if (n < 8) {{
    for (long long i = 0; i < n; i++) res += (double){value};
    return res;
  }}
  double r[8];
  for (int u = 0; u < 8; u++) r[u] = (double){load(dtype, "a[u]")};
  long long i = 8;
  for (; i < n - (n % 8); i += 8)
    for (int u = 0; u < 8; u++) r[u] += (double){load(dtype, "a[i + u]")};
  res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
  for (; i < n; i++) res += (double){value};
  return res;
}}
// NumPy's pairwise_sum: n <= 128 a leaf, else sum(a, h) + sum(a + h, n - h), h = n / 2 rounded down
// to a multiple of 8; the recursion as a loop over an explicit stack (its depth is below 64)
static __device__ double munet_pairwise_{dtype}(const {t} *a, long long n) {{
  long long off[64], len[64];
  double left[64];
  bool right[64];
  int top = 0;
  off[0] = 0; len[0] = n; right[0] = false;
  for (;;) {{
    if (len[top] > 128) {{
      const long long h = len[top] / 2 - (len[top] / 2) % 8;
      off[top + 1] = off[top]; len[top + 1] = h; right[top + 1] = false;
      top++;
      continue;
    }}
    double value = munet_pairwise_leaf_{dtype}(a + off[top], len[top]);
    for (;;) {{  // hand the finished frame's value to its parent
      if (top == 0) return value;
      top--;
      if (!right[top]) {{ left[top] = value; right[top] = true; break; }}
      value = left[top] + value;
    }}
    const long long h = len[top] / 2 - (len[top] / 2) % 8;
    off[top + 1] = off[top] + h; len[top + 1] = len[top] - h; right[top + 1] = false;
    top++;
  }}
}}
"""
    params = ((f"const {t} *", "probs"), *_ROW_PARAMS)
    lines = [
        *kernel_head(name, params, "rows"),
        f"    const {t} *a = probs + i * k;",
        "    long long nonzero = 0;",
        "    bool valid = true;",
        "    for (long long j = 0; j < k; j++) {",
        f"      const double v = (double){load(dtype, 'a[j]')};",
        "      valid = valid && v >= 0.0 && v <= 1.7976931348623157e308;",
        "      nonzero += v != 0.0;",
        "    }",
        "    if (!valid) { munet_fault(fault, site_values, 0ULL, (unsigned long long)i); continue; }",
        f"    const double total = munet_pairwise_{dtype}(a, k);",
        "    if (!(total > 0.0)) { munet_fault(fault, site_sum, 0ULL, (unsigned long long)i); continue; }",
        "    if (nonzero < num_samples) { munet_fault(fault, site_count, 0ULL, (unsigned long long)i); continue; }",
        "    if (cdf == nullptr) continue;",
        "    double running = 0.0;",
        "    for (long long j = 0; j < k; j++) {",
        f"      running += (double){load(dtype, 'a[j]')} / total;",
        "      cdf[i * k + j] = j == k - 1 ? 1.0 : running;",
        "    }",
        "  }",
        "}",
    ]
    return CudaSource(name, HEADER + PRELUDE + helpers + "\n".join(lines) + "\n", params)


def render_multinomial_draw() -> RandomSource:
    """``multinomial`` with replacement: sample ``e`` (row ``e / num_samples``) is the first category
    whose shifted cdf ``cdf + row`` exceeds ``u + row`` (the 53-bit uniform; the CPU's one
    ``searchsorted`` over the rows stacked, with the same float64 shifts), at most ``k - 1``."""
    lines = (
        "const long long row = e / num_samples;",
        "const double shift = (double)row, goal = " + _U53 + " + shift;",
        "const double *line = cdf + row * k;",
        "long long lo = 0, hi = k;",
        "while (lo < hi) {",
        "  const long long mid = lo + (hi - lo) / 2;",
        "  if (!(goal < line[mid] + shift)) lo = mid + 1; else hi = mid;",
        "}",
    )
    scalars = (("const double *", "cdf"), ("long long", "num_samples"), ("long long", "k"))
    return _unit("munet_multinomial_draw", "long long", "lo < k ? lo : k - 1", scalars, lines)
