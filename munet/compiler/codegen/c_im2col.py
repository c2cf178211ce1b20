"""The im2col step of a forward convolution as generated C: ``render_im2col(geometry, dtype)``.

The columns of a block of images, ``cols[b, c, ky, kx, oy, ox] = x[b, c, oy*sh - ph + ky*dh,
ox*sw - pw + kx*dw]`` (zero where that reads padding), written straight from the unpadded input:
no padded copy of the input, no positions computed and dropped. Not kernel IR: the padding needs
bounds the IR has no form for, so the C is written out here, one function per geometry (its sizes
are constants, so the compiler unrolls and vectorizes the copies). Rows of columns are split
across OpenMP threads. The function exported is

    void <name>(const T *x, T *cols, long images, long oy0, long oy1, long image_pitch,
                long row_pitch, int threads)

with ``x`` (images, C, H, W) C-contiguous: the columns of output rows ``oy0 <= oy < oy1`` (a
block that stays in cache until its GEMM), the row of image ``b`` and (c, ky, kx) at ``cols +
b * image_pitch + (c * KH * KW + ky * KW + kx) * row_pitch``: ``((oy1 - oy0) * OW * C * KH * KW,
(oy1 - oy0) * OW)`` lays them out (images, C*KH*KW, P), ``(P, images * P)`` as (C*KH*KW, images,
P), the columns of several images side by side for one GEMM.
``kernels_conv.convolution_into`` calls it (through ``lower_cpu.generated_im2col``) between its
GEMMs; copies are exact, so results are the NumPy path's to the GEMM's rounding.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib

from munet.compiler.codegen import build
from munet.compiler.codegen.c import C_TYPES

# the exported function's argument types (module docstring)
ARGTYPES = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_long] * 5 + [ctypes.c_int]


def render_im2col(geometry: tuple, dtype: str) -> tuple[str, str]:
    """``(source, name)`` of the im2col of ``geometry``: ``(C, H, W, KH, KW, OH, OW, sh, sw, ph, pw,
    dh, dw)`` (``ph``/``pw`` the leading padding; negative crops), for dtype ``"f32"`` or ``"f64"``."""
    c, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = geometry
    t = C_TYPES[dtype]
    name = "im2col_" + hashlib.sha1(repr((geometry, dtype)).encode()).hexdigest()[:16]
    # per kx, the output columns whose input column lies inside the row: [lo, hi)
    if sw == 1:
        copy = "memcpy(d + lo, src + lo - PW + kx * DW, (size_t)(hi - lo) * sizeof(T));"
    else:
        copy = "for (long ox = lo; ox < hi; ox++) d[ox] = src[ox * SW - PW + kx * DW];"
    source = f"""#include <string.h>
typedef {t} T;
enum {{ C = {c}, H = {h}, W = {w}, KH = {kh}, KW = {kw}, OH = {oh}, OW = {ow} }};
enum {{ SH = {sh}, SW = {sw}, PH = {ph}, PW = {pw}, DH = {dh}, DW = {dw} }};

static long first_inside(long k, long stride, long pad, long dil, long size, long count) {{
    /* the smallest o in [0, count] with 0 <= o * stride - pad + k * dil (and below size) */
    long offset = pad - k * dil;
    long o = offset <= 0 ? 0 : (offset + stride - 1) / stride;
    return o > count ? count : o;
}}

static long last_inside(long k, long stride, long pad, long dil, long size, long count) {{
    /* one past the largest o in [0, count) with o * stride - pad + k * dil < size */
    long limit = size + pad - k * dil;  /* o * stride < limit */
    long o = limit <= 0 ? 0 : (limit + stride - 1) / stride;
    return o > count ? count : o;
}}

void {name}(const T *restrict x, T *restrict cols, long images, long oy0, long oy1, long image_pitch,
        long row_pitch, int threads) {{
    const long rows = images * C * KH * KW;
    #pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (long r = 0; r < rows; r++) {{
        const long kx = r % KW, ky = (r / KW) % KH, plane = r / (KW * KH);
        const long image = r / (C * KH * KW), row = r % (C * KH * KW);
        const T *base = x + plane * (long)(H * W);
        T *dst = cols + image * image_pitch + row * row_pitch;
        const long lo = first_inside(kx, SW, PW, DW, W, OW);
        long hi = last_inside(kx, SW, PW, DW, W, OW);
        hi = hi < lo ? lo : hi;
        for (long oy = oy0; oy < oy1; oy++) {{
            T *d = dst + (oy - oy0) * OW;
            const long iy = oy * SH - PH + ky * DH;
            if (iy < 0 || iy >= H) {{
                memset(d, 0, sizeof(T) * OW);
                continue;
            }}
            const T *src = base + iy * W;
            for (long ox = 0; ox < lo; ox++) d[ox] = 0;
            {copy}
            for (long ox = hi; ox < OW; ox++) d[ox] = 0;
        }}
    }}
}}
"""
    return source, name


def im2col_geometry(x_shape, kernel_size, stride, padding, dilation, size) -> tuple:
    """The ``render_im2col`` geometry of a 1-d or 2-d convolution of images of ``x_shape`` (B, C,
    *spatial), ``padding`` as ``(lo, hi)`` pairs: a 1-d one is a 2-d one of height 1."""
    one, none = ((1,), (0,)) if len(x_shape) == 3 else ((), ())
    starts = tuple(p[0] for p in padding)
    return (x_shape[1], *one, *x_shape[2:], *one, *kernel_size, *one, *size) + (
        *one, *stride, *none, *starts, *one, *dilation,
    )  # fmt: skip


@functools.cache
def load_im2col(geometry: tuple, dtype: str):
    """The compiled im2col of ``geometry`` (``render_im2col``), its ctypes argument types set; built
    once per geometry (then from the disk cache). Needs a C compiler (``build.find_compiler()``)."""
    source, name = render_im2col(geometry, dtype)
    return build.load_kernel(source, name, ARGTYPES)[0]
