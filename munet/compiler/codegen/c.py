"""Render a kernel IR :class:`Kernel` as one C function.

``render_c(kernel) -> str`` gives a translation unit exporting
``void <kernel.name>(void *const *in, void *const *out, const double *p, int threads)``:
``in``/``out`` are data pointers of the C-contiguous buffers, ``p`` the runtime scalars,
``threads`` how many OpenMP threads a large kernel may use (the caller passes MuNet's
thread count, the one NumPy's BLAS uses: spinning threads on a busy machine cost more
than they save). Dimensions that every
load walks contiguously are collapsed, so a plain elementwise chain is one flat loop that
the compiler vectorizes (innermost loops are marked free of loop-carried dependences: an
output aliases an input only at the index being written); the outermost loop is split
across cores with OpenMP when the kernel is large. A load that walks another dim than the
last contiguously (a transpose) is copied tile by tile into a local array first. Float math
is IEEE per operation, in the kernel's dtype (the build uses ``-ffp-contract=off``, no
fast-math), so arithmetic matches NumPy bit for bit; float32 ``exp`` is computed inline
(``munet_expf``: correctly rounded but for ~1e-13 of the cases, where NumPy's SIMD ``exp``
is within 2 ulp) so loops containing it vectorize; ``log``, ``tanh`` and float64 ``exp``
come from the C library and may differ from NumPy's by an ulp. Reductions: see
:func:`render_reduction`.
"""

from __future__ import annotations

import itertools
import re

from munet.backends.cpu.special_functions import ERFINV_CENTRAL, ERFINV_TAIL
from munet.compiler.codegen.c_team import TEAM_TASKS
from munet.compiler.codegen.kernel import (
    Apply,
    Const,
    Index,
    Kernel,
    Load,
    Param,
    Reduce,
    StoreFull,
    contiguous_strides,
)
from munet.ops._scalar import BOOL, FLOAT, INT, kind

C_TYPES = {"f32": "float", "f64": "double", "bool": "unsigned char", "i64": "int64_t"}
PARALLEL_MIN_ELEMENTS = 1 << 16
# An elementwise kernel with a transposed load walks tiles of TILE_ROWS (the dim that load walks
# contiguously) x TILE_COLS (the last dim), copying that load's tile into a local array first.
TILE_ROWS = 16
CHUNK = 4096  # a large flat kernel's elements per OpenMP work item
CLONE_MIN_ELEMENTS = 1 << 14  # smaller kernels get no AVX-512/AVX2 clones (see _CLONES)
TILE_COLS = 256
# Outputs alias inputs only at the index being written (the memory plan's in-place rule), so an
# innermost loop carries no dependence; saying so lets gcc vectorize kernels with many pointers
# (its runtime alias checks give up past ~10 pointer pairs: the AdamW update has 10 buffers).
_NO_LOOP_CARRIED_DEPENDENCE = (
    "#if defined(__clang__)",
    "#pragma clang loop vectorize(assume_safety)",
    "#elif defined(__GNUC__)",
    "#pragma GCC ivdep",
    "#endif",
)

# float32 exp without a library call, so loops containing it vectorize (a call to expf keeps the
# whole loop scalar: GELU's backward was 4x slower). In double: x = k ln2 + r, |r| <= ln2/2, exp(r)
# by its degree-11 Taylor polynomial (truncation < 1e-14), times 2^k built from the exponent bits;
# the float result is the exact exp correctly rounded except within ~1e-13 of a rounding boundary,
# so it is at least as accurate as the C library's expf. Outside [-104, 89] it is 0 or inf; NaN stays NaN.
_EXPF = """static inline float munet_expf(float xf) {
    double x = (double)xf;
    x = x < -104.0 ? -104.0 : x;
    x = x > 89.0 ? 89.0 : x;
    const double shift = 0x1.8p52;
    const double t = x * 0x1.71547652b82fep0 + shift;
    const double k = t - shift;
    const double r = x - k * 0x1.62e42fefa39efp-1;
    double p = 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits - 0x4338000000000000ULL + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return (float)(p * scale);
}
"""
# x86-64 with gcc and glibc: the single-threaded body is also compiled for AVX-512 and AVX2 and the
# widest the CPU has is picked at load time (an ifunc), so cached binaries stay portable; without FMA
# contraction (-ffp-contract=off) and without fast-math (no reassociation) every clone computes the
# same bits, 8 or 16 floats wide (GELU's kernel: 55 -> 31 ms with AVX2; a formula's GELU 6.5 -> 4.5 ms
# with AVX-512, docs/perf/eager.md). gcc does not clone an
# OpenMP region, so a multi-threaded kernel's region only splits the outermost loop and calls a
# cloned body on each thread's share (``_with_clones``). Every C renderer (this one, ``c_formula``,
# ``c_rows``) marks its bodies with this one macro, defined in the prelude.
_CLONES = """#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 6 && defined(__GLIBC__)
#define MUNET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MUNET_CLONES
#endif
"""
_HEADER = [
    "#include <math.h>",
    "#include <stdint.h>",
    "#include <string.h>",
    "#ifdef _OPENMP",
    "#include <omp.h>",
    "#endif",
    TEAM_TASKS,
    _CLONES,
    _EXPF,
]


# float32 erf without a library call, in float32 arithmetic and branch-free (both pieces are computed,
# one is selected), so a loop containing it vectorizes 8 floats wide in the AVX2 clone (gcc if-converts
# the selects only with -fno-trapping-math, which build.py passes). Within 0.850 ulp of the exact erf
# (tests/compiler/test_erff_accuracy.py: every float32 in [2^-15, 4), a sample below); coefficients
# derived by benchmarks/fit_erff.py; polynomials by Estrin's scheme (shorter dependency chains than
# Horner's: the GELU kernel ran 1.17x faster).
# |x| < ERF_SPLIT: erf(x) = x + x * h(x^2), h of degree 6.
# Above: erf(x) = 1 - exp(y(u)), u = |x| - ERF_SPLIT, y ~ log(erfc) of degree 7 (|x| clamped at
# ERF_CLAMP, where erf rounds to 1); y = k ln2 + r with |r| <= ln2/2 (k by the 1.5 * 2^23 rounding
# trick; ln2 in two parts; y0 - k ln2_hi, with y0 y's constant term, is exact near the split, where
# erfc is largest, so r carries few roundings), exp(r) = 1 + r q(r) with q of degree 5, and 1 - 2^k exp(r) formed as
# (1 - 2^k) - 2^k (r q) (1 - 2^k is exact). NaN stays NaN; erf(-0) = -0.
ERF_SPLIT, ERF_CLAMP = 0.8125, 3.9375
ERF_SMALL = (0.12837916612625122, -0.3761262893676758, 0.11283611506223679, -0.026853878051042557,
             0.005184485577046871, -0.0007913446170277894, 7.178754458436742e-05)  # fmt: skip
ERF_LARGE = (-1.3841527700424194, -2.3274617195129395, -0.8174933195114136, -0.049737367779016495,
             0.011853923089802265, -0.0020961409900337458, 0.0001847155363066122, 4.2543069866951555e-06)  # fmt: skip
ERF_EXP = (1.0, 0.4999999403953552, 0.1666652113199234, 0.04166825860738754, 0.00836866907775402,
           0.0013821362517774105)  # fmt: skip


def _estrin_f32(name: str, coeffs: tuple, var: str) -> list:
    """C lines setting float ``name`` to the polynomial ``coeffs`` (lowest degree first) at ``var`` by
    Estrin's scheme: pairs ``c0 + c1 v``, then pairs of those with ``v^2``, ...: short dependency chains."""
    lines, terms, power, level = [], [f"{c!r}f" for c in coeffs], var, 0
    while len(terms) > 1:
        merged = []
        for i in range(0, len(terms), 2):
            if i + 1 == len(terms):
                merged.append(terms[i])
                continue
            lines.append(f"    const float {name}{level}_{i // 2} = {terms[i]} + {terms[i + 1]} * {power};")
            merged.append(f"{name}{level}_{i // 2}")
        terms, level = merged, level + 1
        if len(terms) > 1:
            lines.append(f"    const float {name}_{var}{2**level} = {power} * {power};")
            power = f"{name}_{var}{2**level}"
    return [*lines, f"    const float {name} = {terms[0]};"]


def _erff_source() -> str:
    y0 = f"{ERF_LARGE[0]!r}f"
    lines = [
        "static inline float munet_erff(float x) {",
        "    const float a = fabsf(x);",
        "    const float t = a * a;",
        *_estrin_f32("h", ERF_SMALL, "t"),
        "    const float small = a + a * h;",
        f"    const float c = a > {ERF_CLAMP!r}f ? {ERF_CLAMP!r}f : a;",
        f"    const float u = c - {ERF_SPLIT!r}f;",
        *_estrin_f32("p", ERF_LARGE[1:], "u"),
        "    const float up = u * p;",
        f"    const float n = (up + {y0}) * 0x1.715476p0f + 0x1.8p23f;",
        "    const float k = n - 0x1.8p23f;",
        f"    const float r = ({y0} - k * 0x1.62e4p-1f) + (up - k * 0x1.7f7d1cp-20f);",
        *_estrin_f32("q", ERF_EXP, "r"),
        "    uint32_t bits;",
        "    memcpy(&bits, &n, sizeof bits);",
        "    bits = (bits - 0x4B400000u + 127u) << 23;",
        "    float scale;",
        "    memcpy(&scale, &bits, sizeof scale);",
        "    const float large = (1.0f - scale) - scale * (r * q);",
        f"    return copysignf(a < {ERF_SPLIT!r}f ? small : large, x);",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _floor_divide_source(ctype: str, f: str) -> str:
    """NumPy's float floor_divide (``npy_divmod``): exact, unlike ``floor(a / b)``."""
    return f"""static inline {ctype} munet_floor_divide{f}({ctype} a, {ctype} b) {{
    if (b == 0) return a / b;
    const {ctype} mod = fmod{f}(a, b);
    {ctype} div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    if (div == 0) return copysign{f}(0, a / b);
    {ctype} floordiv = floor{f}(div);
    if (div - floordiv > 0.5{f}) floordiv += 1;
    return floordiv;
}}
"""


def _erfinv_source() -> str:
    """erfinv in double: Giles' approximation and Newton steps on the C library's erf/erfc."""

    def horner(coeffs):
        text = repr(coeffs[0])
        for c in coeffs[1:]:
            text = f"({text}) * v + {c!r}"
        return text

    return f"""static inline double munet_erfinv(double y) {{
    const double a = fabs(y);
    if (!(a <= 1.0)) return NAN;
    if (a == 1.0) return copysign(INFINITY, y);
    const double w = -log((1.0 - y) * (1.0 + y));
    double v, x;
    if (w < 5.0) {{ v = w - 2.5; x = ({horner(ERFINV_CENTRAL)}) * y; }}
    else {{ v = sqrt(w) - 3.0; x = ({horner(ERFINV_TAIL)}) * y; }}
    for (int i = 0; i < 3; i++) {{
        const double density = 1.1283791670955126 * exp(-x * x);
        if (density == 0.0) break;
        if (a >= 0.5) {{
            const double upper = erfc(fabs(x));
            x += copysign(1.0, y) * (log(upper) - log(1.0 - a)) * upper / density;
        }} else {{
            x -= (erf(x) - y) / density;
        }}
    }}
    return x;
}}
"""


def _frexp_source(ctype: str, f: str) -> str:
    """frexp's two parts as the vocabulary defines them (C leaves the exponent of inf and NaN unspecified)."""
    return f"""static inline {ctype} munet_frexp_mantissa{f}({ctype} x) {{
    int e;
    return isfinite(x) && x != 0 ? frexp{f}(x, &e) : x;
}}
static inline {ctype} munet_frexp_exponent{f}({ctype} x) {{
    int e = 0;
    if (isfinite(x) && x != 0) frexp{f}(x, &e);
    return ({ctype})e;
}}
"""


_POWI = """static inline int64_t munet_powi(int64_t a, int64_t b) {
    uint64_t r = 1, x = (uint64_t)a;
    for (; b > 0; b >>= 1) { if (b & 1) r *= x; x *= x; }
    return (int64_t)r;
}
"""
_HEADER += [_erff_source(), _floor_divide_source("float", "f"), _floor_divide_source("double", ""), _erfinv_source(),
            _frexp_source("float", "f"), _frexp_source("double", ""), _POWI]  # fmt: skip


def prelude() -> list:
    """The lines every generated C translation unit starts with: includes, the AVX2 clone macro
    and the inline helpers (``munet_expf``, ``munet_erff``, ...) that :func:`render_c_apply` calls."""
    return list(_HEADER)


_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==",
          "ne": "!="}  # fmt: skip
# float scalar ops that are one C library call (float32: the ``f``-suffixed function)
_LIBM = {"fmod": "fmod", "pow": "pow", "atan2": "atan2", "hypot": "hypot", "copysign": "copysign", "fmax": "fmax",
         "fmin": "fmin", "abs": "fabs", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
         "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
         "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh",
         "acosh": "acosh", "atanh": "atanh", "erfc": "erfc", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
         "rint": "rint", "exp": "exp", "erf": "erf", "floor_divide": "munet_floor_divide",
         "frexp_mantissa": "munet_frexp_mantissa", "frexp_exponent": "munet_frexp_exponent",
         "nextafter": "nextafter"}  # fmt: skip
_FLOAT_FORMS = {
    "maximum": "({0} >= {1} || {0} != {0}) ? {0} : {1}",  # NumPy's maximum: NaN propagates
    "minimum": "({0} <= {1} || {0} != {0}) ? {0} : {1}",
    "neg": "-{0}",
    "signbit": "(signbit({0}) != 0)",
    "isnan": "({0} != {0})",
    "isinf": "(isinf({0}) != 0)",
}
_INT_FORMS = {  # int64_t; add, sub, mul, neg and shift_left wrap through uint64_t (signed overflow is undefined in C)
    "add": "(int64_t)((uint64_t){0} + (uint64_t){1})",
    "sub": "(int64_t)((uint64_t){0} - (uint64_t){1})",
    "mul": "(int64_t)((uint64_t){0} * (uint64_t){1})",
    "pow": "munet_powi({0}, {1})",
    "maximum": "{0} >= {1} ? {0} : {1}",
    "minimum": "{0} <= {1} ? {0} : {1}",
    "bitwise_and": "{0} & {1}",
    "bitwise_or": "{0} | {1}",
    "bitwise_xor": "{0} ^ {1}",
    "bitwise_not": "~{0}",
    "shift_left": "(int64_t)((uint64_t){0} << {1})",
    "shift_right": "{0} >> {1}",
    "neg": "(int64_t)(0 - (uint64_t){0})",
    "abs": "({0} < 0 ? (int64_t)(0 - (uint64_t){0}) : {0})",
}
_BOOL_FORMS = {
    "add": "{0} | {1}",
    "mul": "{0} & {1}",
    "maximum": "{0} | {1}",
    "minimum": "{0} & {1}",
    "logical_and": "{0} & {1}",
    "logical_or": "{0} | {1}",
    "logical_xor": "{0} ^ {1}",
    "logical_not": "!{0}",
    "bitwise_and": "{0} & {1}",
    "bitwise_or": "{0} | {1}",
    "bitwise_xor": "{0} ^ {1}",
    "bitwise_not": "!{0}",
}
# (op, kind) pairs of the vocabulary with no C form: C has no defined integer division by zero
UNRENDERED = {("floor_divide", INT): "C does not define an integer division by zero",
              ("fmod", INT): "C does not define an integer division by zero"}  # fmt: skip


def render_c_apply(e, args: list) -> str:
    """The C text of scalar op ``Apply`` ``e`` whose arguments render as ``args``."""
    if e.op == "where":
        return f"{args[0]} ? {args[1]} : {args[2]}"
    if e.op == "cast":
        if e.dtype == "bool":
            return f"({args[0]} != 0)"  # NaN is true
        return f"({C_TYPES[e.dtype]}){args[0]}"
    operand = kind(e.args[0].dtype)
    wrapping = operand == INT and e.op in _INT_FORMS
    if e.op in _INFIX and not (operand == BOOL and e.op in ("add", "mul")) and not wrapping:
        return f"{args[0]} {_INFIX[e.op]} {args[1]}"
    if operand == FLOAT:
        if e.op in _FLOAT_FORMS:
            return _FLOAT_FORMS[e.op].format(*args)
        if e.op == "exp" and e.dtype == "f32":
            return f"munet_expf({args[0]})"
        if e.op == "erf" and e.dtype == "f32":
            return f"munet_erff({args[0]})"
        if e.op == "erfinv":
            return f"({C_TYPES[e.dtype]})munet_erfinv((double){args[0]})"
        if e.op in _LIBM:
            return f"{_LIBM[e.op]}{'f' if e.dtype == 'f32' else ''}({', '.join(args)})"
    form = (_INT_FORMS if operand == INT else _BOOL_FORMS if operand == BOOL else {}).get(e.op)
    if form is None:
        reason = UNRENDERED.get((e.op, operand), "the vocabulary has no such form")
        raise RuntimeError(f"render_c: internal error: scalar op '{e.op}' on {operand} operands: {reason}")
    return form.format(*args)


def _literal(value: float, dtype: str) -> str:
    if dtype == "bool":
        return "1" if value else "0"
    if dtype == "i64":  # truncated toward zero, wrapped to 64 bits (written unsigned: -2**63 has no signed literal)
        return f"((int64_t){int(value) % 2**64}ULL)"
    if value != value:
        return "NAN"
    if value in (float("inf"), float("-inf")):
        return ("-" if value < 0 else "") + "INFINITY"
    text = repr(float(value))
    return f"{text}f" if dtype == "f32" else text


def collapse(shape: tuple, strides_list: list) -> tuple:
    """Merge adjacent dims that every stride vector walks as one; drop size-1 dims."""
    dims = [(s, [st[d] for st in strides_list]) for d, s in enumerate(shape) if s != 1]
    merged: list = []
    for size, strides in dims:
        if merged:
            prev_size, prev_strides = merged[-1]
            if all(ps == st * size for ps, st in zip(prev_strides, strides)):
                merged[-1] = (prev_size * size, strides)
                continue
        merged.append((size, strides))
    shape_out = tuple(s for s, _ in merged)
    per_vector = [tuple(m[1][k] for m in merged) for k in range(len(strides_list))]
    return shape_out, per_vector


class _Emitter:
    """Emits each distinct expression once as a ``const`` local; returns C expressions."""

    def __init__(self, index_of_load, tile_of_load=None):
        self.lines: list[str] = []
        self.names: dict = {}
        self.index_of_load = index_of_load
        self.tile_of_load = tile_of_load or {}  # load -> C expression reading its transposed tile copy

    def emit(self, e) -> str:
        if isinstance(e, Const):
            return _literal(e.value, e.dtype)
        if isinstance(e, Param):
            return f"(({C_TYPES[e.dtype]})p[{e.index}])"
        name = self.names.get(e)
        if name is not None:
            return name
        text = self._text(e)
        name = f"t{len(self.names)}"
        self.names[e] = name
        self.lines.append(f"const {C_TYPES[e.dtype]} {name} = {text};")
        return name

    def _text(self, e) -> str:
        if isinstance(e, Load):
            if e in self.tile_of_load:
                return self.tile_of_load[e]
            return f"in{e.buffer}[{self.index_of_load(e)}]"
        if isinstance(e, Index):
            return f"(int64_t)({self.index_of_load(e)})"
        if isinstance(e, Apply):
            return render_c_apply(e, [self.emit(x) for x in e.args])
        if isinstance(e, Reduce):
            raise TypeError("render_c: a Reduce inside another Reduce (the kernel IR does not nest them)")
        raise TypeError(f"render_c: unknown expression {e!r}")


def _loads(kernel: Kernel) -> list:
    found, seen = [], set()

    def walk(e):
        if e in seen:
            return
        seen.add(e)
        if isinstance(e, (Load, Index)):
            found.append(e)
        for a in getattr(e, "args", ()):
            walk(a)

    for st in kernel.stores:
        walk(st.expr)
    return found


def render_c(kernel: Kernel, *, large: bool = False) -> str:
    """C source for ``kernel`` (an elementwise kernel, or a reduction kernel: see ``render_reduction``).

    ``large``: compile the AVX2 clone whatever the kernel's size (a slab that a caller runs many
    times, ``c_slabs.py``)."""
    if kernel.reduce_shape:
        return render_reduction(kernel, large=large)
    loads = _loads(kernel)
    out_strides = contiguous_strides(kernel.shape)
    vectors = [out_strides] + [ld.strides for ld in loads]
    shape, collapsed = collapse(kernel.shape, vectors)
    by_load = {ld: collapsed[k + 1] for k, ld in enumerate(loads)}
    rank = len(shape)
    idx = [f"i{d}" for d in range(rank)]

    def index(strides, offset=0) -> str:
        terms = [f"{i}" if s == 1 else f"{i} * {s}" for i, s in zip(idx, strides) if s != 0]
        if offset:
            terms.append(str(offset))
        return " + ".join(terms) or "0"

    tiled = _tiled_dim(shape, list(by_load.values()))
    last = rank - 1
    # loads walking the tiled dim contiguously are copied per tile into a local array, transposed,
    # so the tile's inner loop reads everything contiguously and vectorizes
    transposed = [
        ld
        for ld in loads
        if isinstance(ld, Load) and tiled is not None and by_load[ld][tiled] == 1 and by_load[ld][last] not in (0, 1)
    ]
    tile_of_load = {ld: f"tile{k}[i{tiled} - i{tiled}b][i{last} - i{last}b]" for k, ld in enumerate(transposed)}
    body = _Emitter(lambda ld: index(by_load[ld], ld.offset), tile_of_load)
    stores = [f"out{st.buffer}[{index(collapsed[0])}] = {body.emit(st.expr)};" for st in kernel.stores]

    lines = list(_HEADER)
    lines.append(f"void {kernel.name}(void *const *in, void *const *out, const double *p, int threads) {{")
    for k, dt in enumerate(kernel.inputs):
        lines.append(f"    const {C_TYPES[dt]} *in{k} = (const {C_TYPES[dt]} *)in[{k}];")
    for k, dt in enumerate(kernel.outputs):
        lines.append(f"    {C_TYPES[dt]} *out{k} = ({C_TYPES[dt]} *)out[{k}];")
    indent = "    "
    inner = [*body.lines, *stores]
    if rank == 0:
        lines += [indent + "{", *(indent * 2 + s for s in inner), indent + "}", "}"]
        return _with_clones(lines, kernel.name, CLONE_MIN_ELEMENTS if large else 1)
    code = _Code(lines)
    parallel = kernel.numel >= PARALLEL_MIN_ELEMENTS
    for d in range(rank - 1):
        head = (
            f"for (int64_t i{d}b = 0; i{d}b < {shape[d]}; i{d}b += {TILE_ROWS})"
            if d == tiled
            else _for(f"i{d}", shape[d])
        )
        code.open(head, parallel and d == 0)
    if tiled is None and parallel and rank == 1:  # chunks across threads, each a vectorized loop
        code.open(f"for (int64_t i0c = 0; i0c < {shape[0]}; i0c += {CHUNK})", True)
        code.lines.extend(_NO_LOOP_CARRIED_DEPENDENCE)
        code.open(f"for (int64_t i0 = i0c; i0 < (i0c + {CHUNK} < {shape[0]} ? i0c + {CHUNK} : {shape[0]}); i0++)")
        code.add(*inner)
        code.close(2)
    elif tiled is None:
        code.lines.extend(_NO_LOOP_CARRIED_DEPENDENCE)
        code.open(_for(f"i{last}", shape[last]))
        code.add(*inner)
        code.close(rank)
    else:  # tiles of (tiled, last), so a transposed read stays in cache
        code.open(f"for (int64_t i{last}b = 0; i{last}b < {shape[last]}; i{last}b += {TILE_COLS})")
        ranges = {
            d: f"for (int64_t i{d} = i{d}b; i{d} < (i{d}b + {t} < {shape[d]} ? i{d}b + {t} : {shape[d]}); i{d}++)"
            for d, t in ((tiled, TILE_ROWS), (last, TILE_COLS))
        }
        for k, ld in enumerate(transposed):
            code.add(f"{C_TYPES[ld.dtype]} tile{k}[{TILE_ROWS}][{TILE_COLS}];")
            code.open(ranges[last])
            code.open(ranges[tiled])
            code.add(f"{tile_of_load[ld]} = in{ld.buffer}[{index(by_load[ld], ld.offset)}];")
            code.close(2)
        code.open(ranges[tiled])
        code.lines.extend(_NO_LOOP_CARRIED_DEPENDENCE)
        code.open(ranges[last])
        code.add(*inner)
        code.close(rank + 2)
    lines.append("    (void)threads;")
    lines.append("}")
    return _with_clones(lines, kernel.name, max(kernel.numel, CLONE_MIN_ELEMENTS if large else 0))


# How each function of a rendered kernel opens: the entry (``render_c``) and the cloned part (``_with_clones``)
_FUNCTION_OPENINGS = ("int threads) {", "int64_t hi) {")


def with_run_time_counts(text: str, counts: list, elements: str) -> str:
    """``text``, a kernel ``render_c(..., large=True)`` wrote whose sizes were read back as counts
    (``c_slabs.py``, ``c_symbolic.py``), with the C declarations ``counts`` (each reading its count from
    ``p``) at the start of each of its functions, and its OpenMP region entered only when ``elements`` (a
    C expression in the counts) reaches ``PARALLEL_MIN_ELEMENTS``, as a static kernel decides when rendered."""
    text = text.replace(
        "    if (threads > 1)", f"    if (threads > 1 && (double){elements} >= {PARALLEL_MIN_ELEMENTS})"
    )
    lines = []
    for line in text.split("\n"):
        lines.append(line)
        if line.endswith(_FUNCTION_OPENINGS):
            lines += ["    " + c for c in counts]
    return "\n".join(lines)


_PARALLEL_LOOP = re.compile(r"^(\s*)for \(int64_t (\w+) = 0; \2 < (\d+); \2(?:\+\+| \+= (\d+))\) \{$")


def _with_clones(lines: list, name: str, elements: int) -> str:
    """The kernel ``void name(...)`` of ``lines`` as an entry calling a cloned body.

    A body with an OpenMP loop (``_Code.open(..., parallel=True)``: the pragma block, then the
    outermost loop ``for (v = 0; v < n; v += step)``) becomes ``name_part(..., lo, hi)``, that loop
    from ``lo`` to ``hi``: the serial entry calls it on the whole range, the OpenMP region on each
    thread's static share (whole steps), so every thread runs the cloned code. Each iteration of
    that loop writes its own outputs (elements, or whole reductions of kept indices), so the split
    changes no bits. Kernels of fewer than ``CLONE_MIN_ELEMENTS`` elements stay as they are:
    compiling the clones costs more than a wider vector gains there.
    """
    if elements < CLONE_MIN_ELEMENTS:
        return "\n".join(lines) + "\n"
    at = next(i for i, line in enumerate(lines) if line.startswith(f"void {name}("))
    head, body = lines[:at], lines[at + 1 :]
    signature = "(void *const *in, void *const *out, const double *p, int threads)"
    if "#ifdef _OPENMP" not in body:
        out = [*head, f"MUNET_CLONES static void {name}_serial{signature} {{", *body, ""]
        out.append(f"void {name}{signature} {{ {name}_serial(in, out, p, threads); }}")
        return "\n".join(out) + "\n"
    pragma = body.index("#ifdef _OPENMP")
    loop = _PARALLEL_LOOP.match(body[pragma + 3])
    if loop is None:
        raise AssertionError(
            f"internal error: the OpenMP loop of kernel {name} has an unexpected form: {body[pragma + 3]}"
        )
    indent, var, count, step = loop.group(1), loop.group(2), int(loop.group(3)), int(loop.group(4) or 1)
    part = body[:pragma] + [f"{indent}for (int64_t {var} = lo; {var} < hi; {var} += {step}) {{"] + body[pragma + 4 :]
    # the count is written once, as the loop's bound was: c_slabs.render_c_sized reads it at run time
    out = [*head, f"MUNET_CLONES static void {name}_part{signature[:-1]}, int64_t lo, int64_t hi) {{", *part, ""]
    out += [
        f"void {name}{signature} {{",
        f"    const int64_t count = {count};",
        "#ifdef _OPENMP",
        "    if (threads > 1) {",
        "        long done = 0;",
        "        #pragma omp parallel num_threads(threads)",
        "        {",
        f"            const int64_t t = omp_get_thread_num(), n = omp_get_num_threads(), steps = (count + {step} - 1) / {step};",
        f"            const int64_t lo = steps * t / n * {step}, hi = steps * (t + 1) / n * {step};",
        f"            {name}_part(in, out, p, threads, lo, hi < count ? hi : count);",
        "            munet_task_done(&done);",
        "            munet_wait_awake(&done, n);",
        "        }",
        "        return;",
        "    }",
        "#endif",
        f"    {name}_part(in, out, p, threads, 0, count);",
        "}",
    ]
    return "\n".join(out) + "\n"


def _tiled_dim(shape: tuple, load_strides: list):
    """The dim to tile with the last one when a large load walks it contiguously (a transposed read), else None."""
    if len(shape) < 2 or shape[-1] < TILE_ROWS:
        return None
    for strides in load_strides:
        if strides[-1] in (0, 1):  # contiguous, or one value per row (a per-channel bias): no tile
            continue
        for d in range(len(shape) - 1):
            if strides[d] == 1 and shape[d] >= TILE_ROWS:
                return d
    return None


# reductions ---------------------------------------------------------------------------------------------

LANES = 8  # independent accumulators per sum, so the inner loop vectorizes without reassociation
BLOCK = 128  # elements per block: a sum's lanes are folded into a compensated total, a max is halved
WINDOW_MAX = 64  # the largest reduction space an argmax kernel walks (as scalars, per kept index)
COLUMNS = 2048  # kept indices accumulated side by side when the reduced dims are the outer ones
# (whole rows: 256-wide blocks of 4 KiB-strided rows ran 2.5x slower, the prefetcher loses them)

# The compensation of a total that reached +-inf is NaN (inf - inf); a total that is inf or NaN stays
# so, and is then the result (``munet_total``): NumPy's sum gives inf there, not NaN.
_COMPENSATED_ADD = """static inline void munet_add(double *s, double *c, double x) {
    const double t = *s + x;
    *c += fabs(*s) >= fabs(x) ? (*s - t) + x : (x - t) + *s;
    *s = t;
}
static inline double munet_total(double s, double c) { return isfinite(s) ? s + c : s; }
"""


def _max_into(acc: str, v: str) -> str:
    return f"{acc} = ({acc} >= {v} || {acc} != {acc}) ? {acc} : {v};"  # NumPy's max: NaN propagates


def _reduction_parts(kernel: Kernel) -> tuple:
    """``(reduces, inside loads, outside loads)`` of a reduction kernel, each in first-seen order."""
    reduces, inside, outside, seen = [], [], [], set()

    def walk(e, within: bool):
        if (e, within) in seen:
            return
        seen.add((e, within))
        if isinstance(e, (Load, Index)):
            (inside if within else outside).append(e)
        elif isinstance(e, Reduce):
            if within:
                raise TypeError("render_c: a Reduce inside another Reduce (the kernel IR does not nest them)")
            if e not in reduces:
                reduces.append(e)
            walk(e.expr, True)
            if e.key is not None:
                walk(e.key, True)
        for a in getattr(e, "args", ()):
            walk(a, within)

    for st in kernel.stores:
        walk(st.expr, isinstance(st, StoreFull))
    return reduces, list(dict.fromkeys(inside)), list(dict.fromkeys(outside))


def reduction_layout(kernel: Kernel) -> str:
    """How ``render_reduction`` walks ``kernel``: ``'window'`` (an argmax), ``'columns'`` (reduced dims
    outer, kept indices side by side) or ``'rows'`` (reduced dims inner, in lanes). The order in
    which each kept index's sum is accumulated depends only on this and the reduction space."""
    return _reduction_geometry(kernel)[-1]


def _reduction_geometry(kernel: Kernel) -> tuple:
    """``(reduces, inside loads, outside loads, StoreFulls, (kept shape, kept strides), (reduced
    shape, reduced strides), layout)``: the collapsed loop nest of a reduction kernel."""
    reduces, inside, outside = _reduction_parts(kernel)
    fulls = [st for st in kernel.stores if isinstance(st, StoreFull)]
    k = len(kernel.shape)
    kept_vectors = (
        [contiguous_strides(kernel.shape)]
        + [ld.strides[:k] for ld in inside]
        + [sf.strides[:k] for sf in fulls]
        + [ld.strides for ld in outside]
    )
    kshape, kvecs = collapse(kernel.shape, kept_vectors)
    red_vectors = [ld.strides[k:] for ld in inside] + [sf.strides[k:] for sf in fulls]
    rshape, rvecs = collapse(kernel.reduce_shape, red_vectors)
    if 0 in kernel.reduce_shape:
        rshape, rvecs = (0,), [(0,)] * len(red_vectors)
    elif not rshape:
        rshape, rvecs = (1,), [(0,)] * len(red_vectors)
    n_in = len(inside)
    # the column loop when something walks the last kept dim contiguously and nothing that varies with
    # the kept index walks the last reduced dim contiguously (a per-row scalar such as LayerNorm's mean
    # is read once per row there)
    accesses = [(kvecs[1 + i], rvecs[i]) for i in range(n_in)]
    accesses += [(kvecs[1 + n_in + i], rvecs[n_in + i]) for i in range(len(fulls))]
    wants_columns = len(kshape) > 0 and any(kv[-1] == 1 for kv, _ in accesses)
    wants_rows = any(rv[-1] == 1 and any(kv) for kv, rv in accesses)
    if any(r.op == "argmax" for r in reduces):
        layout = "window"
    else:
        layout = "columns" if wants_columns and not wants_rows else "rows"
    return reduces, inside, outside, fulls, (kshape, kvecs), (rshape, rvecs), layout


def render_reduction(kernel: Kernel, *, large: bool = False) -> str:
    """C source for a reduction kernel (see the kernel IR's docstring for what it computes).

    Sums accumulate in double whatever the dtype: 8 lanes (the loop vectorizes without
    reassociating), folded every 128 elements into a compensated (Neumaier) total, so a float32
    sum is the exact sum correctly rounded up to ~1e-13 of ``sum(|x|)`` (NumPy's pairwise float32
    sum errs by up to ~1e-6 on long rows) and a float64 sum is as accurate as NumPy's pairwise one.
    When the reduced dims are the outer ones (a column sum: the bias gradient over a batch), up to
    2048 kept indices are accumulated side by side instead, walking the rows contiguously. A max
    over the inner dims halves each block of 128 in place (``_row_loops``). The order depends on
    neither the thread count nor the data, so results are reproducible.
    """
    reduces, inside, outside, fulls, (kshape, kvecs), (rshape, rvecs), layout = _reduction_geometry(kernel)
    m, n = len(kshape), len(rshape)
    n_in = len(inside)
    k_of = {ld: kvecs[1 + i] for i, ld in enumerate(inside)}
    k_of.update({ld: kvecs[1 + n_in + len(fulls) + i] for i, ld in enumerate(outside)})
    r_of = {ld: rvecs[i] for i, ld in enumerate(inside)}
    full_k = [kvecs[1 + n_in + i] for i in range(len(fulls))]
    full_r = [rvecs[n_in + i] for i in range(len(fulls))]
    kvars, rvars = [f"k{d}" for d in range(m)], [f"r{d}" for d in range(n)]

    def index(kstrides, rstrides=(), offset=0) -> str:
        pairs = list(zip(kvars, kstrides)) + list(zip(rvars, rstrides))
        terms = [v if s == 1 else f"{v} * {s}" for v, s in pairs if s != 0]
        if offset:
            terms.append(str(offset))
        return " + ".join(terms) or "0"

    def body(at: str) -> list:
        """The reduction loop's body at one full index: prologue, StoreFull writes, values into ``v<j>[at]``."""
        em = _Emitter(lambda ld: index(k_of[ld], r_of[ld], ld.offset))
        values = [em.emit(r.expr) for r in reduces]
        writes = [f"out{sf.buffer}[{index(kv, rv)}] = {em.emit(sf.expr)};" for sf, kv, rv in zip(fulls, full_k, full_r)]
        return [*em.lines, *writes, *(f"v{j}[{at}] = {v};" for j, v in enumerate(values))]

    def window_body(first: bool) -> list:
        """The window loop's body at one full index (``first``: the window's first cell): prologue,
        StoreFull writes, then each Reduce's step."""
        em = _Emitter(lambda ld: index(k_of[ld], r_of[ld], ld.offset))
        values = [em.emit(r.expr) for r in reduces]
        keys = [em.emit(r.key) if r.op == "argmax" else None for r in reduces]
        writes = [f"out{sf.buffer}[{index(kv, rv)}] = {em.emit(sf.expr)};" for sf, kv, rv in zip(fulls, full_k, full_r)]
        steps = []
        for j, (r, v, key) in enumerate(zip(reduces, values, keys)):
            if r.op == "sum":
                steps.append(f"tot{j} += (double){v};")
            elif r.op == "max":
                if _argmax_twin(reduces, r) is None:  # else the argmax's running maximum is this value
                    steps.append(_max_into(f"mx{j}", v))
            elif first:  # argmax: the first cell starts the maximum, whatever it holds
                steps += [f"best{j} = {v};", f"key{j} = {key};", f"nan{j} = {v} != {v} ? {key} : -1;"]
            else:  # a strictly greater cell replaces it; the last NaN wins (and makes the maximum NaN)
                steps.append(f"key{j} = {v} > best{j} ? {key} : key{j};")
                steps.append(f"best{j} = {v} > best{j} ? {v} : best{j};")
                steps.append(f"nan{j} = {v} != {v} ? {key} : nan{j};")
        return [*em.lines, *writes, *steps]

    def epilogue(result) -> list:
        """Reduced values, then the epilogue and the Stores at one kept index."""
        em = _Emitter(lambda ld: index(k_of[ld], (), ld.offset))
        lines = []
        for j, r in enumerate(reduces):
            lines.append(f"const {C_TYPES[r.dtype]} red{j} = {result(j, r)};")
            em.names[r] = f"red{j}"
        stores = [f"out{st.buffer}[{index(kvecs[0])}] = {em.emit(st.expr)};" for st in kernel.stores if st not in fulls]
        return lines + em.lines + stores

    total = kernel.numel * max(1, _prod(kernel.reduce_shape))
    out = [*_HEADER, _COMPENSATED_ADD]
    out.append(f"void {kernel.name}(void *const *in, void *const *out, const double *p, int threads) {{")
    for i, dt in enumerate(kernel.inputs):
        out.append(f"    const {C_TYPES[dt]} *in{i} = (const {C_TYPES[dt]} *)in[{i}];")
    for i, dt in enumerate(kernel.outputs):
        out.append(f"    {C_TYPES[dt]} *out{i} = ({C_TYPES[dt]} *)out[{i}];")
    code = _Code(out)
    if layout == "window":
        if _prod(kernel.reduce_shape) > WINDOW_MAX:
            raise TypeError(f"render_c: argmax over {_prod(kernel.reduce_shape)} elements (windows up to {WINDOW_MAX})")
        _window_loops(code, kshape, rshape, reduces, window_body, epilogue, total, kernel.shape, kernel.reduce_shape)
    elif layout == "columns":
        _column_loops(code, kshape, rshape, reduces, body, epilogue, total)
    else:
        _row_loops(code, kshape, rshape, reduces, body, epilogue, total)
    out.append("    (void)threads;")
    out.append("}")
    return _with_clones(out, kernel.name, max(total, CLONE_MIN_ELEMENTS if large else 0))


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class _Code:
    """Indented C lines with nested loops."""

    def __init__(self, lines: list):
        self.lines = lines
        self.depth = 1

    def add(self, *lines: str) -> None:
        self.lines.extend("    " * self.depth + s for s in lines)

    def open(self, head: str, parallel: bool = False) -> None:
        if parallel:
            self.lines.append("#ifdef _OPENMP")
            self.lines.append("    #pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)")
            self.lines.append("#endif")
        self.add(head + " {")
        self.depth += 1

    def close(self, count: int = 1) -> None:
        for _ in range(count):
            self.depth -= 1
            self.add("}")


def _for(var: str, size) -> str:
    return f"for (int64_t {var} = 0; {var} < {size}; {var}++)"


def _values(code, reduces, size) -> None:
    for j, r in enumerate(reduces):
        code.add(f"{C_TYPES[r.dtype]} v{j}[{size}];")


def _row_loops(code, kshape, rshape, reduces, body, epilogue, total) -> None:
    """Reduced dims innermost: per kept index, blocks of the last reduced dim, summed in lanes; a max
    halves each block in place (``v[i] = max(v[i], v[i + w])`` for w = 64, 32, ..., 1: loops gcc
    vectorizes, where the lanes' select did not vectorize and ran scalar)."""
    m, n = len(kshape), len(rshape)
    parallel = total >= PARALLEL_MIN_ELEMENTS and m > 0 and kshape[0] > 1
    for d in range(m):
        code.open(_for(f"k{d}", kshape[d]), parallel and d == 0)
    if not m:
        code.open("")
    for j, r in enumerate(reduces):
        code.add(f"double tot{j} = 0.0, cmp{j} = 0.0;" if r.op == "sum" else f"{C_TYPES[r.dtype]} mx{j} = -INFINITY;")
    _values(code, reduces, BLOCK)
    for d in range(n - 1):
        code.open(_for(f"r{d}", rshape[d]))
    last = rshape[-1]
    code.open(f"for (int64_t rb = 0; rb < {last}; rb += {BLOCK})")
    code.add(f"const int64_t bn = {last} - rb < {BLOCK} ? {last} - rb : {BLOCK};")
    # the block's values first (an elementwise loop), then the lanes: one loop doing both does not
    # vectorize (gcc 12 leaves a select feeding a float->double sum as a branch)
    code.lines.extend(_NO_LOOP_CARRIED_DEPENDENCE)
    code.open("for (int64_t b = 0; b < bn; b++)")
    code.add(f"const int64_t r{n - 1} = rb + b;", *body("b"))
    code.close()
    sums = [(j, r) for j, r in enumerate(reduces) if r.op == "sum"]
    for j, _ in sums:
        code.add(f"double lane{j}[{LANES}] = {{{', '.join(['0.0'] * LANES)}}};")
    if sums:
        code.add("int64_t b;")
    for j, _ in sums:
        code.add(
            f"for (b = 0; b + {LANES} <= bn; b += {LANES}) for (int l = 0; l < {LANES}; l++) lane{j}[l] += (double)v{j}[b + l];"
        )
        code.add(f"for (; b < bn; b++) lane{j}[0] += (double)v{j}[b];")
        a = [f"lane{j}[{i}]" for i in range(LANES)]
        tree = f"(({a[0]} + {a[1]}) + ({a[2]} + {a[3]})) + (({a[4]} + {a[5]}) + ({a[6]} + {a[7]}))"
        code.add(f"munet_add(&tot{j}, &cmp{j}, {tree});")
    for j, r in enumerate(reduces):
        if r.op == "max":  # a short block padded, then halved: each halving is an elementwise loop
            code.add(f"for (int64_t b = bn; b < {BLOCK}; b++) v{j}[b] = -INFINITY;")
            width = BLOCK // 2
            while width:
                code.add(f"for (int64_t i = 0; i < {width}; i++) {_max_into(f'v{j}[i]', f'v{j}[i + {width}]')}")
                width //= 2
            code.add(_max_into(f"mx{j}", f"v{j}[0]"))
    code.close()  # block loop
    code.close(n - 1)

    def result(j, r):
        return f"({C_TYPES[r.dtype]})munet_total(tot{j}, cmp{j})" if r.op == "sum" else f"mx{j}"

    code.add(*epilogue(result))
    code.close(max(m, 1))


def _argmax_twin(reduces: list, r: Reduce):
    """The position of an ``argmax`` of the same expression as ``max`` reduction ``r``, or None."""
    return next((j for j, a in enumerate(reduces) if a.op == "argmax" and a.expr == r.expr), None)


def _index_bound(index: Index, shape: tuple, reduce_shape: tuple) -> int:
    """The largest value ``index`` takes over the full space ``shape + reduce_shape``."""
    sizes = tuple(shape) + tuple(reduce_shape)
    return index.offset + sum(max(st, 0) * (n - 1) for st, n in zip(index.strides, sizes))


def _window_loops(code, kshape, rshape, reduces, body, epilogue, total, kshape_full, rshape_full) -> None:
    """Small reduction spaces (pooling windows, ``argmax``): per kept index, the window walked in
    scalars inside the innermost kept loop, which the compiler vectorizes once the constant-size
    window loops are unrolled. Sums are plain double sums here (a window is short)."""
    m = len(kshape)
    parallel = total >= PARALLEL_MIN_ELEMENTS and m > 1 and kshape[0] > 1
    for d in range(m - 1):
        code.open(_for(f"k{d}", kshape[d]), parallel and d == 0)
    if m:
        code.lines.extend(_NO_LOOP_CARRIED_DEPENDENCE)
        code.open(_for(f"k{m - 1}", kshape[m - 1]))
    else:
        code.open("")
    for j, r in enumerate(reduces):
        if r.op == "sum":
            code.add(f"double tot{j} = 0.0;")
        elif r.op == "max":
            if _argmax_twin(reduces, r) is None:
                code.add(f"{C_TYPES[r.dtype]} mx{j} = -INFINITY;")
        else:  # keys in 32 bits when they fit, so they vectorize as wide as float32 values
            key = "int32_t" if _index_bound(r.key, kshape_full, rshape_full) < 2**31 else "int64_t"
            code.add(f"{C_TYPES[r.expr.dtype]} best{j};", f"{key} key{j}, nan{j};")
    for k, cell in enumerate(
        itertools.product(*(range(size) for size in rshape))
    ):  # unrolled: the kept loop vectorizes
        code.open("")
        code.add(f"const int64_t {', '.join(f'r{d} = {r}' for d, r in enumerate(cell))};", *body(k == 0))
        code.close()

    def result(j, r):
        if r.op == "sum":
            return f"({C_TYPES[r.dtype]})tot{j}"
        if r.op == "max":
            twin = _argmax_twin(reduces, r)
            return f"mx{j}" if twin is None else f"(nan{twin} >= 0 ? NAN : best{twin})"
        return f"(nan{j} >= 0 ? nan{j} : key{j})"

    code.add(*epilogue(result))
    code.close(max(m, 1))


def _column_loops(code, kshape, rshape, reduces, body, epilogue, total) -> None:
    """Reduced dims outermost: up to COLUMNS kept indices accumulated side by side, rows walked contiguously."""
    m = len(kshape)
    last = kshape[-1]
    parallel = total >= PARALLEL_MIN_ELEMENTS
    outer_parallel = parallel and m > 1 and kshape[0] > 1
    for d in range(m - 1):
        code.open(_for(f"k{d}", kshape[d]), outer_parallel and d == 0)
    code.open(f"for (int64_t kb = 0; kb < {last}; kb += {COLUMNS})", parallel and not outer_parallel and last > COLUMNS)
    code.add(f"const int64_t kn = {last} - kb < {COLUMNS} ? {last} - kb : {COLUMNS};")
    for j, r in enumerate(reduces):
        if r.op == "sum":
            code.add(f"double acc{j}[{COLUMNS}], cmp{j}[{COLUMNS}];")
            code.add(f"for (int64_t c = 0; c < kn; c++) {{ acc{j}[c] = 0.0; cmp{j}[c] = 0.0; }}")
        else:
            code.add(f"{C_TYPES[r.dtype]} acc{j}[{COLUMNS}];")
            code.add(f"for (int64_t c = 0; c < kn; c++) acc{j}[c] = -INFINITY;")
    _values(code, reduces, COLUMNS)
    for d in range(len(rshape)):
        code.open(_for(f"r{d}", rshape[d]))
    code.lines.extend(_NO_LOOP_CARRIED_DEPENDENCE)
    code.open("for (int64_t c = 0; c < kn; c++)")  # values first, then the sums (see _row_loops)
    code.add(f"const int64_t k{m - 1} = kb + c;", *body("c"))
    code.close()
    for j, r in enumerate(reduces):
        if r.op == "max":
            step = _max_into(f"acc{j}[c]", f"v{j}[c]")
        elif r.dtype == "f64":  # float32 needs no compensation: double holds its sums with ~29 bits to spare
            step = f"munet_add(&acc{j}[c], &cmp{j}[c], v{j}[c]);"
        else:
            step = f"acc{j}[c] += (double)v{j}[c];"
        code.add(f"for (int64_t c = 0; c < kn; c++) {step}")
    code.close(len(rshape))

    def result(j, r):
        return f"({C_TYPES[r.dtype]})munet_total(acc{j}[c], cmp{j}[c])" if r.op == "sum" else f"acc{j}[c]"

    code.lines.extend(_NO_LOOP_CARRIED_DEPENDENCE)
    code.open("for (int64_t c = 0; c < kn; c++)")
    code.add(f"const int64_t k{m - 1} = kb + c;", *epilogue(result))
    code.close(2 + (m - 1))
