"""The implicit-GEMM convolution kernel as CUDA C (1-3 spatial dims, stride, per-side padding,
dilation, groups, transposed); it takes the direct kernel's parameters (``kernels_conv_direct``) and
two for split K (below).

Per group ``g`` a convolution is the product ``out[m, j] = sum_k A[m, k] B[k, j]`` over rows ``m =
(n, p)`` (batch x output pixels, ``M = total / cout``), columns ``j`` (the group's ``og`` output
channels) and ``k = (c, kernel offset)`` (``K = cg * prod(ksize)``, the weight's own row-major
order): ``A[m, k] = x[n, g * cg + c, p * s - pad + k * d]`` (zero outside the input) and ``B[k, j] =
w[g * og + j, c, k]``. A transposed convolution is the same product with the gather turned round:
``A[m, k] = x[n, g * cg + c, (p + pad - k * d) / s]`` where that divides exactly and lies inside
(else zero), ``B[k, j] = w[g * cg + c, j, k]``. Neither matrix is formed: each block loads its
operand tiles straight from ``x`` and ``w`` through their strides.

One block of ``THREADS`` threads per ``BM x BN`` output tile (``layout="tiles"``: tiles along ``m``
fastest, then along ``j``, then groups). The K loop steps ``BK`` at a time: the block stages the
``BM x BK`` tile of ``A`` and the ``BK x BN`` tile of ``B`` in ``__shared__`` memory (as the
accumulator type: 16-bit floats are widened once, at the load), ``__syncthreads()``, and each thread
multiplies them into its ``TM x TN`` register block (rows ``tx + 16 r``, columns ``ty + 16 c``, so a
warp's loads and stores touch neighbouring ``m``, which are neighbouring pixels) with explicit
fused multiply-adds (``--fmad=false`` forbids only the compiler's own contractions). A thread loads
``A`` at its own rows and one ``k`` (``k0 + ty``) and ``B`` at its own columns and one ``k`` (``k0 +
tx``, neighbouring threads reading neighbouring weights), so each K step decodes two ``k`` in 32-bit
arithmetic and the rows' coordinates are decoded once. ``__launch_bounds__`` caps the registers
(ptxas gave 168 a thread unbounded: one block per SM, whose loads then stall the whole SM at every
``__syncthreads``) so that two blocks share an SM, one computing while the other loads. Tile remainders (``M``, ``og``, ``K`` not
multiples of the tile) load zeros and store nothing. float32/float64 accumulate in their own type,
float16/bfloat16 in float32, each output rounded once.

Split K: an output of few tiles with a long reduction (a weight gradient: ``cg * prod(ksize)`` rows,
``og`` columns, ``K = batch x pixels``) would leave most of the GPU idle, so ``splits_for`` splits the
K loop ``splits`` ways (the extra parameters ``part`` and ``splits``; ``splits == 1``: the plain
kernel, ``part`` unused). Block ``b`` then computes tile ``b % tiles`` over the ``b / tiles``-th run
of whole K steps and stores its unrounded sums in the accumulator-typed ``part[split][out]``;
``render_split_sum``'s kernel adds the partials in split order and rounds once (deterministic: no
atomics).

The caller guarantees ``K < 2**31`` and fewer than ``2**31`` tiles (``kernels_conv.choose_kernel``).
"""

from __future__ import annotations

import functools

from munet._device import DeviceError
from munet.backends.cuda.kernels_conv_direct import DTYPES, conv_params
from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, ctype, load, store
from munet.backends.cuda.source import CudaSource, kernel_head

BM, BN, BK = 64, 64, 16  # output tile (pixels x channels) and K step
TM, TN = 4, 4  # each thread's register block
THREADS = (BM // TM) * (BN // TN)
BLOCKS_PER_SM = 2  # __launch_bounds__: registers capped so that two blocks share an SM


FILL_BLOCKS = 256  # split K until about this many blocks run (two per SM of a 132-SM H100/H200)
MIN_SPLIT_STEPS = 8  # K steps per split at least, so the partials' traffic stays small beside the work


def tiles(m: int, og: int, groups: int, splits: int = 1) -> int:
    """Blocks the kernel launches for ``m`` rows and ``og`` columns per group, K split ``splits`` ways."""
    return -(-m // BM) * -(-og // BN) * groups * splits


def splits_for(m: int, og: int, groups: int, kdim: int) -> int:
    """How many ways to split the K loop: 1 unless the output has too few tiles to fill the GPU and
    the reduction is long (a weight gradient: few rows and columns, K = batch x pixels)."""
    blocks = tiles(m, og, groups)
    if blocks >= FILL_BLOCKS:
        return 1
    return max(1, min(-(-FILL_BLOCKS // blocks), -(-kdim // BK) // MIN_SPLIT_STEPS))


@functools.lru_cache(maxsize=8)
def render_split_sum(dtype: str) -> CudaSource:
    """The kernel adding a split launch's ``splits`` partial outputs (accumulator type, split-major)
    in split order and rounding each sum once to ``dtype``: ``total`` work items."""
    if dtype not in DTYPES:
        raise DeviceError(f"convolution: no cuda kernel for {dtype}")
    acc = "double" if dtype == "float64" else "float"
    params = ((f"const {acc} *", "part"), (f"{ctype(dtype)} *", "out"), ("long long", "total"), ("long long", "splits"))
    name = f"munet_conv_gemm_split_sum_{dtype}"
    lines = [
        *kernel_head(name, params, "total"),
        f"    {acc} sum = 0;",
        "    for (long long q = 0; q < splits; q++) sum += part[q * total + i];",
        f"    out[i] = {store(dtype, 'sum', 'float64' if acc == 'double' else 'float32')};",
        "  }",
        "}",
    ]
    return CudaSource(name, "\n".join([HEADER, PRELUDE, *lines]) + "\n", params, 256, "elements")


def _decode_k(name: str, k: str, nd: int) -> list[str]:
    """Lines declaring ``<name>_c`` (the channel) and ``<name>_k0..`` (kernel offsets) of reduction index ``k``."""
    lines = [f"    unsigned {name}_r = (unsigned)({k});", f"    const long long {name}_c = {name}_r / kwin;"]
    lines.append(f"    {name}_r %= kwin;")
    for d in reversed(range(1, nd)):
        lines.append(f"    const long long {name}_k{d} = {name}_r % kz{d}; {name}_r /= kz{d};")
    lines.append(f"    const long long {name}_k0 = {name}_r;")
    return lines


def _row_setup(nd: int, transposed: bool) -> list[str]:
    """Per thread row ``r``: whether it exists, where its input and output start, and per dim the
    coordinate its gather is relative to (``p * s - pad``, or ``p + pad`` when transposed)."""
    lines = [
        f"  long long xrow[{TM}], orow[{TM}], " + ", ".join(f"at{d}[{TM}]" for d in range(nd)) + f"; bool live[{TM}];",
        "#pragma unroll",
        f"  for (int r = 0; r < {TM}; r++) {{",
        f"    const long long m = m0 + tx + {BM // TM} * r;",
        "    live[r] = m < rows;",
        "    long long rem = live[r] ? m : 0;",
    ]
    for d in reversed(range(nd)):
        lines.append(f"    const long long p{d} = rem % out{d}; rem /= out{d};")
        lines.append(f"    at{d}[r] = {f'p{d} + pad{d}' if transposed else f'p{d} * s{d} - pad{d}'};")
    lines += [
        "    xrow[r] = rem * xs_n + g * cg * xs_c;",
        "    orow[r] = rem * cout * pixels + (live[r] ? m : 0) % pixels;",
        "  }",
    ]
    return lines


def _load_a(nd: int, transposed: bool, acc: str, dtype: str) -> list[str]:
    lines = ["  {  // A: As[ty][row r] = x at (row r, k0 + ty)", *_decode_k("a", "k0 + ty", nd)]
    lines.append("    const bool kin = k0 + ty < kend;")
    lines += ["#pragma unroll", f"    for (int r = 0; r < {TM}; r++) {{", "      bool ok = kin && live[r];"]
    offset = ["xrow[r]", "a_c * xs_c"]
    for d in range(nd):
        if transposed:
            lines.append(f"      const long long t{d} = at{d}[r] - a_k{d} * dil{d};")
            lines.append(f"      const long long q{d} = s{d} == 1 ? t{d} : t{d} / s{d};")
            lines.append(f"      ok = ok && t{d} >= 0 && (s{d} == 1 || t{d} % s{d} == 0) && q{d} < in{d};")
        else:
            lines.append(f"      const long long q{d} = at{d}[r] + a_k{d} * dil{d};")
            lines.append(f"      ok = ok && q{d} >= 0 && q{d} < in{d};")
        offset.append(f"q{d} * xs{d}")
    value = load(dtype, f"x[{' + '.join(offset)}]")
    lines += [f"      As[ty][tx + {BM // TM} * r] = ok ? ({acc}){value} : ({acc})0;", "    }", "  }"]
    return lines


def _load_b(nd: int, transposed: bool, acc: str, dtype: str) -> list[str]:
    lines = ["  {  // B: Bs[tx][column c] = w at (k0 + tx, column c)", *_decode_k("b", "k0 + tx", nd)]
    base = "(g * cg + b_c) * ws_0" if transposed else "b_c * ws_1"
    column = "j * ws_1" if transposed else "(g * og + j) * ws_0"
    offset = " + ".join([base, *(f"b_k{d} * ws{d}" for d in range(nd))])
    lines += [
        "    const bool kin = k0 + tx < kend;",
        f"    const long long woff = kin ? {offset} : 0;",
        "#pragma unroll",
        f"    for (int c = 0; c < {TN}; c++) {{",
        f"      const long long j = j0 + ty + {BN // TN} * c;",
        f"      Bs[tx][ty + {BN // TN} * c] = kin && j < og ? ({acc}){load(dtype, f'w[woff + {column}]')} : ({acc})0;",
        "    }",
        "  }",
    ]
    return lines


@functools.lru_cache(maxsize=32)
def render_conv_gemm(dtype: str, nd: int, transposed: bool) -> CudaSource:
    """The implicit-GEMM convolution kernel of ``dtype`` over ``nd`` spatial dims (module docstring);
    launch it with ``tiles(...)`` work items."""
    if dtype not in DTYPES or not 1 <= nd <= 3:
        raise DeviceError(f"convolution: no cuda kernel for {dtype} with {nd} spatial dims")
    name = f"munet_conv{nd}d{'_transposed' if transposed else ''}_gemm_{dtype}"
    acc = "double" if dtype == "float64" else "float"
    params = (*conv_params(dtype, nd), (f"{acc} *", "part"), ("long long", "splits"))
    fma = "fma" if acc == "double" else "fmaf"
    signature = ", ".join(f"{t}{'' if t.endswith('*') else ' '}{p}" for t, p in params)
    window = " * ".join(f"ksize{d}" for d in range(nd))
    lines = [
        f'extern "C" __global__ void __launch_bounds__({THREADS}, {BLOCKS_PER_SM}) {name}({signature}) {{',
        f"  __shared__ {acc} As[{BK}][{BM}];",
        f"  __shared__ {acc} Bs[{BK}][{BN + 1}];  // padded: the B stores of a warp hit distinct banks",
        "  const long long pixels = " + " * ".join(f"out{d}" for d in range(nd)) + ";",
        "  const long long rows = total / cout;  // batch x output pixels",
        f"  const long long kdim = cg * {window};",
        f"  const unsigned kwin = (unsigned)({window});",
        *(f"  const unsigned kz{d} = (unsigned)ksize{d};" for d in range(1, nd)),
        f"  const long long tiles_m = (rows + {BM - 1}) / {BM}, tiles_n = (og + {BN - 1}) / {BN};",
        "  const long long per_split = tiles_m * tiles_n * (cout / og);",
        "  const long long tile = blockIdx.x % per_split, split = blockIdx.x / per_split;",
        f"  const long long chunk = ((kdim + {BK - 1}) / {BK} + splits - 1) / splits * {BK};",
        "  const long long kbegin = split * chunk, kend = kbegin + chunk < kdim ? kbegin + chunk : kdim;",
        f"  const long long m0 = tile % tiles_m * {BM}, j0 = tile / tiles_m % tiles_n * {BN};",
        "  const long long g = tile / tiles_m / tiles_n;",
        f"  const int tx = threadIdx.x % {BM // TM}, ty = threadIdx.x / {BM // TM};",
        *_row_setup(nd, transposed),
        f"  {acc} sum[{TM}][{TN}];",
        "#pragma unroll",
        f"  for (int r = 0; r < {TM}; r++)",
        "#pragma unroll",
        f"    for (int c = 0; c < {TN}; c++) sum[r][c] = 0;",
        f"  for (long long k0 = kbegin; k0 < kend; k0 += {BK}) {{",
        *("  " + line for line in _load_a(nd, transposed, acc, dtype)),
        *("  " + line for line in _load_b(nd, transposed, acc, dtype)),
        "    __syncthreads();",
        "#pragma unroll",
        f"    for (int kc = 0; kc < {BK}; kc++) {{",
        f"      {acc} a[{TM}], b[{TN}];",
        "#pragma unroll",
        f"      for (int r = 0; r < {TM}; r++) a[r] = As[kc][tx + {BM // TM} * r];",
        "#pragma unroll",
        f"      for (int c = 0; c < {TN}; c++) b[c] = Bs[kc][ty + {BN // TN} * c];",
        "#pragma unroll",
        f"      for (int r = 0; r < {TM}; r++)",
        "#pragma unroll",
        f"        for (int c = 0; c < {TN}; c++) sum[r][c] = {fma}(a[r], b[c], sum[r][c]);",
        "    }",
        "    __syncthreads();",
        "  }",
        "#pragma unroll",
        f"  for (int r = 0; r < {TM}; r++) {{",
        "    if (!live[r]) continue;",
        "#pragma unroll",
        f"    for (int c = 0; c < {TN}; c++) {{",
        f"      const long long j = j0 + ty + {BN // TN} * c;",
        "      if (j >= og) continue;",
        "      const long long at = orow[r] + (g * og + j) * pixels;",
        f"      if (splits == 1) out[at] = {store(dtype, 'sum[r][c]', 'float64' if acc == 'double' else 'float32')};",
        "      else part[split * total + at] = sum[r][c];",
        "    }",
        "  }",
        "}",
    ]
    return CudaSource(name, "\n".join([HEADER, PRELUDE, *lines]) + "\n", params, THREADS, "tiles")
