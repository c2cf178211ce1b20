"""Render one scalar formula as a shape-generic, strided elementwise C kernel (the CPU eager path).

``render_formula(expr, name, storage, out_storage, layout)`` gives a translation unit exporting::

    void <name>(PyObject *ops, int64_t threads)
    void <name>_strided(PyObject *ops, int64_t ndim, const int64_t *shape, const int64_t *strides, int64_t threads)

``ops`` is a tuple of NumPy arrays, the output first, then the present operands; the kernel reads
their data pointers from the objects (see ``_OBJECTS``). ``<name>`` walks them as flat arrays of
the output's size: each operand contiguous (``layout`` letter ``'c'``) or one value (``'b'``).
``<name>_strided`` walks ``shape`` where ``strides[k * ndim + d]`` is operand ``k``'s stride (in
elements, the output's at ``k = 0``) along dim ``d``, so broadcasting is a zero stride and a
transposed or sliced view is read where it lies, without a copy. Shapes and strides are run-time
values: one binary serves every shape. Only the innermost dim's stride of each operand is part of
the kernel (``layout``: one letter per operand, output first, ``'c'`` stride 1, ``'b'`` stride 0,
``'s'`` any), so a contiguous or broadcast inner loop vectorizes.

The iteration space is cut into work items of up to ``CHUNK`` elements of one row; with
``threads > 1`` and at least ``PARALLEL_MIN_ELEMENTS`` elements the items are split evenly over
an OpenMP team, each thread walking its share through the serial body cloned for AVX-512 and AVX2
(``c.py``'s ``MUNET_CLONES``). Values are computed in the formula's dtypes (float16 and bfloat16 operands
are loaded as float32 and the result rounded to nearest even on store, as NumPy's ``astype``
does); scalar ops print as ``c.render_c_apply`` prints them for the compiler's fused kernels.
Formulas on integers are not rendered here (``renderable``): C leaves signed overflow and
float-to-integer conversion of NaN undefined, where NumPy wraps.
"""

from __future__ import annotations

from munet.compiler.codegen.c import prelude, render_c_apply
from munet.ops._scalar import BOOL, FLOAT, Apply, Arg, Const, kind

CHUNK = 8192  # elements of one row per work item
PARALLEL_MIN_ELEMENTS = 1 << 16  # below this an OpenMP team costs more than it saves (measured: docs/perf/formulas.md)
# storage dtype (NumPy name) -> (C type, compute dtype of the formula IR)
STORAGE = {
    "float32": ("float", "f32"),
    "float64": ("double", "f64"),
    "bool": ("unsigned char", "bool"),
    "float16": ("_Float16", "f32"),
    "bfloat16": ("uint16_t", "f32"),
}
_COMPUTE_TYPES = {"f32": "float", "f64": "double", "bool": "unsigned char"}
# NumPy's float maximum/minimum: NaN propagates, and a tie (-0.0 against 0.0) gives the second operand
_NUMPY_TIES = {"maximum": ">", "minimum": "<"}
# The fields of a CPython tuple and a NumPy array that the entry points read (the caller checks these
# offsets against the running interpreter once: ``compiled_formula.py``), so a launch passes its
# operands as one tuple instead of extracting each data pointer in Python.
_OBJECTS = """typedef struct { intptr_t refcnt; void *type; intptr_t size; void *items[]; } munet_tuple;
typedef struct { intptr_t refcnt; void *type; char *data; int nd; int64_t *dims; int64_t *strides; } munet_array;
"""
_BF16 = """static inline float munet_bf16_load(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static inline uint16_t munet_bf16_store(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if (f != f) return (uint16_t)((bits >> 16) | 0x40);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
"""


def renderable(expr) -> bool:
    """Whether every node of ``expr`` is a float or bool value this renderer prints exactly."""
    seen = set()

    def ok(e) -> bool:
        if e in seen or e is None:
            return True
        seen.add(e)
        if isinstance(e, Const):
            return e.dtype in _COMPUTE_TYPES
        if isinstance(e, Arg):
            return e.dtype in _COMPUTE_TYPES
        if not isinstance(e, Apply) or e.dtype not in _COMPUTE_TYPES:
            return False
        if any(kind(a.dtype) not in (FLOAT, BOOL) for a in e.args):
            return False
        return all(ok(a) for a in e.args)

    return ok(expr)


# scalar ops whose C form the compiler vectorizes (plain operators, selections and the C library
# functions gcc inlines); float32 exp and erf are c.py's inline polynomials
_VECTORIZED = {"add", "sub", "mul", "div", "maximum", "minimum", "fmax", "fmin", "lt", "le", "gt", "ge", "eq", "ne",
               "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
               "bitwise_not", "neg", "abs", "floor", "ceil", "trunc", "rint", "sqrt", "copysign", "signbit", "isnan",
               "isinf", "cast", "where"}  # fmt: skip
_SLOW_IN_NUMPY = {"erf", "erfc", "erfinv"}  # NumPy's rendering computes these by a float64 series, many passes
# C library calls that NumPy's ufuncs make one element at a time too: one C pass beats NumPy's several
_SCALAR_IN_NUMPY = {"fmod", "floor_divide"}


def faster_than_numpy(expr) -> bool:
    """Whether the C kernel of ``expr`` beats its NumPy rendering (measured: docs/perf/formulas.md).

    C loses where it calls a C library function that stays scalar (``sin``, ``log``, ``tanh``, float64
    ``exp``...: NumPy's SIMD loops are 5-50x faster per element) unless the formula also needs one
    NumPy computes slowly (``erf``), and where the formula is one float32 ``exp`` (NumPy's AVX-512
    loop is faster than the inline one)."""
    ops: set = set()

    def walk(e):
        if isinstance(e, Apply):
            ops.add("exp32" if e.op == "exp" and e.dtype == "f32" else "erf32" if e.op == "erf" and e.dtype == "f32"
                    else e.op)  # fmt: skip
            for a in e.args:
                walk(a)

    walk(expr)
    if isinstance(expr, Apply) and expr.op == "exp" and all(not isinstance(a, Apply) for a in expr.args):
        return False
    slow = ops - _VECTORIZED - _SCALAR_IN_NUMPY - {"exp32", "erf32"}
    return not slow or bool(ops & (_SLOW_IN_NUMPY | {"erf32"}))


def one_cheap_ufunc(expr) -> bool:
    """Whether NumPy renders ``expr`` as one SIMD ufunc call on the operands (``add``, ``lt``): as fast as C per thread."""
    return isinstance(expr, Apply) and expr.op in _VECTORIZED and all(isinstance(a, Arg) for a in expr.args)


def _literal(c: Const) -> str:
    v = c.value
    if c.dtype == "bool":
        return "1" if v else "0"
    ctype = _COMPUTE_TYPES[c.dtype]
    if v != v:
        text = "NAN"
    elif v in (float("inf"), float("-inf")):
        text = ("-" if v < 0 else "") + "INFINITY"
    else:
        text = repr(float(v))  # a double literal converted once: NumPy's astype of the Python float
    return f"(({ctype}){text})"


def _load(storage: str, ref: str) -> str:
    if storage == "float16":
        return f"(float){ref}"
    if storage == "bfloat16":
        return f"munet_bf16_load({ref})"
    return ref


def _store(storage: str, value: str) -> str:
    if storage == "float16":
        return f"(_Float16){value}"
    if storage == "bfloat16":
        return f"munet_bf16_store({value})"
    return f"({STORAGE[storage][0]}){value}"


def header() -> str:
    """What every translation unit of formula kernels starts with (once, however many kernels follow)."""
    return "\n".join([*prelude(), _BF16, "#ifdef _OPENMP\n#include <omp.h>\n#endif", _OBJECTS]) + "\n"


def render_formula(expr, name: str, storage: list, out_storage: str, layout: str, *, with_header: bool = True) -> str:
    """C source of formula expression ``expr`` (see the module docstring).

    ``storage[i]``: the NumPy dtype name of formula argument ``i`` (None: a missing optional
    argument, which gets no pointer); ``out_storage``: the output's; ``layout``: the inner-stride
    class of the output and of each present argument, in that order. ``with_header=False`` leaves
    out :func:`header`, for several kernels in one translation unit."""
    present = [i for i, s in enumerate(storage) if s is not None]
    slot = {i: k + 1 for k, i in enumerate(present)}  # formula argument -> operand number
    operands = [out_storage] + [storage[i] for i in present]

    def ref(k: int) -> str:
        cls = layout[k]
        return f"p{k}[0]" if cls == "b" else f"p{k}[j]" if cls == "c" else f"p{k}[j * s{k}]"

    lines: list = []
    names: dict = {}

    def emit(e) -> str:
        if isinstance(e, Const):
            return _literal(e)
        if e in names:
            return names[e]
        if isinstance(e, Arg):
            text = _load(storage[e.index], ref(slot[e.index]))
        elif e.op in _NUMPY_TIES and kind(e.args[0].dtype) == FLOAT:
            a, b = (emit(x) for x in e.args)
            pick = f"m{len(lines)}"  # two plain selects: gcc if-converts a chain of these, not of a || test
            lines.append(
                f"            const {_COMPUTE_TYPES[e.dtype]} {pick} = {a} {_NUMPY_TIES[e.op]} {b} ? {a} : {b};"
            )
            text = f"{a} != {a} ? {a} : {pick}"
        else:
            text = render_c_apply(e, [emit(a) for a in e.args])
        names[e] = f"t{len(names)}"
        lines.append(f"            const {_COMPUTE_TYPES[e.dtype]} {names[e]} = {text};")
        return names[e]

    value = emit(expr)
    out_ref = "p0[j]" if layout[0] == "c" else "p0[j * s0]"
    n = len(operands)
    src = [header()] if with_header else []
    args = "int64_t ndim, const int64_t *shape, const int64_t *st, char *const *ptrs"
    src.append(f"MUNET_CLONES static void {name}_range(int64_t it0, int64_t it1, int64_t nchunk, {args}) {{")
    src.append("    const int64_t inner = shape[ndim - 1];")
    src.append("    for (int64_t it = it0; it < it1; it++) {")
    src.append("        int64_t row = it / nchunk;")
    src.append(f"        const int64_t j0 = (it - row * nchunk) * {CHUNK};")
    src.append(f"        const int64_t j1 = j0 + {CHUNK} < inner ? j0 + {CHUNK} : inner;")
    src.append(f"        int64_t {', '.join(f'o{k} = 0' for k in range(n))};")
    src.append("        for (int64_t d = ndim - 2; d >= 0; d--) {")
    src.append("            const int64_t i = row % shape[d];")
    src.append("            row /= shape[d];")
    src.append("            " + " ".join(f"o{k} += i * st[{k} * ndim + d];" for k in range(n)))
    src.append("        }")
    for k, s in enumerate(operands):
        const = "" if k == 0 else "const "
        src.append(f"        {const}{STORAGE[s][0]} *p{k} = ({const}{STORAGE[s][0]} *)ptrs[{k}] + o{k};")
        if layout[k] == "s":
            src.append(f"        const int64_t s{k} = st[{k} * ndim + ndim - 1];")
    src += [
        "#if defined(__clang__)",
        "#pragma clang loop vectorize(assume_safety)",
        "#elif defined(__GNUC__)",
        "#pragma GCC ivdep",
        "#endif",
    ]
    src.append("        for (int64_t j = j0; j < j1; j++) {")
    src += lines
    src.append(f"            {out_ref} = {_store(out_storage, value)};")
    src += ["        }", "    }", "}", ""]
    src.append(f"static void {name}_run({args}, int64_t threads) {{")
    src.append("    int64_t rows = 1;")
    src.append("    for (int64_t d = 0; d + 1 < ndim; d++) rows *= shape[d];")
    src.append("    const int64_t inner = shape[ndim - 1];")
    src.append("    if (rows == 0 || inner == 0) return;")
    src.append(f"    const int64_t nchunk = (inner + {CHUNK - 1}) / {CHUNK};")
    src.append("    const int64_t items = rows * nchunk;")
    src.append("#ifdef _OPENMP")
    src.append(f"    if (threads > 1 && items > 1 && rows * inner >= {PARALLEL_MIN_ELEMENTS}) {{")
    src.append("        long done = 0;")
    src.append("        #pragma omp parallel num_threads(threads)")
    src.append("        {")
    src.append("            const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();")
    src.append(f"            {name}_range(items * t / nt, items * (t + 1) / nt, nchunk, ndim, shape, st, ptrs);")
    src.append("            munet_task_done(&done);")
    src.append("            munet_wait_awake(&done, nt);")
    src.append("        }")
    src.append("        return;")
    src.append("    }")
    src.append("#endif")
    src.append("    (void)threads;")
    src.append(f"    {name}_range(0, items, nchunk, ndim, shape, st, ptrs);")
    src.append("}")
    src.append(f"void {name}(const munet_tuple *ops, int64_t threads) {{")
    src.append("    const munet_array *out = (const munet_array *)ops->items[0];")
    src.append("    int64_t n = 1;")
    src.append("    for (int d = 0; d < out->nd; d++) n *= out->dims[d];")
    src.append(f"    char *ptrs[{n}];")
    src.append(f"    for (int k = 0; k < {n}; k++) ptrs[k] = ((const munet_array *)ops->items[k])->data;")
    src.append(f"    const int64_t st[{n}] = {{{', '.join('0' if c == 'b' else '1' for c in layout)}}};")
    src.append(f"    {name}_run(1, &n, st, ptrs, threads);")
    src.append("}")
    src.append(
        f"void {name}_strided(const munet_tuple *ops, {args.replace(', char *const *ptrs', '')}, int64_t threads) {{"
    )
    src.append(f"    char *ptrs[{n}];")
    src.append(f"    for (int k = 0; k < {n}; k++) ptrs[k] = ((const munet_array *)ops->items[k])->data;")
    src.append(f"    {name}_run(ndim, shape, st, ptrs, threads);")
    src.append("}")
    return "\n".join(src) + "\n"
