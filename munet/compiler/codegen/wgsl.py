"""Render a kernel IR :class:`Kernel` as a WGSL compute shader for the vulkan backend.

``render_wgsl(kernel) -> str`` follows the vulkan backend's kernel conventions
(``munet/backends/vulkan/wgsl.py``): entry point ``main``, ``@workgroup_size(256)``, a 2-D grid
linearized as ``gid.x + gid.y * nwg.x * 256`` (``Runtime.grid``), binding 0 the ``u32``
parameter block ``P`` (bound at a dynamic offset), then the outputs ``OUT0..`` (read_write) and
the inputs ``IN0..`` (read) at bindings ``1..``. The parameter block holds, per input, the
element offset of its view (``P[k]``), then the kernel's runtime scalars as f32 bits
(``bitcast<f32>(P[n_inputs + j])``): a learning rate is data, so one pipeline serves every
step. Shapes and strides are fixed per compiled graph and written into the source as
constants (cheap index arithmetic); dims that every access walks contiguously are collapsed.

Storage types are the backend's: f32, and bool as u32 0/1. Each scalar op is printed by the
vulkan backend's own table (``munet/backends/vulkan/scalar_wgsl.py``, which the eager kernels
render formulas with too: NaN-propagating ``max_f``, ``tanh_f``, ``log``/``sqrt`` of a negative
number is NaN, ``erf_f``), so a fused chain computes what the unfused kernels do, up to what the shader compiler does with a whole expression (lavapipe
rewrites ``exp`` of a product, within an ulp). A :class:`~munet.compiler.codegen.kernel.Reduce`
follows the eager ``sum``/``amax`` kernel's order (see :func:`reduction_layout`), so fused and
unfused reductions give the same bits. ``render_wgsl(kernel, aliases)`` renders an in-place
state update (an input read through an output's binding). Anything else (float64, a scalar op
without a WGSL form, a reduction the eager kernel does in two passes) raises
:class:`UnsupportedKernelError`, and the lowering runs the group's member nodes with the
unfused vulkan kernels instead.
"""

from __future__ import annotations

import numpy as np

from munet.backends.vulkan.scalar_wgsl import SPECIAL_FUNCTIONS, UnrenderableError, literal, render_apply, uses_special
from munet.backends.vulkan.wgsl import PRELUDE, WORKGROUP
from munet.compiler.codegen.c import collapse
from munet.compiler.codegen.kernel import (
    Apply,
    Const,
    Kernel,
    Load,
    Param,
    Reduce,
    UnsupportedKernelError,
    contiguous_strides,
)

WGSL_TYPES = {"f32": "f32", "bool": "bool"}
STORAGE_TYPES = {"f32": "f32", "bool": "u32"}


def _literal(value: float, dtype: str) -> str:
    return literal(float(np.float32(value)) if dtype == "f32" else value, dtype)


def _check_dtype(dtype: str, what: str) -> None:
    if dtype not in WGSL_TYPES:
        raise UnsupportedKernelError(f"render_wgsl: {what} has dtype {dtype}; vulkan kernels are f32 or bool")


class _Emitter:
    """Emits each distinct expression once as a ``let``; returns WGSL expressions.

    ``reduced`` maps each :class:`Reduce` to the accumulator holding its value (a reduction
    kernel computes them in its loop before the epilogue is emitted).
    """

    def __init__(self, index_of_load, n_inputs: int, lines: list, prefix: str = "t", reduced=None, aliases=None):
        self.index_of_load = index_of_load
        self.aliases = aliases or {}
        self.n_inputs = n_inputs
        self.lines = lines
        self.names: dict = {}
        self.prefix = prefix
        self.reduced = reduced or {}
        self.uses_erf = False

    def emit(self, e) -> str:
        if isinstance(e, Const):
            return _literal(e.value, e.dtype)
        if isinstance(e, Param):
            if e.dtype == "bool":
                return f"(P[{self.n_inputs + e.index}] != 0u)"
            return f"bitcast<f32>(P[{self.n_inputs + e.index}])"
        if isinstance(e, Reduce):
            if e not in self.reduced:
                raise UnsupportedKernelError("render_wgsl: a reduction inside a reduction")
            return self.reduced[e]
        name = self.names.get(e)
        if name is not None:
            return name
        _check_dtype(e.dtype, type(e).__name__)
        text = self._text(e)
        name = f"{self.prefix}{len(self.names)}"
        self.names[e] = name
        self.lines.append(f"let {name} = {text};")
        return name

    def _text(self, e) -> str:
        if isinstance(e, Load):
            name = f"OUT{self.aliases[e.buffer]}" if e.buffer in self.aliases else f"IN{e.buffer}"
            value = f"{name}[{self.index_of_load(e)}]"
            return f"({value} != 0u)" if e.dtype == "bool" else value
        if not isinstance(e, Apply):
            raise UnsupportedKernelError(f"render_wgsl: unknown expression {e!r}")
        try:
            text = render_apply(e, [self.emit(x) for x in e.args])
        except UnrenderableError as error:
            raise UnsupportedKernelError(f"render_wgsl: {error}") from error
        self.uses_erf = self.uses_erf or uses_special(text)
        return text


def _walk(exprs) -> list:
    """Every distinct :class:`Load` and :class:`Reduce` under ``exprs`` (not inside a Reduce)."""
    found, seen = [], set()
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if isinstance(e, (Load, Reduce)):
            found.append(e)
        else:
            stack.extend(getattr(e, "args", ()))
    return found


def _coords(index: str, shape, prefix: str) -> list[str]:
    """Lines defining ``{prefix}0..`` as the coordinates of ``index`` (known < numel) over ``shape``."""
    if not shape:
        return []
    if len(shape) == 1:
        return [f"let {prefix}0 = {index};"]
    lines = [f"var rem_{prefix} = {index};"]
    for d in reversed(range(len(shape))):
        lines.append(f"let {prefix}{d} = rem_{prefix} % {shape[d]}u; rem_{prefix} = rem_{prefix} / {shape[d]}u;")
    return lines


def _index(base: str, offset: int, names, strides) -> str:
    terms = [base] + ([f"{offset}u"] if offset else [])
    terms += [n if st == 1 else f"{n} * {st}u" for n, st in zip(names, strides) if st != 0]
    return " + ".join(terms) if terms else "0u"


def _store(kernel: Kernel, buffer: int, index: str, value: str) -> str:
    if kernel.outputs[buffer] == "bool":
        value = f"select(0u, 1u, {value})"
    return f"OUT{buffer}[{index}] = {value};"


def render_wgsl(kernel: Kernel, aliases: dict | None = None) -> str:
    """The WGSL source of ``kernel`` (see the module docstring for bindings and parameters).

    ``aliases`` (input -> output) renders an in-place update: the input is not bound and its
    loads read the output's binding, which is safe when every load of it is at the index being
    written (``kernel.loads_only_at_write_index``): an invocation reads before it stores.
    """
    aliases = aliases or {}
    for k, dt in enumerate(kernel.inputs):
        _check_dtype(dt, f"input {k}")
    for k, dt in enumerate(kernel.outputs):
        _check_dtype(dt, f"output {k}")
    decls = ["@group(0) @binding(0) var<storage, read> P: array<u32>;"]
    binding = 1
    for k, dt in enumerate(kernel.outputs):
        decls.append(f"@group(0) @binding({binding}) var<storage, read_write> OUT{k}: array<{STORAGE_TYPES[dt]}>;")
        binding += 1
    for k, dt in enumerate(kernel.inputs):
        if k not in aliases:
            decls.append(f"@group(0) @binding({binding}) var<storage, read> IN{k}: array<{STORAGE_TYPES[dt]}>;")
            binding += 1
    header = f"// {kernel.name}: {len(kernel.stores)} outputs over {list(kernel.shape)}"
    if kernel.reduce_shape:
        header += f", reducing {list(kernel.reduce_shape)}"
    if aliases:
        header += ", in place: " + ", ".join(f"IN{i} is OUT{o}" for i, o in sorted(aliases.items()))
    if reduction_layout(kernel) == "tree":
        main, uses_erf = _tree_reduction(kernel, decls, aliases)
    else:
        body, uses_erf = _reduction_body(kernel, aliases) if kernel.reduce_shape else _elementwise_body(kernel, aliases)
        main = [
            f"@compute @workgroup_size({WORKGROUP})",
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {",
            f"  let idx = gid.x + gid.y * nwg.x * {WORKGROUP}u;",
            f"  if (idx >= {kernel.numel}u) {{ return; }}",
            *("  " + line for line in body),
            "}",
        ]
    prelude = PRELUDE.strip("\n") + ("\n" + _special_functions() if uses_erf else "")
    return "\n".join([prelude, header, *decls, *main]) + "\n"


def reduction_layout(kernel: Kernel) -> str:
    """How ``kernel`` runs: ``'elementwise'``, ``'serial'`` or ``'tree'`` (see ``workgroups``).

    A reduction follows the eager ``sum``/``amax`` kernel's order, so fused and unfused results
    are the same bits: rows of up to ``SHORT_ROW`` elements are combined in order by one
    invocation per output, longer ones by one workgroup per output (thread ``t`` combines
    elements ``t, t + 256, ...`` in order, then a shared-memory tree). Very long rows into few
    outputs, which the eager kernel splits into chunks over two passes, are not rendered.
    """
    if not kernel.reduce_shape:
        return "elementwise"
    from munet.backends.vulkan.reduction import CHUNK, SHORT_ROW

    rows = _numel(kernel.reduce_shape)
    if rows > 8 * CHUNK and kernel.numel < 256:
        raise UnsupportedKernelError(
            f"render_wgsl: a reduction of {rows} elements into {kernel.numel} outputs (the eager kernel "
            "splits such rows into chunks over two passes; the unfused kernels run it)"
        )
    return "tree" if rows > SHORT_ROW else "serial"


def workgroups(kernel: Kernel) -> int:
    """How many workgroups a dispatch of ``kernel`` needs."""
    if reduction_layout(kernel) == "tree":
        return kernel.numel
    return -(-max(kernel.numel, 1) // WORKGROUP)


def _numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _elementwise_body(kernel: Kernel, aliases: dict) -> tuple:
    loads = [e for e in _walk(st.expr for st in kernel.stores) if isinstance(e, Load)]
    shape, collapsed = collapse(kernel.shape, [contiguous_strides(kernel.shape)] + [ld.strides for ld in loads])
    per_load = {ld: collapsed[k + 1] for k, ld in enumerate(loads)}
    names = [f"c{d}" for d in range(len(shape))]
    lines = _coords("idx", shape, "c")
    emitter = _Emitter(
        lambda ld: _index(f"P[{ld.buffer}]", ld.offset, names, per_load[ld]), len(kernel.inputs), lines, aliases=aliases
    )
    stores = [_store(kernel, st.buffer, "idx", emitter.emit(st.expr)) for st in kernel.stores]
    return lines + stores, emitter.uses_erf


def _reduction_parts(kernel: Kernel):
    """``(names, index_of_load, outside stores, full-space stores, {Reduce: accumulator})``."""
    names = [f"c{d}" for d in range(len(kernel.shape))] + [f"q{d}" for d in range(len(kernel.reduce_shape))]

    def index_of_load(ld) -> str:
        return _index(f"P[{ld.buffer}]", ld.offset, names, ld.strides)

    outside = [st for st in kernel.stores if not hasattr(st, "strides")]
    full = [st for st in kernel.stores if hasattr(st, "strides")]
    reduces = [e for e in _walk(st.expr for st in outside) if isinstance(e, Reduce)]
    for e in reduces:
        if e.op not in _COMBINE or e.dtype != "f32":
            raise UnsupportedKernelError(f"render_wgsl: reduction '{e.op}' over {e.dtype} is not supported")
    return names, index_of_load, outside, full, {e: f"acc{k}" for k, e in enumerate(reduces)}


_COMBINE = {"sum": ("0.0", "{} + {}"), "max": ("-inf_f()", "max_f({}, {})")}  # as kernels_reduce


def _row_loop(kernel, index_of_load, names, full, accumulators, start: str, step: str, aliases: dict) -> tuple:
    """The loop over reduction indices ``r = start, start + step, ...``: prologue, combine, full stores."""
    loop: list = _coords("r", kernel.reduce_shape, "q")
    inner = _Emitter(index_of_load, len(kernel.inputs), loop, prefix="u", aliases=aliases)
    for e, acc in accumulators.items():
        loop.append(f"{acc} = {_COMBINE[e.op][1].format(acc, inner.emit(e.expr))};")
    for st in full:
        loop.append(_store(kernel, st.buffer, _index("0u", 0, names, st.strides), inner.emit(st.expr)))
    rows = _numel(kernel.reduce_shape)
    lines = [f"for (var r = {start}; r < {rows}u; r = r + {step}) {{", *("  " + line for line in loop), "}"]
    return lines, inner.uses_erf


def _reduction_body(kernel: Kernel, aliases: dict) -> tuple:
    """Short rows: one invocation per kept index combines its row in order, then the epilogue."""
    names, index_of_load, outside, full, accumulators = _reduction_parts(kernel)
    lines = _coords("idx", kernel.shape, "c")
    lines += [f"var {acc}: f32 = {_COMBINE[e.op][0]};" for e, acc in accumulators.items()]
    loop, uses_erf = _row_loop(kernel, index_of_load, names, full, accumulators, "0u", "1u", aliases)
    lines += loop
    epilogue = _Emitter(index_of_load, len(kernel.inputs), lines, reduced=accumulators, aliases=aliases)
    stores = [_store(kernel, st.buffer, "idx", epilogue.emit(st.expr)) for st in outside]
    return lines + stores, uses_erf or epilogue.uses_erf


def _tree_reduction(kernel: Kernel, decls: list, aliases: dict) -> tuple:
    """Long rows: one workgroup per kept index; strided partial rows, a shared-memory tree, and
    the epilogue on thread 0. Every thread reaches the barriers (WGSL's uniformity rules)."""
    names, index_of_load, outside, full, accumulators = _reduction_parts(kernel)
    decls += [f"var<workgroup> part_{acc}: array<f32, {WORKGROUP}>;" for acc in accumulators.values()]
    loop, uses_erf = _row_loop(kernel, index_of_load, names, full, accumulators, "t", f"{WORKGROUP}u", aliases)
    combine = " ".join(
        f"part_{acc}[t] = {_COMBINE[e.op][1].format(f'part_{acc}[t]', f'part_{acc}[t + s]')};"
        for e, acc in accumulators.items()
    )
    epilogue_lines = [f"let red_{acc} = part_{acc}[0];" for acc in accumulators.values()]
    epilogue = _Emitter(
        index_of_load,
        len(kernel.inputs),
        epilogue_lines,
        reduced={e: f"red_{a}" for e, a in accumulators.items()},
        aliases=aliases,
    )
    stores = [_store(kernel, st.buffer, "idx", epilogue.emit(st.expr)) for st in outside]
    body = [
        "let idx = wid.x + wid.y * nwg.x;",
        f"let live = idx < {kernel.numel}u;",
        *_coords("idx", kernel.shape, "c"),
        *(f"var {acc}: f32 = {_COMBINE[e.op][0]};" for e, acc in accumulators.items()),
        "if (live) {",
        *("  " + line for line in loop),
        "}",
        *(f"part_{acc}[t] = {acc};" for acc in accumulators.values()),
        "workgroupBarrier();",
        f"for (var s = {WORKGROUP // 2}u; s > 0u; s = s >> 1u) {{",
        f"  if (t < s) {{ {combine} }}",
        "  workgroupBarrier();",
        "}",
        "if (live && t == 0u) {",
        *("  " + line for line in epilogue_lines + stores),
        "}",
    ]
    main = [
        f"@compute @workgroup_size({WORKGROUP})",
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,",
        "        @builtin(local_invocation_index) t: u32) {",
        *("  " + line for line in body),
        "}",
    ]
    return main, uses_erf or epilogue.uses_erf


def strip_prelude(source: str) -> str:
    """``source`` without the shared helper functions (for ``describe()``)."""
    source = source.replace(PRELUDE.strip("\n") + "\n", "", 1)
    return source.replace(_special_functions() + "\n", "", 1)


def _special_functions() -> str:
    """The vulkan backend's special functions (``erf_f``, ``erfc_f``, ``erfinv_f``)."""
    return SPECIAL_FUNCTIONS.strip("\n")
