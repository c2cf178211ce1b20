"""Render a kernel IR :class:`Kernel` as one C function.

``render_c(kernel) -> str`` gives a translation unit exporting
``void <kernel.name>(void *const *in, void *const *out, const double *p, int threads)``:
``in``/``out`` are data pointers of the C-contiguous buffers, ``p`` the runtime scalars,
``threads`` how many OpenMP threads a large kernel may use (the caller passes MuNet's
thread count, the one NumPy's BLAS uses: spinning threads on a busy machine cost more
than they save). Dimensions that every
load walks contiguously are collapsed, so a plain elementwise chain is one flat loop that
the compiler vectorizes; the outermost loop is split across cores with OpenMP when the
kernel is large. Float math is IEEE per operation, in the kernel's dtype (the build uses
``-ffp-contract=off``, no fast-math), so arithmetic matches NumPy bit for bit; ``exp``,
``log`` and ``tanh`` come from the C library and may differ from NumPy's by an ulp.
"""

from __future__ import annotations

from munet.compiler.codegen.kernel import Apply, Const, Kernel, Load, Param, Reduce

C_TYPES = {"f32": "float", "f64": "double", "bool": "unsigned char"}
PARALLEL_MIN_ELEMENTS = 1 << 16

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "gt": ">", "ge": ">="}
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "abs": "fabs", "erf": "erf"}


def _math(name: str, dtype: str) -> str:
    return _MATH[name] + ("f" if dtype == "f32" else "")


def _literal(value: float, dtype: str) -> str:
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

    def __init__(self, index_of_load):
        self.lines: list[str] = []
        self.names: dict = {}
        self.index_of_load = index_of_load

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
            return f"in{e.buffer}[{self.index_of_load(e)}]"
        if isinstance(e, Apply):
            a = [self.emit(x) for x in e.args]
            if e.op in _INFIX:
                return f"{a[0]} {_INFIX[e.op]} {a[1]}"
            if e.op == "neg":
                return f"-{a[0]}"
            if e.op == "maximum":
                return f"({a[0]} >= {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]}"
            if e.op == "where":
                return f"{a[0]} ? {a[1]} : {a[2]}"
            if e.op == "cast":
                return f"({C_TYPES[e.dtype]}){a[0]}"
            return f"{_math(e.op, e.dtype)}({a[0]})"
        if isinstance(e, Reduce):
            raise NotImplementedError("render_c: reductions are rendered by their loop, not inline")
        raise TypeError(f"render_c: unknown expression {e!r}")


def _loads(kernel: Kernel) -> list:
    found, seen = [], set()

    def walk(e):
        if e in seen:
            return
        seen.add(e)
        if isinstance(e, Load):
            found.append(e)
        for a in getattr(e, "args", ()):
            walk(a)

    for st in kernel.stores:
        walk(st.expr)
    return found


def render_c(kernel: Kernel) -> str:
    """C source for ``kernel`` (elementwise kernels; reductions are not rendered yet)."""
    if kernel.reduce_shape:
        raise NotImplementedError("render_c: reduction kernels are not supported yet")
    loads = _loads(kernel)
    from munet.compiler.codegen.kernel import contiguous_strides

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

    body = _Emitter(lambda ld: index(by_load[ld], ld.offset))
    stores = [f"out{st.buffer}[{index(collapsed[0])}] = {body.emit(st.expr)};" for st in kernel.stores]

    lines = ["#include <math.h>", "#include <stdint.h>", ""]
    lines.append(f"void {kernel.name}(void *const *in, void *const *out, const double *p, int threads) {{")
    for k, dt in enumerate(kernel.inputs):
        lines.append(f"    const {C_TYPES[dt]} *in{k} = (const {C_TYPES[dt]} *)in[{k}];")
    for k, dt in enumerate(kernel.outputs):
        lines.append(f"    {C_TYPES[dt]} *out{k} = ({C_TYPES[dt]} *)out[{k}];")
    indent = "    "
    inner = [*body.lines, *stores]
    if rank == 0:
        lines += [indent + "{", *(indent * 2 + s for s in inner), indent + "}", "}"]
        return "\n".join(lines) + "\n"
    if kernel.numel >= PARALLEL_MIN_ELEMENTS:
        lines.append("#ifdef _OPENMP")
        lines.append("    #pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)")
        lines.append("#endif")
    for d in range(rank):
        lines.append(f"{indent}for (int64_t i{d} = 0; i{d} < {shape[d]}; i{d}++) {{")
        indent += "    "
    lines += [indent + s for s in inner]
    for _ in range(rank):
        indent = indent[:-4]
        lines.append(indent + "}")
    lines.append("    (void)threads;")
    lines.append("}")
    return "\n".join(lines) + "\n"
