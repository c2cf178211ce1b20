"""C for the cpu's eager row kernels: softmax, its gradient and ``standardize`` over the last dim.

``render_rows()`` gives one translation unit exporting, for float32 rows of ``n`` contiguous
elements (``rows * n`` elements in all, row-major)::

    void munet_rows_softmax(const float *x, float *y, int64_t rows, int64_t n, int64_t threads)
    void munet_rows_softmax_backward(const float *g, const float *y, float *dx, int64_t rows, int64_t n,
                                     int64_t threads)
    void munet_rows_standardize(const float *x, float *xhat, float *rstd, int64_t rows, int64_t n,
                                float eps, int64_t center, int64_t threads)

Each computes its composite's decomposition (``ops/activation.py``, ``ops/normalization.py``) in
one sweep per row, the row staying in cache between its passes, instead of one NumPy pass over the
whole tensor per operation: softmax ``exp(x - max) / sum``, its gradient ``g*y - y * sum(g*y)``,
standardize ``(x - mean) * rstd`` with ``rstd = 1 / sqrt(mean((x - mean)^2) + eps)`` (``center``
0: ``x * rstd`` from ``mean(x^2)``). The operations and their float32 roundings are the
decomposition's; only the sums are in another order (``LANES`` running partial sums, then those in
a fixed order, where NumPy sums pairwise), and ``exp`` is a float32 polynomial (``munet_rows_expf``,
within 2 ulp; not ``c.py``'s ``munet_expf``, which evaluates in double to round correctly, half as
many lanes a vector; the NumPy kernel's ``np.exp`` was not that one's bits either). The max
propagates NaN as NumPy's does. Rows are split evenly over an OpenMP team when ``threads > 1`` and
the tensor holds at least ``PARALLEL_MIN_ELEMENTS``; each thread runs the body cloned for AVX-512
and AVX2 (``c.py``'s ``MUNET_CLONES``).
"""

from __future__ import annotations

from munet.compiler.codegen.c import prelude

LANES = 16  # partial sums per row: one AVX-512 register of floats
PARALLEL_MIN_ELEMENTS = 1 << 16

_HELPERS = f"""#define LANES {LANES}
/* float32 exp in float32 arithmetic (Cephes' expf: x = k ln2 + r with ln2 in two parts, e^r by its
   degree-7 polynomial, relative error below 2e-7), branch-free so a row's loop vectorizes 16 floats
   wide: 2^k is applied as two powers of two (k from -150 to 128), so subnormal results round once and
   large ones overflow to inf; exp(-inf) = 0, NaN stays NaN. */
static inline float munet_rows_expf(float x) {{
    float xc = x != x ? 0.0f : x;
    xc = xc < -104.0f ? -104.0f : xc > 89.0f ? 89.0f : xc;
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float k = (xc * 1.44269504088896341f + shift) - shift;
    const float r = (xc - k * 0.693359375f) - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    const int32_t ki = (int32_t)k, k1 = ki >> 1, k2 = ki - k1;
    const int32_t b1 = (k1 + 127) << 23, b2 = (k2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    const float y = (p * s1) * s2;
    return x != x ? x : y;
}}
/* the largest value of the row that is not NaN (-inf for none): a NaN anywhere still makes the row
   NaN, through its exp and the sum. LANES running maxima, so the loop vectorizes. */
static inline float munet_row_max(const float *x, int64_t n) {{
    float m[LANES];
    for (int l = 0; l < LANES; l++) m[l] = -INFINITY;
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) m[l] = x[j + l] > m[l] ? x[j + l] : m[l];
    float r = -INFINITY;
    for (int l = 0; l < LANES; l++) r = m[l] > r ? m[l] : r;
    for (; j < n; j++) r = x[j] > r ? x[j] : r;
    return r;
}}
static inline float munet_lanes_total(const float *s, float tail) {{
    float t = 0.0f;
    for (int l = 0; l < LANES; l++) t += s[l];
    return t + tail;
}}
"""

_BODIES = """MUNET_CLONES static void softmax_part(const float *restrict x, float *restrict y, int64_t r0, int64_t r1, int64_t n) {
    for (int64_t r = r0; r < r1; r++) {
        const float *restrict xr = x + r * n;
        float *restrict yr = y + r * n;
        const float m = munet_row_max(xr, n);
        float s[LANES] = {0};
        float tail = 0.0f;
        int64_t j = 0;
        for (; j + LANES <= n; j += LANES)
            for (int l = 0; l < LANES; l++) {
                const float e = munet_rows_expf(xr[j + l] - m);
                yr[j + l] = e;
                s[l] += e;
            }
        for (; j < n; j++) {
            const float e = munet_rows_expf(xr[j] - m);
            yr[j] = e;
            tail += e;
        }
        const float total = munet_lanes_total(s, tail);
        for (j = 0; j < n; j++) yr[j] = yr[j] / total;
    }
}
MUNET_CLONES static void softmax_backward_part(const float *restrict g, const float *restrict y, float *restrict dx, int64_t r0,
                                                       int64_t r1, int64_t n) {
    for (int64_t r = r0; r < r1; r++) {
        const float *restrict gr = g + r * n, *restrict yr = y + r * n;
        float *restrict dr = dx + r * n;
        float s[LANES] = {0};
        float tail = 0.0f;
        int64_t j = 0;
        for (; j + LANES <= n; j += LANES)
            for (int l = 0; l < LANES; l++) {
                const float gy = gr[j + l] * yr[j + l];
                dr[j + l] = gy;
                s[l] += gy;
            }
        for (; j < n; j++) {
            const float gy = gr[j] * yr[j];
            dr[j] = gy;
            tail += gy;
        }
        const float total = munet_lanes_total(s, tail);
        for (j = 0; j < n; j++) dr[j] = dr[j] - yr[j] * total;
    }
}
MUNET_CLONES static void standardize_part(const float *restrict x, float *restrict xhat, float *restrict rstd, int64_t r0, int64_t r1,
                                                  int64_t n, float eps, int64_t center) {
    for (int64_t r = r0; r < r1; r++) {
        const float *restrict xr = x + r * n;
        float *restrict out = xhat + r * n;
        float s[LANES] = {0};
        float tail = 0.0f;
        int64_t j = 0;
        float mean = 0.0f;
        if (center) {
            for (; j + LANES <= n; j += LANES)
                for (int l = 0; l < LANES; l++) s[l] += xr[j + l];
            for (; j < n; j++) tail += xr[j];
            mean = munet_lanes_total(s, tail) / (float)n;
            for (int l = 0; l < LANES; l++) s[l] = 0.0f;
            tail = 0.0f;
        }
        for (j = 0; j + LANES <= n; j += LANES)
            for (int l = 0; l < LANES; l++) {
                const float c = center ? xr[j + l] - mean : xr[j + l];
                out[j + l] = c;
                s[l] += c * c;
            }
        for (; j < n; j++) {
            const float c = center ? xr[j] - mean : xr[j];
            out[j] = c;
            tail += c * c;
        }
        const float scale = 1.0f / sqrtf(munet_lanes_total(s, tail) / (float)n + eps);
        rstd[r] = scale;
        for (j = 0; j < n; j++) out[j] = out[j] * scale;
    }
}
"""


def _entry(name: str, params: str, args: str) -> str:
    """An exported entry splitting rows ``[0, rows)`` over the OpenMP team, or running them here."""
    return f"""void munet_rows_{name}({params}, int64_t rows, int64_t n, {"float eps, int64_t center, " if name == "standardize" else ""}int64_t threads) {{
#ifdef _OPENMP
    if (threads > 1 && rows > 1 && rows * n >= {PARALLEL_MIN_ELEMENTS}) {{
        long done = 0;
        #pragma omp parallel num_threads(threads)
        {{
            const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
            {name}_part({args}, rows * t / nt, rows * (t + 1) / nt, n{", eps, center" if name == "standardize" else ""});
            munet_task_done(&done);
            munet_wait_awake(&done, nt);
        }}
        return;
    }}
#endif
    (void)threads;
    {name}_part({args}, 0, rows, n{", eps, center" if name == "standardize" else ""});
}}
"""


def render_rows() -> str:
    """The translation unit of the row kernels (see the module docstring)."""
    entries = [
        _entry("softmax", "const float *x, float *y", "x, y"),
        _entry("softmax_backward", "const float *g, const float *y, float *dx", "g, y, dx"),
        _entry("standardize", "const float *x, float *xhat, float *rstd", "x, xhat, rstd"),
    ]
    return "\n".join([*prelude(), _HELPERS, _BODIES, *entries])
