"""Kernels whose leading dim is a run-time count (``munet.compile(dynamic=...)`` on cpu).

``render_c_sized(kernel)`` is tried first: the kernel itself, rendered with a run-time count in
place of one size (its merged leading kept dims, or a column reduction's leading reduced dim),
accepted when that size is nothing but a loop bound (see its docstring). Slabs below serve the
kernels it rejects.

A kernel whose leading dim is kept (not reduced) and read and written at a fixed step along it
computes, for each index ``b`` of that dim, the same *slab* kernel over the remaining dims with
every buffer's pointer advanced by ``b`` times its leading stride. ``slab_kernel(kernel)`` builds
that slab (strides without the leading dim), and ``render_c_slabs(kernel)`` renders it plus an
entry that loops over ``b < n0``, where ``n0`` is the last run-time scalar (``p[len(params)]``).
Neither source holds the leading size, so every batch size shares one binary: a new batch size
costs a retrace and a memory plan, not a C compile.

Not every kernel qualifies (``slab_kernel`` returns None): one without kept dims, one with an
``Index`` that varies along the leading dim, one reading a buffer at two different leading
strides, or a reduction whose slab ``c.py`` would walk in another layout (a column sum over a
single kept dim becomes a row sum in its slab): a slab computes each element with exactly the
static kernel's operations in the same order, so results are the same bits. And a kernel that reduces over the batch (a bias gradient) slabs over its kept dims,
but the batch is its reduction size, which its source holds: it is still compiled per size.

The entry runs the slabs on ``threads`` OpenMP threads when the whole kernel is large; each slab
runs serially (its AVX2 clone is always compiled, ``render_c(large=True)``).
"""

from __future__ import annotations

import hashlib
import re

from munet.compiler.codegen.c import C_TYPES, PARALLEL_MIN_ELEMENTS, reduction_layout, render_c, with_run_time_counts
from munet.compiler.codegen.kernel import Apply, Index, Kernel, Load, Reduce, Store, StoreFull, same_expressions
from munet.ops._scalar import digest as expression_digest


def merge_leading(kernel: Kernel) -> Kernel:
    """``kernel`` with its leading kept dims merged while every access walks them as one
    (``stride[0] == stride[1] * shape[1]``): a ``(batch, time, width)`` kernel over contiguous
    buffers becomes ``(batch * time, width)``, so its slab holds neither the batch nor the time.
    The last kept dim stays: a slab is a function call, so it should hold at least one row."""
    while len(kernel.shape) >= 3:
        n1 = kernel.shape[1]
        accesses = _accesses(kernel)
        if not all(a.strides[0] == a.strides[1] * n1 for a in accesses):
            return kernel
        memo: dict = {}
        stores = [
            StoreFull(st.buffer, st.strides[1:], _without_leading(st.expr, memo))
            if isinstance(st, StoreFull)
            else Store(st.buffer, _without_leading(st.expr, memo))
            for st in kernel.stores
        ]
        shape = (kernel.shape[0] * n1, *kernel.shape[2:])
        kernel = Kernel(
            kernel.name,
            shape,
            kernel.reduce_shape,
            list(kernel.inputs),
            list(kernel.params),
            list(kernel.outputs),
            stores,
        )
    return kernel


def _without_leading(e, memo: dict):
    """Expression ``e`` with the first stride of every access dropped (two dims walked as one)."""
    if e in memo:
        return memo[e]
    if isinstance(e, Load):
        out = Load(e.buffer, e.strides[1:], e.offset, e.dtype)
    elif isinstance(e, Index):
        out = Index(e.strides[1:], e.offset, e.dtype)
    elif isinstance(e, Apply):
        out = Apply(e.op, tuple(_without_leading(a, memo) for a in e.args), e.dtype)
    elif isinstance(e, Reduce):
        key = None if e.key is None else _without_leading(e.key, memo)
        out = Reduce(e.op, _without_leading(e.expr, memo), e.dtype, key)
    else:  # Const, Param
        out = e
    memo[e] = out
    return out


def _accesses(kernel: Kernel) -> list:
    """Every Load, Index and StoreFull of ``kernel`` (what has strides)."""
    found, seen, stack = [], set(), [st.expr for st in kernel.stores]
    found += [st for st in kernel.stores if isinstance(st, StoreFull)]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (Load, Index)):
            found.append(e)
        elif isinstance(e, Apply):
            stack.extend(e.args)
        elif isinstance(e, Reduce):
            stack.append(e.expr)
            if e.key is not None:
                stack.append(e.key)
    return found


def slab_kernel(kernel: Kernel):
    """``(slab, input leading strides, output leading strides)`` in elements, or None (see the module docstring)."""
    if not kernel.shape:
        return None
    return _slab_over_first_dim(kernel, kernel)


def _slab_over_first_dim(kernel: Kernel, original: Kernel):
    strides: dict = {}  # buffer -> leading stride of its loads
    memo: dict = {}

    def strip(e):
        if e in memo:
            return memo[e]
        if isinstance(e, Load):
            if strides.setdefault(e.buffer, e.strides[0]) != e.strides[0]:
                raise _NoSlabError
            out = Load(e.buffer, e.strides[1:], e.offset, e.dtype)
        elif isinstance(e, Index):
            if e.strides[0]:
                raise _NoSlabError
            out = Index(e.strides[1:], e.offset, e.dtype)
        elif isinstance(e, Apply):
            out = Apply(e.op, tuple(strip(a) for a in e.args), e.dtype)
        elif isinstance(e, Reduce):
            out = Reduce(e.op, strip(e.expr), e.dtype, None if e.key is None else strip(e.key))
        else:  # Const, Param
            out = e
        memo[e] = out
        return out

    inner = 1
    for size in kernel.shape[1:]:
        inner *= size
    try:
        stores, out_strides = [], []
        for st in kernel.stores:
            if isinstance(st, StoreFull):
                stores.append(StoreFull(st.buffer, st.strides[1:], strip(st.expr)))
                out_strides.append((st.buffer, st.strides[0]))
            else:
                stores.append(Store(st.buffer, strip(st.expr)))
                out_strides.append((st.buffer, inner))
    except _NoSlabError:
        return None
    by_output = dict(out_strides)
    digest = expression_digest((kernel.shape[1:], kernel.reduce_shape, stores))[:16]
    slab = Kernel(
        f"slab_{digest}",
        tuple(kernel.shape[1:]),
        kernel.reduce_shape,
        list(kernel.inputs),
        list(kernel.params),
        list(kernel.outputs),
        stores,
    )
    if kernel.reduce_shape and reduction_layout(slab) != reduction_layout(original):
        return None  # each kept index would be summed in another order than the static kernel sums it
    return (
        slab,
        [strides.get(i, 0) for i in range(len(kernel.inputs))],
        [by_output[i] for i in range(len(kernel.outputs))],
    )


class _NoSlabError(Exception):
    pass


def render_c_slabs(kernel: Kernel):
    """``(source, entry name)`` of ``kernel`` with a run-time leading size, or None when it does not qualify.

    The entry has the usual signature; the caller appends the leading size to the run-time
    scalars (``p[len(kernel.params)]``)."""
    found = slab_kernel(kernel)
    if found is None:
        return None
    slab, in_strides, out_strides = found
    body = render_c(slab, large=True)
    per_slab = max(slab.numel, 1)
    for size in slab.reduce_shape:
        per_slab *= size
    identity = repr((slab.name, in_strides, out_strides, kernel.inputs, kernel.outputs, len(kernel.params)))
    name = "dyn_" + hashlib.sha1(identity.encode()).hexdigest()[:16]
    n_in, n_out = max(len(in_strides), 1), max(len(out_strides), 1)
    lines = [
        body,
        f"void {name}(void *const *in, void *const *out, const double *p, int threads) {{",
        f"    const int64_t n0 = (int64_t)p[{len(kernel.params)}];",
        "#ifdef _OPENMP",
        f"    #pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && n0 * {per_slab} >= "
        f"{PARALLEL_MIN_ELEMENTS})",
        "#endif",
        "    for (int64_t b = 0; b < n0; b++) {",
        f"        void *ins[{n_in}], *outs[{n_out}];",
    ]
    for k, (dtype, step) in enumerate(zip(kernel.inputs, in_strides)):
        lines.append(f"        ins[{k}] = ({C_TYPES[dtype]} *)in[{k}] + b * {step};")
    for k, (dtype, step) in enumerate(zip(kernel.outputs, out_strides)):
        lines.append(f"        outs[{k}] = ({C_TYPES[dtype]} *)out[{k}] + b * {step};")
    lines += [f"        {slab.name}(ins, outs, p, 1);", "    }", "    (void)threads;", "}", ""]
    return "\n".join(lines), name


# two reduced sizes no kernel has: a source rendered with each, the size then written as ``n0``,
# is the same text exactly when the size enters the kernel only as that count
_SENTINELS = (1000003, 1000033)
_PLACEHOLDER = "munet_dynamic_reduction"


def render_c_sized(kernel: Kernel):
    """``(source, entry name, count, rule)``: ``kernel`` with a run-time count ``n0 = p[len(kernel.params)]``
    in place of one size, or None when that size shapes more than loop bounds (then use
    :func:`render_c_slabs`).

    The size is the kernel's merged leading kept dims (:func:`merge_leading`: a ``(batch, time,
    width)`` kernel over contiguous buffers counts ``batch * time`` rows), or, for a reduction
    without kept dims to merge, its first reduced dim (a bias gradient sums over the batch, the
    outermost dim of every buffer it reads). The kernel is rendered with two sentinel sizes; a
    literal that is a multiple of the sentinel becomes ``n0`` times the quotient; the two texts must
    then agree, so any other use of the size (an index bound, another layout, a stride) rejects it.
    The loop nest is the static kernel's, with that bound read at run time, so each element is
    computed (each kept index summed) in the same order: the results are the same bits. ``rule`` says
    which size is counted (``"rows"`` or ``"reduced"``, for :func:`count_for`).
    """
    if kernel.reduce_shape and reduction_layout(kernel) == "window":
        return None
    merged = merge_leading(kernel)
    kept = None
    if merged.shape:
        kept = (merged, merged.shape[0], [((n, *merged.shape[1:]), tuple(merged.reduce_shape)) for n in _SENTINELS])
    reduced = None
    if kernel.reduce_shape:
        reduce_rest = tuple(kernel.reduce_shape[1:])
        reduced = (kernel, kernel.reduce_shape[0], [(tuple(kernel.shape), (n, *reduce_rest)) for n in _SENTINELS])
    # a column reduction (the batch outer, summed: a bias gradient) counts its reduced dim; others their rows
    first_reduced = reduced is not None and (kept is None or reduction_layout(kernel) == "columns")
    for rule, candidate in (
        (("reduced", reduced), ("rows", kept)) if first_reduced else (("rows", kept), ("reduced", reduced))
    ):
        if candidate is not None:
            found = _render_with_count(kernel, *candidate)
            if found is not None:
                return (*found, rule)
    return None


def count_for(rendered: Kernel, rule: str, kernel: Kernel) -> int | None:
    """The count ``kernel`` runs with when the source rendered for ``rendered`` under ``rule``
    (``"rows"``/``"reduced"``: :func:`render_c_sized`; ``"slabs"``: :func:`render_c_slabs`;
    ``"static"``: :func:`render_c`, no count, 0) computes it too: the two kernels differ in nothing but
    the counted size (a copy of a fused group at new sizes, ``compiler/resize.py``). Else None."""
    if rule == "rows":
        rendered, kernel = merge_leading(rendered), merge_leading(kernel)
    old, new = (rendered.shape, rendered.reduce_shape), (kernel.shape, kernel.reduce_shape)
    if rule in ("rows", "slabs"):
        same = old[0][1:] == new[0][1:] and old[1] == new[1] and len(old[0]) == len(new[0]) > 0
        count = kernel.shape[0] if same else None
    elif rule == "reduced":
        same = old[0] == new[0] and old[1][1:] == new[1][1:] and len(old[1]) == len(new[1]) > 0
        count = kernel.reduce_shape[0] if same else None
    else:
        count = 0 if old == new else None
    if count is None or (rule != "static" and count < 2):
        return None
    same_buffers = (rendered.inputs, rendered.params, rendered.outputs) == (
        kernel.inputs,
        kernel.params,
        kernel.outputs,
    )
    return count if same_buffers and same_expressions(rendered.stores, kernel.stores) else None


def _render_with_count(kernel: Kernel, merged: Kernel, count: int, shapes: list):
    """:func:`render_c_sized` for one choice of the counted size (``shapes``: per sentinel)."""
    if count < 2:
        return None
    texts = []
    for sentinel, (shape, reduce_shape) in zip(_SENTINELS, shapes):
        variant = Kernel(
            _PLACEHOLDER,
            shape,
            reduce_shape,
            list(merged.inputs),
            list(merged.params),
            list(merged.outputs),
            list(merged.stores),
        )
        if kernel.reduce_shape and reduction_layout(variant) != reduction_layout(kernel):
            return None
        source = render_c(variant, large=True)
        texts.append(re.sub(r"\b\d+\b", lambda m, s=sentinel: _as_count(m.group(0), s), source))
    if texts[0] != texts[1]:
        return None
    per_count = max(_numel(shapes[0][0]) * _numel(shapes[0][1]) // _SENTINELS[0], 1)  # elements per count
    count_n0 = f"const int64_t n0 = (int64_t)p[{len(kernel.params)}]; (void)n0;"
    text = with_run_time_counts(texts[0], [count_n0], f"n0 * {per_count}")
    name = "dyn_" + hashlib.sha1(text.encode()).hexdigest()[:16]
    return text.replace(_PLACEHOLDER, name), name, count


def _numel(shape) -> int:
    n = 1
    for size in shape:
        n *= size
    return n


def _as_count(literal: str, sentinel: int) -> str:
    value = int(literal)
    if value == 0 or value % sentinel:
        return literal
    return "n0" if value == sentinel else f"(n0 * {value // sentinel})"
