"""The direct convolution kernel as CUDA C (1-3 spatial dims, stride, per-side padding, dilation,
groups, transposed), and the parameter list both cuda convolution kernels take.

One thread per output element (a grid-stride loop over the C-contiguous ``(N, C_out, *spatial)``
output) sums its receptive field: ``out[n, o, p] = sum over c in o's group and kernel offsets k of
w[o, c, k] * x[n, g * Cg + c, p * s - pad + k * d]`` (zero outside the input); a transposed
convolution gathers too: output pixel ``q`` takes input pixel ``(q + pad - k * d) / s`` where that
divides exactly and lies inside, with ``w`` laid out ``(C_in, C_out / groups, *k)``. Operands are
read through their strides (no copies), geometry is passed by value (so a captured CUDA graph
needs no host upload), float16/bfloat16 accumulate in float32 and float64 in double.

It reuses nothing through shared memory, so it runs far below the implicit GEMM
(``kernels_conv_gemm.py``) wherever that kernel's tiles are well filled; ``kernels_conv.py`` says
which of the two runs.
"""

from __future__ import annotations

import functools

from munet._device import DeviceError
from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, ctype, load, store
from munet.backends.cuda.source import CudaSource, kernel_head

BLOCK = 128
DTYPES = ("float32", "float64", "float16", "bfloat16")
_PER_DIM = ("in", "out", "ksize", "s", "pad", "dil", "xs", "ws")


def conv_params(dtype: str, nd: int) -> tuple:
    """The parameters of both convolution kernels over ``nd`` spatial dims: the operands ``x``, ``w``
    and the C-contiguous ``out``; ``total`` output elements, ``cout`` output channels, ``cg``/``og``
    input/output channels per group; the element strides of ``x``'s batch and channel dims and of
    ``w``'s first two dims; then per spatial dim: input, output and kernel sizes, stride, leading
    padding, dilation, and ``x``'s and ``w``'s strides."""
    t = ctype(dtype)
    params = [(f"const {t} *", "x"), (f"const {t} *", "w"), (f"{t} *", "out"), ("long long", "total")]
    params += [("long long", name) for name in ("cout", "cg", "og", "xs_n", "xs_c", "ws_0", "ws_1")]
    params += [("long long", f"{name}{d}") for name in _PER_DIM for d in range(nd)]
    return tuple(params)


@functools.lru_cache(maxsize=32)
def render_convolution(dtype: str, nd: int, transposed: bool) -> CudaSource:
    """The direct convolution kernel of ``dtype`` over ``nd`` spatial dims (see the module docstring)."""
    if dtype not in DTYPES or not 1 <= nd <= 3:
        raise DeviceError(f"convolution: no cuda kernel for {dtype} with {nd} spatial dims")
    name = f"munet_conv{nd}d{'_transposed' if transposed else ''}_{dtype}"
    params = conv_params(dtype, nd)
    acc = "double" if dtype == "float64" else "float"
    lines = [*kernel_head(name, params, "total"), "    long long rem = i;"]
    for d in reversed(range(nd)):
        lines.append(f"    const long long p{d} = rem % out{d}; rem /= out{d};")
    lines += [
        "    const long long o = rem % cout, b = rem / cout;",
        "    const long long g = o / og, ol = o % og;",
        f"    {acc} sum = 0;",
        "    for (long long c = 0; c < cg; c++) {",
        "      const long long ci = g * cg + c;",
        "      const long long xbase = b * xs_n + ci * xs_c;",
        f"      const long long wbase = {'ci * ws_0 + ol * ws_1' if transposed else 'o * ws_0 + c * ws_1'};",
    ]
    indent = "      "
    for d in range(nd):
        lines.append(f"{indent}for (long long k{d} = 0; k{d} < ksize{d}; k{d}++) {{")
        indent += "  "
        if transposed:
            lines.append(f"{indent}const long long t{d} = p{d} + pad{d} - k{d} * dil{d};")
            lines.append(f"{indent}if (t{d} < 0 || t{d} % s{d} != 0 || t{d} / s{d} >= in{d}) continue;")
            lines.append(f"{indent}const long long q{d} = t{d} / s{d};")
        else:
            lines.append(f"{indent}const long long q{d} = p{d} * s{d} - pad{d} + k{d} * dil{d};")
            lines.append(f"{indent}if (q{d} < 0 || q{d} >= in{d}) continue;")
    xi = " + ".join(["xbase", *(f"q{d} * xs{d}" for d in range(nd))])
    wi = " + ".join(["wbase", *(f"k{d} * ws{d}" for d in range(nd))])
    lines.append(f"{indent}sum += ({acc}){load(dtype, f'x[{xi}]')} * ({acc}){load(dtype, f'w[{wi}]')};")
    for _ in range(nd):
        indent = indent[:-2]
        lines.append(f"{indent}}}")
    lines += ["    }", f"    out[i] = {store(dtype, 'sum', 'float64' if acc == 'double' else 'float32')};", "  }", "}"]
    return CudaSource(name, "\n".join([HEADER, PRELUDE, *lines]) + "\n", params, BLOCK, "elements")
