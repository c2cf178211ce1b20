"""Kernels whose leading dim is a run-time count (``munet.compile(dynamic=True)`` on cpu).

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

from munet.compiler.codegen.c import C_TYPES, PARALLEL_MIN_ELEMENTS, reduction_layout, render_c
from munet.compiler.codegen.kernel import Apply, Index, Kernel, Load, Reduce, Store, StoreFull


def slab_kernel(kernel: Kernel):
    """``(slab, input leading strides, output leading strides)`` in elements, or None (see the module docstring)."""
    if not kernel.shape:
        return None
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
    digest = hashlib.sha1(repr((kernel.shape[1:], kernel.reduce_shape, stores)).encode()).hexdigest()[:16]
    slab = Kernel(
        f"slab_{digest}",
        tuple(kernel.shape[1:]),
        kernel.reduce_shape,
        list(kernel.inputs),
        list(kernel.params),
        list(kernel.outputs),
        stores,
    )
    if kernel.reduce_shape and reduction_layout(slab) != reduction_layout(kernel):
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
