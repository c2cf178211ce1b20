"""``convolution`` on cuda: a direct kernel rendered as CUDA C (1-3 spatial dims, stride, per-side
padding, dilation, groups, transposed).

One thread per output element (a grid-stride loop over the C-contiguous ``(N, C_out, *spatial)``
output) sums its receptive field: ``out[n, o, p] = sum over c in o's group and kernel offsets k of
w[o, c, k] * x[n, g * Cg + c, p * s - pad + k * d]`` (zero outside the input); a transposed
convolution gathers too: output pixel ``q`` takes input pixel ``(q + pad - k * d) / s`` where that
divides exactly and lies inside, with ``w`` laid out ``(C_in, C_out / groups, *k)``. Operands are
read through their strides (no copies), geometry is passed by value (so a captured CUDA graph
needs no host upload), float16/bfloat16 accumulate in float32 and float64 in double.
Gradients are convolutions again (``munet/ops/conv.py``).

This is the correct kernel, not the fast one: it does no tiling or data reuse through shared
memory, so it runs far below cuBLAS/cuDNN rates (docs/cuda.md); it uses no shared memory, so the
CPU emulation runs it in CI.
"""

from __future__ import annotations

import functools
import math

from munet._device import DeviceError
from munet.backends.cuda import launch
from munet.backends.cuda.registry import kernel
from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, ctype, load, store
from munet.backends.cuda.source import CudaSource, kernel_head
from munet.ops.conv import conv_output_spatial

BLOCK = 128
DTYPES = ("float32", "float64", "float16", "bfloat16")
_PER_DIM = ("in", "out", "ksize", "s", "pad", "dil", "xs", "ws")


def _params(dtype: str, nd: int) -> tuple:
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
    params = _params(dtype, nd)
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


def _strides(x) -> tuple:
    return tuple(s // x.itemsize for s in x.strides)


@kernel("convolution")
def convolution(rt, x, w, *, stride, padding, dilation, groups, transposed, output_padding):
    from munet.backends.cuda import copies

    dtype = copies.dtype_of(x).name
    nd = w.ndim - 2
    if dtype not in DTYPES:
        raise DeviceError(f"convolution: no kernel for device '{rt.label}' (dtype {dtype}; floating dtypes only)")
    if not 1 <= nd <= 3:
        raise DeviceError(f"convolution: {nd} spatial dims; the cuda kernel supports 1 to 3")
    n, cin = x.shape[:2]
    kernel_size, spatial_in = tuple(w.shape[2:]), tuple(x.shape[2:])
    cg, og = (cin // groups, w.shape[1]) if transposed else (w.shape[1], w.shape[0] // groups)
    spatial = conv_output_spatial(spatial_in, kernel_size, stride, padding, dilation, transposed, output_padding)
    cout = og * groups
    out = rt.empty((n, cout, *spatial), copies.dtype_of(x))
    total = out.size
    if total == 0:
        return out
    if x.size == 0 or math.prod(kernel_size) * cg == 0:
        out[...] = 0
        return out
    xs, ws = _strides(x), _strides(w)
    src = render_convolution(dtype, nd, bool(transposed))
    values = [x.data.ptr, w.data.ptr, out.data.ptr, total, cout, cg, og, xs[0], xs[1], ws[0], ws[1]]
    values += [*spatial_in, *spatial, *kernel_size, *stride, *(p[0] for p in padding), *dilation, *xs[2:], *ws[2:]]
    launch.launch(rt, src, total, [(t, v) for (t, _), v in zip(src.params, values, strict=True)])
    return out
