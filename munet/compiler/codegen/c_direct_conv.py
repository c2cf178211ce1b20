"""A forward 2-D convolution of float32 as C, without a column array: ``render_direct_conv()``.

The source of one shared library that exports

    int munet_conv_isa(void)    /* 0 portable C, 1 AVX-512, 2 AVX2: the best this CPU runs */
    int munet_conv_select(int isa)  /* run `isa` from now on (tests); 0 where this CPU lacks it */
    int munet_conv_selected(void)   /* the ISA that runs */
    int munet_conv_lanes(void)  /* output positions per tile (AVX-512: of the weight gradient's) */
    int munet_conv_rows(void)   /* output channels per tile of the forward kernel */
    int munet_conv_channel_vectors(void)  /* 1 where the forward kernel is the channel-vector one */
    int munet_conv2d_direct(const float *x, const float *w, float *y, const long *g,
                            long o0, long o1, long b0, long b1)   /* 0, or -1: out of memory */
    int munet_conv2d_weight_grad(const float *x, const float *gy, float *gw, const long *g, long o,
                                 long c0, long c1, long n, long gw_c, long gw_o)
    int munet_conv_pack_weights(const float *w, float *pack, long o, long k)  /* -2: not this CPU's kernel */
    int munet_conv2d_channels(const float *x, const float *w, const float *pack, float *y, const long *g,
                              long o0, long o1, long b0, long b1, const float *bias, const float *residual,
                              int relu)  /* the channel-vector kernel, -2 where it does not run */
    int munet_conv_openmp(void)  /* 1 where the library was built with OpenMP */
    int munet_conv2d_forward_tasks(const float *x, const float *w, const float *pack, float *y, const long *g,
                                   long count, const long *tasks, const long *pitch, const float *bias,
                                   const float *residual, int relu, int channels, int threads)
    int munet_conv2d_weight_grad_tasks(const float *x, const float *gy, float *parts, const long *g, long o,
                                       long count, const long *tasks, long step, long part_floats, long gw_c,
                                       long gw_o, int threads)

``g`` is ``(C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, x image pitch, y image pitch)``
(``ph``/``pw`` the leading padding, negative crops). It writes ``y[b, o, oy, ox] = sum_{c, ky, kx}
w[o, c, ky, kx] * x[b, c, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw]`` (zero outside the input) for
images ``b0 <= b < b1`` and output channels ``o0 <= o < o1``; ``x`` (C, H, W) and ``y`` (O, OH, OW)
C-contiguous per image, ``w`` (O, C*KH*KW) C-contiguous. Single-threaded: callers split images or
channels across threads. ``munet_conv2d_weight_grad`` writes ``gw[c*gw_c + o*gw_o + ky*KW + kx]
= sum_{b < n, oy, ox} gy[b, o, oy, ox] * x[b, c, ...]`` (the same indexing) for input channels
``c0 <= c < c1`` and ``o`` output channels, ``gy`` (n, o, OH, OW) C-contiguous.
``munet_conv_pack_weights`` packs all ``o`` rows of ``w`` (O, K) as the channel-vector kernel reads
them (blocks of ``CHANNEL_BLOCK`` channels, zeros past the last), once, and ``munet_conv2d_channels``
takes such a ``pack`` instead of ``w`` (then ``o0`` must start a block); it also applies an epilogue
in the store: ``y = relu((sum + bias[o]) + residual[b, o, oy, ox])``, each part optional (NULL, 0).
The ``*_tasks`` entries run ``count`` such calls (a list of block bounds, see their comments) in one
``#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)`` loop, each call on one thread
(on the caller's alone at one thread or without OpenMP): the budget's one pool, as for GEMMs.

How, on AVX-512 (the channel-vector kernel, ``_channel_kernel``): each image is copied once,
zero-padded, into planes of every row and column an output position reads; the weights are packed,
one block of ``CHANNEL_BLOCK`` (32) output channels at a time, into ``pack[p*32 + j]`` (``p`` the
contraction index (c, ky, kx), 16 x 16 blocks transposed in registers), where the block stays in
cache while every tile of the block reads it. A tile is 14 output positions of one row (two rows of
7 on planes at most 7 wide: ResNet's last stage wastes nothing) by 32 channels: 28 accumulators;
per (c, ky, kx) it loads two vectors of weights and broadcasts each position's input, read in place
at ``off[p] + i*sw`` (any stride: no phase planes), so no position past a row is computed but the
partial last tile's (a plane's last odd row: a tile of one row of 7). Each tile sums the whole contraction in registers and is stored once, its 32
channels to their NCHW planes.

Elsewhere (the row kernel, ``_vector_kernel``): each image is copied, zero-padded, into ``sh * sw`` phase planes per channel (phase (py, px)
holds the padded input's rows ``py, py + sh, ...`` and columns ``px, px + sw, ...``; one plane at
stride 1), each of pitch ``Wp = OW + dw*(KW-1)//sw``. Output position ``(oy, ox)``, at virtual
position ``q = oy*Wp + ox``, then reads element ``q + (ky*dh//sh)*Wp + kx*dw//sw`` of the phase
plane of (c, ky*dh % sh, kx*dw % sw): for every (c, ky, kx) the ``NR`` positions of a tile are
``NR`` consecutive floats. It is the GEMM ``w (O, C*KH*KW) @ columns`` whose columns are never
written: a register-blocked micro-kernel holds an ``MR x NR`` tile of ``y`` in vector registers
and, per (c, ky, kx), loads the ``NR`` inputs in place, broadcasts ``MR`` weights (packed into
panels of ``MR`` rows) and issues one fused multiply-add per row and vector; the last tile of a
block of output channels runs a kernel of ``2*MR/3`` or ``MR/3`` rows when it has no more
(``_row_counts``), so 64 channels on AVX2 compute 64 rows, not 66. Virtual positions with
``ox >= OW`` are computed and dropped (``(Wp - OW) / Wp`` of the work: 3% on a 56-wide plane with
a 3x3 kernel, why callers keep narrow planes on the column path). The contraction runs in blocks
of ``KC``, each block adding into ``y``. The weight gradient swaps the roles: its tile is ``MR``
(c, ky, kx) rows by ``NR`` output channels, its micro-kernel broadcasts the padded input along the
virtual positions (the contraction) and loads the output gradient, packed per position with zeros
at the dropped ones.

The library is compiled for the baseline ISA like every generated kernel (cached binaries stay
portable); the AVX-512 and AVX2 kernels (and the AVX-512 driver) are functions compiled for their
targets (``__attribute__((target(...)))``), picked once at run time with ``__builtin_cpu_supports``,
so one binary runs on any x86-64 CPU; elsewhere a portable C micro-kernel serves. Every output
element is summed in one order (over ``c, ky, kx``, in blocks of ``KC`` on the row kernels) whatever
the split across threads, so one CPU gives the same bits at every thread count; AVX-512 and AVX2
machines differ in the last bits (fused multiply-adds in different orders).
"""

from __future__ import annotations

from munet.compiler.codegen.c_team import TEAM_TASKS

# (name, target attribute, MR rows, NR positions, floats per vector) of the row kernels (the weight
# gradient's; the forward one's but on CHANNEL_ISA); the first the CPU supports runs
_ISAS = (
    ("avx512", "avx512f", 12, 32, 16),
    ("avx2", "avx2,fma", 6, 16, 8),
)
_PORTABLE = ("portable", None, 4, 16, 0)
# The ISA whose forward convolution is the channel-vector kernel (``_channel_kernel``), not ``_driver``'s
CHANNEL_ISA = "avx512"
CHANNEL_TARGET = next(target for name, target, *_ in _ISAS if name == CHANNEL_ISA)  # its functions' target
CHANNEL_BLOCK = 32  # output channels per channel-vector tile: two vectors of 16
# (row segments, positions per segment) of the channel-vector tiles: 14 positions by 32 channels are
# 28 accumulators of the 32 vector registers; 12 cover rows that 14 alone would not (the CNN's 24 and
# 26); two segments of 7 serve 7-wide planes (ResNet's last stage), one segment of 7 their last odd row
CHANNEL_TILES = ((1, 14), (1, 12), (2, 7), (1, 7))
# Column strides the channel-vector kernels are generated for as constants; others read it at run time
CHANNEL_STRIDES = (1, 2)
KC = 1152  # contraction block: fewer blocks mean fewer passes over y (each adds its partial sums)
MC_PANELS = 8  # weight panels of MR rows packed per block of output channels


def _row_counts(mr: int) -> tuple[int, ...]:
    """The row counts a vector micro-kernel is generated for: the full ``mr`` and two shorter ones
    for the last tile of a block of output channels (64 channels are 5 tiles of 12 and one of 4:
    computed as a tile of 12, 11% of the work was dropped rows)."""
    return (mr, 2 * mr // 3, mr // 3)


def _vector_kernel(name: str, target: str, mr: int, nr: int, width: int, rows: int) -> str:
    """The micro-kernel ``kernel_<name>_<rows>``: ``c[i, j] (+)= sum_p a[p*mr + i] * b[off[p] + j]``
    for ``i < rows``, with intrinsics of ``width`` floats (``a`` a packed weight panel of ``mr``
    rows, ``b`` the padded input at the tile)."""
    prefix, vec = ("_mm512", "__m512") if width == 16 else ("_mm256", "__m256")
    vectors = range(nr // width)
    lines = [f"    {vec} c{i}_{v} = {prefix}_setzero_ps();" for i in range(rows) for v in vectors]
    lines.append("    for (long p = 0; p < kc; p++) {")
    lines.append("        const float *row = b + off[p];")
    lines += [f"        {vec} b{v} = {prefix}_loadu_ps(row + {v * width});" for v in vectors]
    for i in range(rows):
        lines.append(f"        {vec} a{i} = {prefix}_set1_ps(a[{i}]);")
        lines += [f"        c{i}_{v} = {prefix}_fmadd_ps(a{i}, b{v}, c{i}_{v});" for v in vectors]
    lines += [f"        a += {mr};", "    }"]
    for i in range(rows):
        for v in vectors:
            at = f"c + {i} * ldc + {v * width}"
            total = f"{prefix}_add_ps({prefix}_loadu_ps({at}), c{i}_{v})"
            lines.append(f"    {prefix}_storeu_ps({at}, accumulate ? {total} : c{i}_{v});")
    body = "\n".join(lines)
    return f"""
__attribute__((target("{target}")))
static void kernel_{name}_{rows}(long kc, const float *restrict a, const float *restrict b, const long *restrict off,
                          float *restrict c, long ldc, int accumulate) {{
{body}
}}
"""


def _portable_kernel(mr: int, nr: int) -> str:
    """``_vector_kernel`` in plain C (vectorized by the compiler for the baseline ISA)."""
    return f"""
static void kernel_portable(long kc, const float *restrict a, const float *restrict b, const long *restrict off,
                            float *restrict c, long ldc, int accumulate) {{
    float t[{mr}][{nr}] = {{{{0}}}};
    for (long p = 0; p < kc; p++) {{
        const float *row = b + off[p];
        for (int i = 0; i < {mr}; i++)
            for (int j = 0; j < {nr}; j++) t[i][j] += a[i] * row[j];
        a += {mr};
    }}
    for (int i = 0; i < {mr}; i++)
        for (int j = 0; j < {nr}; j++) c[i * ldc + j] = accumulate ? c[i * ldc + j] + t[i][j] : t[i][j];
}}
"""


def _driver(name: str, mr: int, nr: int, counts: tuple[int, ...] = ()) -> str:
    """The loops around ``kernel_<name>_<rows>`` (``counts``: the generated row counts, the largest
    first; none: the one portable kernel): padding, weight packing, blocking and partial tiles."""
    pick, computed = (f"kernel_{name}_{counts[0]}", str(counts[0])) if counts else (f"kernel_{name}", str(mr))
    for count in counts[1:]:
        pick, computed = (
            f"rows <= {count} ? kernel_{name}_{count} : ({pick})",
            f"rows <= {count} ? {count} : ({computed})",
        )
    return f"""
static int conv2d_{name}(const float *x, const float *wt, float *y, const long *g, long o0, long o1, long b0,
                         long b1) {{
    const long c = g[0], h = g[1], w = g[2], kh = g[3], kw = g[4], oh = g[5], ow = g[6], sh = g[7], sw = g[8];
    const long ph = g[9], pw = g[10], dh = g[11], dw = g[12], x_pitch = g[13], y_pitch = g[14];
    /* phase planes: hp x wp, sh * sw of them per channel (one at stride 1) */
    const long hp = oh + dh * (kh - 1) / sh, wp = ow + dw * (kw - 1) / sw, k = c * kh * kw, virtual_n = oh * wp;
    const long phase = c * hp * wp, stack = sh * sw * phase, images = b1 - b0, plane = oh * ow;
    const long mc = {mr} * {MC_PANELS};
    /* the dropped positions of the last tile read up to this far past the last plane */
    const long slack = {nr} + (hp - oh + 1) * wp;
    float *apack = workspace(0, (size_t)mc * KC);
    float *padded = workspace(1, (size_t)(images * stack + slack));
    long *off = (long *)workspace(2, (size_t)k * sizeof(long) / sizeof(float));
    float tile[{mr} * {nr}] __attribute__((aligned(64)));
    if (!apack || !padded || !off) return -1;
    for (long ci = 0, r = 0; ci < c; ci++)
        for (long ky = 0; ky < kh; ky++)
            for (long kx = 0; kx < kw; kx++, r++) {{
                long at = (ky * dh % sh * sw + kx * dw % sw) * phase + ci * hp * wp;
                off[r] = at + ky * dh / sh * wp + kx * dw / sw;
            }}
    for (long b = 0; b < images; b++)
        for (long py = 0; py < sh; py++)
            for (long px = 0; px < sw; px++)
                pad_planes(padded + b * stack + (py * sw + px) * phase, x + (b0 + b) * x_pitch, c, h, w, hp, wp,
                           ph - py, pw - px, sh, sw);
    memset(padded + images * stack, 0, (size_t)slack * sizeof(float));
    for (long pc = 0; pc < k; pc += KC) {{
        long kb = k - pc < KC ? k - pc : KC;
        int accumulate = pc > 0;
        for (long ic = o0; ic < o1; ic += mc) {{
            long mb = o1 - ic < mc ? o1 - ic : mc;
            pack_panels(apack, wt + ic * k + pc, kb, mb, k, {mr});
            for (long b = 0; b < images; b++) {{
                const float *xb = padded + b * stack;
                for (long q = 0; q < virtual_n; q += {nr}) {{
                    long oy = q / wp, ox = q % wp;
                    for (long ir = 0; ir < mb; ir += {mr}) {{
                        long rows = mb - ir < {mr} ? mb - ir : {mr};
                        const float *ap = apack + (ir / {mr}) * kb * {mr};
                        float *yo = y + (b0 + b) * y_pitch + (ic + ir) * plane;
                        micro_kernel fn = {pick};
                        if (rows == ({computed}) && ox + {nr} <= ow) {{ /* no rows computed past the last */
                            fn(kb, ap, xb + q, off + pc, yo + oy * ow + ox, plane, accumulate);
                            continue;
                        }}
                        fn(kb, ap, xb + q, off + pc, tile, {nr}, 0);
                        store_tile(yo, plane, tile, {nr}, rows, q, virtual_n, wp, ow, accumulate);
                    }}
                }}
            }}
        }}
    }}
    return 0;
}}
"""


def _channel_kernel(segments: int, length: int, stride: int | None) -> str:
    """The AVX-512 forward micro-kernel ``channels_<segments>x<length>_s<stride>`` (``s0``: the column
    stride ``s`` read at run time): ``t[q*32 + j] = sum_p w[p*32 + j] * b<r>[off[p] + i*stride]`` for
    the tile's positions ``q = r*length + i`` (``r`` its row segment, ``i`` the position in it) and
    ``CHANNEL_BLOCK`` output channels ``j``: per contraction step two vectors of packed weights (16
    channels each) and one broadcast input per position, 28 accumulators in registers."""
    step = "s" if stride is None else str(stride)
    positions = range(segments * length)
    lines = ["    (void)s;", "    (void)b1;"]
    lines += [f"    __m512 c{q}_{v} = _mm512_setzero_ps();" for q in positions for v in (0, 1)]
    lines.append(f"    for (long p = 0; p < k; p++, w += {CHANNEL_BLOCK}) {{")
    lines.append("        const __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16);")
    lines += [f"        const float *r{r} = b{r} + off[p];" for r in range(segments)]
    for q in positions:
        r, i = divmod(q, length)
        lines.append(f"        const __m512 x{q} = _mm512_set1_ps(r{r}[{i} * {step}]);")
        lines += [f"        c{q}_{v} = _mm512_fmadd_ps(x{q}, w{v}, c{q}_{v});" for v in (0, 1)]
    lines.append("    }")
    lines += [f"    _mm512_store_ps(t + {q * CHANNEL_BLOCK + 16 * v}, c{q}_{v});" for q in positions for v in (0, 1)]
    body = "\n".join(lines)
    return f"""
__attribute__((target("{CHANNEL_TARGET}")))
static void channels_{segments}x{length}_s{stride or 0}(long k, const float *restrict w, const float *restrict b0,
                                       const float *restrict b1, const long *restrict off, long s, float *restrict t) {{
{body}
}}
"""


def _channel_driver() -> str:
    """The loops around the channel-vector kernels: one zero-padded copy of each image (no phase
    planes: a tile's positions are ``sw`` apart in a row), then per block of ``CHANNEL_BLOCK`` packed
    output channels, per image, tiles of one output row's 14 positions (two rows' 7 on planes at
    most 7 wide), each summed over the whole contraction and stored once into the NCHW output."""
    (_, wide), (_, short), (_, narrow), _ = CHANNEL_TILES

    def pick(segments, length):
        name = f"channels_{segments}x{length}_s"
        choice = f"{name}0"
        for stride in CHANNEL_STRIDES:
            choice = f"sw == {stride} ? {name}{stride} : ({choice})"
        return choice

    return f"""
typedef void (*channel_kernel)(long k, const float *restrict w, const float *restrict b0, const float *restrict b1,
                               const long *restrict off, long s, float *restrict t);

/* r[p] = element p of the 16 rows r[0..15]: the 16 x 16 transpose in registers */
__attribute__((target("{CHANNEL_TARGET}")))
static void transpose16(__m512 r[16]) {{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {{ /* per 128-bit block: (r_i[0], r_i+1[0], r_i[1], r_i+1[1]), then [2], [3] */
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }}
    for (int i = 0; i < 16; i += 4) {{ /* r[i + e], block b: element 4b + e of rows i .. i+3 */
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }}
    for (int e = 0; e < 4; e++) {{ /* element 4b + e of all 16 rows: block b of r[e], r[4+e], r[8+e], r[12+e] */
        __m512 u0 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0x44), u1 = _mm512_shuffle_f32x4(r[e], r[4 + e], 0xEE);
        __m512 u2 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0x44), u3 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], 0xEE);
        t[e] = _mm512_shuffle_f32x4(u0, u2, 0x88);
        t[4 + e] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
        t[8 + e] = _mm512_shuffle_f32x4(u1, u3, 0x88);
        t[12 + e] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
    }}
    for (int i = 0; i < 16; i++) r[i] = t[i];
}}

/* What the store adds to each output element: y = relu?((sum + bias[channel]) + residual[same index]),
   each part optional (NULL, 0), in that order: the order of the add, add, relu the compiler fuses */
typedef struct {{
    const float *bias;     /* per output channel of the call's weights */
    const float *residual; /* laid out as y */
    int relu;
}} epilogue;

/* positions x count of the tile `t` (position-major, {CHANNEL_BLOCK} channels apart) into `count`
   output planes from `y` (`plane` apart), `positions` (at most 16) consecutive floats each: 16 x 16
   blocks transposed in registers, the epilogue `e` applied (its bias from `bias`, its residual at
   `residual`: the block's first channel), stored masked */
__attribute__((target("{CHANNEL_TARGET}")))
static void store_channels(float *y, long plane, const float *t, long count, long positions, const epilogue *e,
                           const float *bias, const float *residual) {{
    const __mmask16 keep = (__mmask16)((1u << positions) - 1);
    for (long j0 = 0; j0 < count; j0 += 16) {{
        __m512 r[16];
        for (int i = 0; i < 16; i++) r[i] = i < positions ? _mm512_loadu_ps(t + i * {CHANNEL_BLOCK} + j0) : _mm512_setzero_ps();
        transpose16(r);
        for (long j = j0; j < count && j < j0 + 16; j++) {{
            __m512 v = r[j - j0];
            if (e) {{
                if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias[j]));
                if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(keep, residual + j * plane));
                if (e->relu) v = _mm512_max_ps(_mm512_setzero_ps(), v); /* NaN (the second operand) propagates */
            }}
            _mm512_mask_storeu_ps(y + j * plane, keep, v);
        }}
    }}
}}

/* `count` rows of `w` (row pitch k) into pack[p*{CHANNEL_BLOCK} + j] = w[j*k + p], zeros past the last row:
   16 x 16 blocks transposed in registers, the rest element by element */
__attribute__((target("{CHANNEL_TARGET}")))
static void pack_channels(float *pack, const float *w, long count, long k) {{
    long p0 = 0;
    if (count == {CHANNEL_BLOCK})
        for (; p0 + 16 <= k; p0 += 16)
            for (long j0 = 0; j0 < {CHANNEL_BLOCK}; j0 += 16) {{
                __m512 r[16];
                for (int j = 0; j < 16; j++) {{
                    const float *row = w + (j0 + j) * k + p0;
                    __builtin_prefetch(row + 64); /* four cache lines ahead in each of the rows */
                    r[j] = _mm512_loadu_ps(row);
                }}
                transpose16(r);
                for (int p = 0; p < 16; p++) _mm512_storeu_ps(pack + (p0 + p) * {CHANNEL_BLOCK} + j0, r[p]);
            }}
    for (; p0 < k; p0++)
        for (long j = 0; j < {CHANNEL_BLOCK}; j++) pack[p0 * {CHANNEL_BLOCK} + j] = j < count ? w[j * k + p0] : 0.0f;
}}

__attribute__((target("{CHANNEL_TARGET}")))
static int conv2d_channels(const float *x, const float *wt, const float *packed, float *y, const long *g, long o0,
                           long o1, long b0, long b1, const epilogue *e) {{
    const long c = g[0], h = g[1], w = g[2], kh = g[3], kw = g[4], oh = g[5], ow = g[6], sh = g[7], sw = g[8];
    const long ph = g[9], pw = g[10], dh = g[11], dw = g[12], x_pitch = g[13], y_pitch = g[14];
    /* the padded image: every row and column an output position reads, hp x wp per channel */
    const long hp = (oh - 1) * sh + dh * (kh - 1) + 1, wp = (ow - 1) * sw + dw * (kw - 1) + 1;
    const long k = c * kh * kw, image = c * hp * wp, images = b1 - b0, plane = oh * ow;
    /* a tile's dropped positions read up to this far past the last image */
    const long slack = {wide} * sw;
    /* one block of packed weights at a time: it stays in cache while the block's tiles read it */
    float *pack = packed ? NULL : workspace(0, (size_t)(k * {CHANNEL_BLOCK}));
    float *padded = workspace(1, (size_t)(images * image + slack));
    long *off = (long *)workspace(2, (size_t)k * sizeof(long) / sizeof(float));
    float t[{wide * CHANNEL_BLOCK}] __attribute__((aligned(64)));
    if ((!packed && !pack) || !padded || !off) return -1;
    for (long ci = 0, r = 0; ci < c; ci++)
        for (long ky = 0; ky < kh; ky++)
            for (long kx = 0; kx < kw; kx++, r++) off[r] = (ci * hp + ky * dh) * wp + kx * dw;
    for (long b = 0; b < images; b++)
        pad_planes(padded + b * image, x + (b0 + b) * x_pitch, c, h, w, hp, wp, ph, pw, 1, 1);
    memset(padded + images * image, 0, (size_t)slack * sizeof(float));
    const channel_kernel rows = {pick(1, wide)}, shorter = {pick(1, short)};
    const channel_kernel pairs = {pick(2, narrow)}, single = {pick(1, narrow)};
    /* a row is covered by tiles of {wide}, then `tail` tiles of {short} where that covers it exactly
       (24 = 2 x 12, 26 = 14 + 12), else by tiles of {wide} only, the last one partial */
    long tail = 0;
    while (tail * {short} <= ow && (ow - tail * {short}) % {wide}) tail++;
    if (tail * {short} > ow) tail = 0;
    const long split = ow - tail * {short};
    for (long ob = o0; ob < o1; ob += {CHANNEL_BLOCK}) {{
        long count = o1 - ob < {CHANNEL_BLOCK} ? o1 - ob : {CHANNEL_BLOCK};
        const float *block = packed ? packed + ob / {CHANNEL_BLOCK} * k * {CHANNEL_BLOCK} : pack;
        if (!packed) pack_channels(pack, wt + ob * k, count, k);
        for (long b = 0; b < images; b++) {{
            const float *xb = padded + b * image;
            float *yb = y + (b0 + b) * y_pitch + ob * plane;
            const float *bias = e && e->bias ? e->bias + ob : NULL;
            const float *rb = e && e->residual ? e->residual + (b0 + b) * y_pitch + ob * plane : NULL;
            if (ow <= {narrow}) {{
                for (long oy = 0; oy < oh; oy += 2) {{
                    const float *first = xb + oy * sh * wp;
                    if (oy + 1 == oh) /* the last odd row: a tile of one row */
                        single(k, block, first, first, off, sw, t);
                    else
                        pairs(k, block, first, first + sh * wp, off, sw, t);
                    store_channels(yb + oy * ow, plane, t, count, ow, e, bias, rb ? rb + oy * ow : NULL);
                    if (oy + 1 < oh)
                        store_channels(yb + (oy + 1) * ow, plane, t + {narrow * CHANNEL_BLOCK}, count, ow, e, bias,
                                       rb ? rb + (oy + 1) * ow : NULL);
                }}
                continue;
            }}
            for (long oy = 0; oy < oh; oy++)
                for (long ox = 0; ox < ow;) {{
                    const float *at = xb + oy * sh * wp + ox * sw;
                    long length = ox < split ? {wide} : {short};
                    (ox < split ? rows : shorter)(k, block, at, at, off, sw, t);
                    store_channels(yb + oy * ow + ox, plane, t, count, ow - ox < length ? ow - ox : length, e, bias,
                                   rb ? rb + oy * ow + ox : NULL);
                    ox += length;
                }}
        }}
    }}
    return 0;
}}

/* all `o` rows of `w` (row pitch k) in blocks of {CHANNEL_BLOCK}: block t at pack + t*k*{CHANNEL_BLOCK}, as
   conv2d_channels packs each block when it is given none */
__attribute__((target("{CHANNEL_TARGET}")))
static void pack_weights_channels(float *pack, const float *w, long o, long k) {{
    for (long ob = 0; ob < o; ob += {CHANNEL_BLOCK})
        pack_channels(pack + ob / {CHANNEL_BLOCK} * k * {CHANNEL_BLOCK}, w + ob * k,
                      o - ob < {CHANNEL_BLOCK} ? o - ob : {CHANNEL_BLOCK}, k);
}}
"""


def _gather_kernel(name: str, target: str | None, mr: int, nr: int, width: int) -> str:
    """The weight gradient's micro-kernel: ``c[i, j] += sum_p a[off[i] + p] * b[p*nr + j]``: ``mr``
    rows of the padded input read along the contraction in place, ``b`` a packed panel of the
    output gradient (``nr`` output channels per position)."""
    attribute = f'__attribute__((target("{target}")))' if target else ""
    if not width:  # portable C
        body = f"""    float t[{mr}][{nr}] = {{{{0}}}};
    for (long p = 0; p < kc; p++, b += {nr})
        for (int i = 0; i < {mr}; i++)
            for (int j = 0; j < {nr}; j++) t[i][j] += a[off[i] + p] * b[j];
    for (int i = 0; i < {mr}; i++)
        for (int j = 0; j < {nr}; j++) c[i * ldc + j] += t[i][j];"""
    else:
        prefix, vec = ("_mm512", "__m512") if width == 16 else ("_mm256", "__m256")
        vectors = range(nr // width)
        lines = [f"    const float *a{i} = a + off[{i}];" for i in range(mr)]
        lines += [f"    {vec} c{i}_{v} = {prefix}_setzero_ps();" for i in range(mr) for v in vectors]
        lines.append(f"    for (long p = 0; p < kc; p++, b += {nr}) {{")
        lines += [f"        {vec} b{v} = {prefix}_load_ps(b + {v * width});" for v in vectors]
        for i in range(mr):
            lines.append(f"        {vec} s{i} = {prefix}_set1_ps(a{i}[p]);")
            lines += [f"        c{i}_{v} = {prefix}_fmadd_ps(s{i}, b{v}, c{i}_{v});" for v in vectors]
        lines.append("    }")
        for i in range(mr):
            for v in vectors:
                at = f"c + {i} * ldc + {v * width}"
                lines.append(f"    {prefix}_storeu_ps({at}, {prefix}_add_ps({prefix}_loadu_ps({at}), c{i}_{v}));")
        body = "\n".join(lines)
    return f"""
{attribute}
static void gather_{name}(long kc, const float *restrict a, const long *restrict off, const float *restrict b,
                          float *restrict c, long ldc) {{
{body}
}}
"""


def _weight_grad_driver(name: str, mr: int, nr: int) -> str:
    """The loops of the weight gradient: per image, its padded channels and its packed output
    gradient, then tiles of (channel, ky, kx) rows by ``nr`` output channels, summed over the
    image's virtual positions in blocks of ``KC``."""
    return f"""
static int weight_grad_{name}(const float *x, const float *gy, float *gw, const long *g, long o, long c0, long c1,
                              long n, long gw_c, long gw_o) {{
    const long h = g[1], w = g[2], kh = g[3], kw = g[4], oh = g[5], ow = g[6], sh = g[7], sw = g[8];
    const long ph = g[9], pw = g[10], dh = g[11], dw = g[12], x_pitch = g[13], y_pitch = g[14];
    const long cc = c1 - c0, hp = oh + dh * (kh - 1) / sh, wp = ow + dw * (kw - 1) / sw, virtual_n = oh * wp;
    const long phase = cc * hp * wp, stack = sh * sw * phase, rows = cc * kh * kw;
    const long row_tiles = (rows + {mr} - 1) / {mr}, panels = (o + {nr} - 1) / {nr}, opad = panels * {nr};
    const long slack = {nr} + (hp - oh + 1) * wp;
    float *gpack = workspace(0, (size_t)(opad * virtual_n));
    float *padded = workspace(1, (size_t)(stack + slack));
    long *off = (long *)workspace(2, (size_t)(row_tiles * {mr}) * sizeof(long) / sizeof(float));
    float *acc = workspace(3, (size_t)(row_tiles * {mr} * opad));
    if (!gpack || !padded || !off || !acc) return -1;
    for (long ci = 0, r = 0; ci < cc; ci++)
        for (long ky = 0; ky < kh; ky++)
            for (long kx = 0; kx < kw; kx++, r++)
                off[r] = (ky * dh % sh * sw + kx * dw % sw) * phase + ci * hp * wp + ky * dh / sh * wp + kx * dw / sw;
    for (long r = rows; r < row_tiles * {mr}; r++) off[r] = 0; /* rows past the last: computed, dropped */
    memset(acc, 0, (size_t)(row_tiles * {mr} * opad) * sizeof(float));
    memset(padded + stack, 0, (size_t)slack * sizeof(float));
    for (long b = 0; b < n; b++) {{
        for (long py = 0; py < sh; py++)
            for (long px = 0; px < sw; px++)
                pad_planes(padded + (py * sw + px) * phase, x + b * x_pitch + c0 * h * w, cc, h, w, hp, wp, ph - py,
                           pw - px, sh, sw);
        pack_gradient(gpack, gy + b * y_pitch, o, oh, ow, wp, {nr});
        for (long q0 = 0; q0 < virtual_n; q0 += KC) {{
            long kb = virtual_n - q0 < KC ? virtual_n - q0 : KC;
            for (long t = 0; t < panels; t++)
                for (long ir = 0; ir < row_tiles; ir++)
                    gather_{name}(kb, padded + q0, off + ir * {mr}, gpack + (t * virtual_n + q0) * {nr},
                                  acc + ir * {mr} * opad + t * {nr}, opad);
        }}
    }}
    for (long r = 0; r < rows; r++)
        for (long oi = 0; oi < o; oi++) gw[(c0 + r / (kh * kw)) * gw_c + oi * gw_o + r % (kh * kw)] = acc[r * opad + oi];
    return 0;
}}
"""


_COMMON = """#define _POSIX_C_SOURCE 200112L
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MUNET_X86 1
#endif

typedef void (*micro_kernel)(long kc, const float *restrict a, const float *restrict b, const long *restrict off,
                             float *restrict c, long ldc, int accumulate);

/* Per-thread buffers, grown as needed and kept between calls (the callers' threads live long). */
static __thread float *buffers[4];
static __thread size_t sizes[4];

static float *workspace(int which, size_t floats) {
    if (sizes[which] < floats) {
        void *fresh = NULL;
        free(buffers[which]);
        buffers[which] = posix_memalign(&fresh, 64, floats * sizeof(float)) == 0 ? fresh : NULL;
        sizes[which] = buffers[which] ? floats : 0;
    }
    return buffers[which];
}

/* `c` planes h x w into planes hp x wp: dst[c, yy, xx] = src[c, yy*sh - ph, xx*sw - pw], zero
   outside the source (ph, pw: the leading padding less the phase; negative crops). */
static void pad_planes(float *dst, const float *src, long c, long h, long w, long hp, long wp, long ph, long pw,
                       long sh, long sw) {
    for (long ci = 0; ci < c; ci++)
        for (long yy = 0; yy < hp; yy++) {
            float *d = dst + (ci * hp + yy) * wp;
            long iy = yy * sh - ph;
            if (iy < 0 || iy >= h) {
                memset(d, 0, (size_t)wp * sizeof(float));
                continue;
            }
            const float *s = src + (ci * h + iy) * w;
            if (sw == 1) { /* zeros, one copied run, zeros: the loop's values (3-7% of a 56x56 layer's time) */
                long lo = pw <= 0 ? 0 : pw < wp ? pw : wp, hi = w + pw < wp ? w + pw : wp;
                hi = hi < lo ? lo : hi;
                memset(d, 0, (size_t)lo * sizeof(float));
                memcpy(d + lo, s + lo - pw, (size_t)(hi - lo) * sizeof(float));
                memset(d + hi, 0, (size_t)(wp - hi) * sizeof(float));
                continue;
            }
            for (long xx = 0; xx < wp; xx++) {
                long ix = xx * sw - pw;
                d[xx] = ix >= 0 && ix < w ? s[ix] : 0.0f;
            }
        }
}

/* Rows rows x `len` of the weights (row i, element p at src[i*ld + p]) into panels of `width`
   rows: panel t holds element p of row t*width+r at dst[t*len*width + p*width + r], zeros past
   the last row. */
static void pack_panels(float *dst, const float *src, long len, long rows, long ld, long width) {
    for (long t = 0; t < rows; t += width, dst += len * width) {
        long count = rows - t < width ? rows - t : width;
        for (long p = 0; p < len; p++) {
            float *d = dst + p * width;
            long r = 0;
            for (; r < count; r++) d[r] = src[(t + r) * ld + p];
            for (; r < width; r++) d[r] = 0.0f;
        }
    }
}

/* One image's output gradient (o, oh, ow) into panels of `width` channels over its virtual
   positions (q = oy*wp + ox): dst[t][q][r] = gy[t*width + r][oy][ox], zero where ox >= ow or past
   the last channel. */
static void pack_gradient(float *dst, const float *gy, long o, long oh, long ow, long wp, long width) {
    long virtual_n = oh * wp, plane = oh * ow;
    for (long t = 0; t * width < o; t++) {
        float *panel = dst + t * virtual_n * width;
        long count = o - t * width < width ? o - t * width : width;
        const float *src = gy + t * width * plane;
        /* position-major: each panel row is written once, contiguously; the `count` source planes
           are read as that many sequential streams */
        for (long oy = 0; oy < oh; oy++)
            for (long ox = 0; ox < wp; ox++) {
                float *d = panel + (oy * wp + ox) * width;
                long r = 0;
                if (ox < ow)
                    for (const float *s = src + oy * ow + ox; r < count; r++) d[r] = s[r * plane];
                for (; r < width; r++) d[r] = 0.0f;
            }
    }
}

/* Write (or add) the tile (rows x width, row pitch `width`) of virtual positions q0 .. q0+width
   (q = oy*wp + ox) into the planes at `y` (`plane` apart), dropping ox >= ow and q >= n. */
static void store_tile(float *y, long plane, const float *tile, long width, long rows, long q0, long n, long wp,
                       long ow, int accumulate) {
    long end = q0 + width < n ? q0 + width : n;
    for (long q = q0; q < end;) {
        long oy = q / wp, ox = q % wp, count = ow - ox;
        if (count <= 0) {
            q += wp - ox;
            continue;
        }
        count = count < end - q ? count : end - q;
        for (long i = 0; i < rows; i++) {
            float *d = y + i * plane + oy * ow + ox;
            const float *s = tile + i * width + (q - q0);
            if (accumulate)
                for (long l = 0; l < count; l++) d[l] += s[l];
            else
                for (long l = 0; l < count; l++) d[l] = s[l];
        }
        q += count;
    }
}
"""


def _dispatch() -> str:
    """The exported functions: the ISA check once, then the matching driver."""
    checks = []
    for i, (_, target, *_) in enumerate(_ISAS):
        test = " && ".join(f'__builtin_cpu_supports("{feature}")' for feature in target.split(","))
        checks.append(f"    if ({test}) return {i + 1};")
    calls = "\n".join(
        f"    case {i + 1}: return conv2d_{name}(x, w, y, g, o0, o1, b0, b1);"
        for i, (name, *_) in enumerate(_ISAS)
        if name != CHANNEL_ISA
    )
    channel_case = ISA_NAMES.index(CHANNEL_ISA)
    lanes = "\n".join(f"    case {i + 1}: return {nr};" for i, (_, _, _, nr, _) in enumerate(_ISAS))
    rows = "\n".join(
        f"    case {i + 1}: return {CHANNEL_BLOCK if name == CHANNEL_ISA else mr};"
        for i, (name, _, mr, _, _) in enumerate(_ISAS)
    )
    checks = "\n".join(checks)
    grads = "\n".join(
        f"    case {i + 1}: return weight_grad_{name}(x, gy, gw, g, o, c0, c1, n, gw_c, gw_o);"
        for i, (name, *_) in enumerate(_ISAS)
    )
    return f"""
int munet_conv_isa(void) {{
#ifdef MUNET_X86
    __builtin_cpu_init();
{checks}
#endif
    return 0;
}}

static int selected = -1;

static int isa(void) {{
    if (selected < 0) selected = munet_conv_isa();
    return selected;
}}

int munet_conv_selected(void) {{ return isa(); }}

int munet_conv_select(int wanted) {{
    int best = munet_conv_isa();
    if (wanted != 0 && (best == 0 || wanted < best)) return 0;
    selected = wanted;
    return 1;
}}

int munet_conv_rows(void) {{
    switch (isa()) {{
#ifdef MUNET_X86
{rows}
#endif
    default: return {_PORTABLE[2]};
    }}
}}

int munet_conv_lanes(void) {{
    switch (isa()) {{
#ifdef MUNET_X86
{lanes}
#endif
    default: return {_PORTABLE[3]};
    }}
}}

int munet_conv2d_direct(const float *x, const float *w, float *y, const long *g, long o0, long o1, long b0,
                        long b1) {{
    switch (isa()) {{
#ifdef MUNET_X86
    case {channel_case}: return conv2d_channels(x, w, NULL, y, g, o0, o1, b0, b1, NULL);
{calls}
#endif
    default: return conv2d_portable(x, w, y, g, o0, o1, b0, b1);
    }}
}}

int munet_conv_channel_vectors(void) {{ return isa() == {channel_case}; }}

int munet_conv_pack_weights(const float *w, float *pack, long o, long k) {{
#ifdef MUNET_X86
    if (isa() == {channel_case}) {{
        pack_weights_channels(pack, w, o, k);
        return 0;
    }}
#endif
    return -2;
}}

int munet_conv2d_channels(const float *x, const float *w, const float *pack, float *y, const long *g, long o0,
                          long o1, long b0, long b1, const float *bias, const float *residual, int relu) {{
#ifdef MUNET_X86
    const epilogue e = {{bias, residual, relu}};
    if (isa() == {channel_case} && (!pack || o0 % {CHANNEL_BLOCK} == 0))
        return conv2d_channels(x, pack ? NULL : w, pack, y, g, o0, o1, b0, b1, bias || residual || relu ? &e : NULL);
#endif
    (void)x, (void)w, (void)pack, (void)y, (void)g, (void)o0, (void)o1, (void)b0, (void)b1;
    (void)bias, (void)residual, (void)relu;
    return -2;
}}

int munet_conv2d_weight_grad(const float *x, const float *gy, float *gw, const long *g, long o, long c0, long c1,
                             long n, long gw_c, long gw_o) {{
    switch (isa()) {{
#ifdef MUNET_X86
{grads}
#endif
    default: return weight_grad_portable(x, gy, gw, g, o, c0, c1, n, gw_c, gw_o);
    }}
}}
{_TASK_ENTRIES}"""


_TASK_ENTRIES = """
int munet_conv_openmp(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

/* The calls of munet_conv2d_forward_tasks / munet_conv2d_weight_grad_tasks (their comments) */
typedef struct {
    const float *x, *w, *pack, *bias, *residual;
    float *y;
    const long *g, *tasks, *pitch;
    long o, step, part_floats, gw_c, gw_o;
    int relu, channels;
} conv_tasks;

static int forward_task(const conv_tasks *a, long i) {
    const long *t = a->tasks + 5 * i, gr = t[0], *pitch = a->pitch;
    const float *x = a->x + gr * pitch[0], *w = a->w + gr * pitch[1];
    float *y = a->y + gr * pitch[3];
    if (!a->channels) return munet_conv2d_direct(x, w, y, a->g, t[3], t[4], t[1], t[2]);
    return munet_conv2d_channels(x, w, a->pack ? a->pack + gr * pitch[2] : NULL, y, a->g, t[3], t[4], t[1], t[2],
                                 a->bias ? a->bias + gr * pitch[4] : NULL,
                                 a->residual ? a->residual + gr * pitch[3] : NULL, a->relu);
}

static int weight_grad_task(const conv_tasks *a, long i) {
    const long *t = a->tasks + 4 * i, c = a->g[0], x_pitch = a->g[13], y_pitch = a->g[14];
    const long c1 = t[3] + a->step < c ? t[3] + a->step : c;
    return munet_conv2d_weight_grad(a->x + t[1] * x_pitch, a->w + t[1] * y_pitch, a->y + t[0] * a->part_floats, a->g,
                                    a->o, t[3], c1, t[2] - t[1], a->gw_c, a->gw_o);
}

/* Tasks 0 .. count-1 of `run`, each one single-threaded call, claimed one at a time by the `threads`
   threads of the OpenMP team (on this thread alone with one thread or without OpenMP; the caller's
   thread waits awake for the last ones, codegen/c_team.py): the first
   non-zero status, later tasks skipped once one failed. Each output element is written by one task,
   summed in the kernel's order, so the split does not change the bits. */
static int conv_run_tasks(int (*run)(const conv_tasks *, long), const conv_tasks *a, long count, int threads) {
    int status = 0;
#ifdef _OPENMP
    if (threads > 1 && count > 1) {
        long done = 0;
        #pragma omp parallel num_threads(threads)
        {
            #pragma omp for schedule(dynamic, 1) nowait
            for (long i = 0; i < count; i++) {
                if (!__atomic_load_n(&status, __ATOMIC_RELAXED)) {
                    int got = run(a, i), none = 0;
                    if (got) __atomic_compare_exchange_n(&status, &none, got, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
                }
                munet_task_done(&done);
            }
            munet_wait_awake(&done, count);
        }
        return status;
    }
#endif
    (void)threads;
    for (long i = 0; i < count && !status; i++) status = run(a, i);
    return status;
}

/* `count` forward calls: task i is tasks[5i .. 5i+4] = (group, b0, b1, o0, o1); group `gr`'s operands
   start `gr * pitch[0 .. 4]` floats into x, w, pack, y and bias (residual: as y); `channels` picks
   munet_conv2d_channels (with pack, bias, residual, relu), else munet_conv2d_direct. */
int munet_conv2d_forward_tasks(const float *x, const float *w, const float *pack, float *y, const long *g, long count,
                               const long *tasks, const long *pitch, const float *bias, const float *residual,
                               int relu, int channels, int threads) {
    const conv_tasks a = {x, w, pack, bias, residual, y, g, tasks, pitch, 0, 0, 0, 0, 0, relu, channels};
    return conv_run_tasks(forward_task, &a, count, threads);
}

/* `count` weight-gradient calls: task i is tasks[4i .. 4i+3] = (part, b0, b1, c0): images b0 .. b1 of x
   and gy summed into parts + part * part_floats for input channels c0 .. min(c0 + step, C), as
   munet_conv2d_weight_grad. */
int munet_conv2d_weight_grad_tasks(const float *x, const float *gy, float *parts, const long *g, long o, long count,
                                   const long *tasks, long step, long part_floats, long gw_c, long gw_o, int threads) {
    const conv_tasks a = {x, gy, NULL, NULL, NULL, parts, g, tasks, NULL, o, step, part_floats, gw_c, gw_o, 0, 0};
    return conv_run_tasks(weight_grad_task, &a, count, threads);
}
"""


def render_direct_conv() -> str:
    """The C source of the library (see the module docstring)."""
    _, _, mr, nr, _ = _PORTABLE
    parts = [f"#define KC {KC}", _COMMON, TEAM_TASKS, _portable_kernel(mr, nr), _driver("portable", mr, nr)]
    parts += [_gather_kernel("portable", None, mr, nr, 0), _weight_grad_driver("portable", mr, nr), "#ifdef MUNET_X86"]
    for name, target, mr, nr, width in _ISAS:
        if name == CHANNEL_ISA:
            tiles = [(segments, length, stride) for segments, length in CHANNEL_TILES for stride in CHANNEL_STRIDES]
            parts += [_channel_kernel(*tile) for tile in tiles + [(s, n, None) for s, n in CHANNEL_TILES]]
            parts.append(_channel_driver())
        else:
            counts = _row_counts(mr)
            parts += [_vector_kernel(name, target, mr, nr, width, rows) for rows in counts]
            parts.append(_driver(name, mr, nr, counts))
        parts += [_gather_kernel(name, target, mr, nr, width), _weight_grad_driver(name, mr, nr)]
    parts += ["#endif", _dispatch()]
    return "\n".join(parts)


ISA_NAMES = ("portable",) + tuple(name for name, *_ in _ISAS)
