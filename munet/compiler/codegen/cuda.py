"""Render a kernel IR :class:`Kernel` as CUDA C for the cuda backend.

``render_cuda(kernel) -> CudaSource`` (``munet/backends/cuda/source.py``) gives one translation
unit exporting ``extern "C" __global__ void <kernel.name>(const T *in0, ..., T *out0, ...,
const double *p[, unsigned long long *munet_fault_record])``: the C-contiguous input and output
buffers, then the runtime scalars in a device array (a learning rate is data read at each replay, so
one kernel, and one captured CUDA graph, serves every step), and, for a kernel that divides integers
(``floor_divide``, ``fmod``: a zero divisor records PyTorch's ZeroDivisionError), the device's fault
record (``munet/backends/cuda/device_asserts.py``; :func:`takes_fault_record`). Shapes and strides
are fixed per compiled graph and written into the source as constants; dims that every access walks
contiguously are collapsed (``c.collapse``).
Index arithmetic is 32-bit unsigned when every index fits (:func:`index_bits`), else 64-bit.
Each scalar op is printed by the cuda backend's table (``munet/backends/cuda/scalar_cuda.py``),
which the eager kernels use too, so fused and unfused kernels compute alike.

Layouts (:func:`reduction_layout`):

- ``elements``: an elementwise kernel, one thread per index in a grid-stride loop; all of an
  index's loads happen before its stores (an in-place state update is safe, see
  ``kernel.loads_only_at_write_index``).
- ``outputs``: a reduction whose rows are short or strided (a bias gradient summed over the
  batch: neighbouring threads read neighbouring columns), one thread per kept index walking its
  row in order; no shared memory.
- ``rows``: a reduction over long contiguous rows, one block of 256 threads per kept index:
  thread ``t`` combines elements ``t, t + 256, ...`` in order, then a shared-memory tree, then
  thread 0 runs the epilogue.

Sums accumulate in double whatever the dtype (the kernel IR asks float32 sums to be at least as
accurate as NumPy's pairwise sum); ``max`` propagates NaN; ``argmax`` (pooling windows) follows
the kernel IR's rule (first strict maximum, the last NaN) in the ``outputs`` layout only.
Anything else raises :class:`UnsupportedKernelError`.
"""

from __future__ import annotations

import numpy as np

from munet.backends.cuda.scalar_cuda import HEADER, PRELUDE, Emitter, UnrenderableError, ctype, literal
from munet.backends.cuda.source import CudaSource
from munet.compiler.codegen.c import collapse
from munet.compiler.codegen.kernel import (
    Index,
    Kernel,
    Load,
    Param,
    Reduce,
    StoreFull,
    UnsupportedKernelError,
    contiguous_strides,
)

BLOCK = 256
SHORT_ROW = 64  # rows up to this long are walked by one thread even when contiguous


def _emitter(index_of, lines: list, prefix: str = "t", reduced=None) -> Emitter:
    """The backend's formula emitter, with the kernel IR's leaves bound: loads, indices, runtime scalars."""

    def bind(e):
        if isinstance(e, Load):
            return f"in{e.buffer}[{index_of(e)}]"
        if isinstance(e, Index):
            return f"(long long)({index_of(e)})"
        if isinstance(e, Param):
            return f"(({ctype(e.dtype)})p[{e.index}])"
        if isinstance(e, Reduce):
            raise UnsupportedKernelError(
                "render_cuda: a Reduce inside another Reduce (the kernel IR does not nest them)"
            )
        return None

    return Emitter(bind, lines, prefix, reduced, fault_record=True)


def _walk(exprs, inside: bool = False) -> tuple:
    """``(loads and indices, reduces)`` under ``exprs``: outside any Reduce, or (``inside``) within them."""
    found, reduces, seen = [], [], set()
    stack = [(e, inside) for e in exprs]
    while stack:
        e, within = stack.pop()
        if (e, within) in seen:
            continue
        seen.add((e, within))
        if isinstance(e, (Load, Index)) and within == inside:
            found.append(e)
        if isinstance(e, Reduce):
            if e not in reduces:
                reduces.append(e)
            stack.append((e.expr, True))
            if e.key is not None:
                stack.append((e.key, True))
        stack.extend((a, within) for a in getattr(e, "args", ()))
    return found, reduces


def _numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _coords(index: str, shape, prefix: str) -> list:
    """Lines defining ``{prefix}0..`` as the coordinates of linear ``index`` over ``shape``."""
    if not shape:
        return []
    if len(shape) == 1:
        return [f"const munet_idx {prefix}0 = {index};"]
    lines = [f"munet_idx rem_{prefix} = {index};"]
    for d in reversed(range(len(shape))):
        lines.append(f"const munet_idx {prefix}{d} = rem_{prefix} % {shape[d]}; rem_{prefix} /= {shape[d]};")
    return lines


def _index(names, strides, offset: int = 0) -> str:
    terms = [n if st == 1 else f"{n} * {st}" for n, st in zip(names, strides) if st != 0]
    if offset:
        terms.append(f"{offset}")
    return " + ".join(terms) or "0"


FAULT_RECORD = ("unsigned long long *", "munet_fault_record")


def _signature(kernel: Kernel, faults: bool) -> tuple:
    params = [(f"const {ctype(dt)} *", f"in{k}") for k, dt in enumerate(kernel.inputs)]
    params += [(f"{ctype(dt)} *", f"out{k}") for k, dt in enumerate(kernel.outputs)]
    params.append(("const double *", "p"))
    if faults:
        params.append(FAULT_RECORD)
    return tuple(params)


def takes_fault_record(src: CudaSource) -> bool:
    """Whether a rendered fused kernel's last parameter is the device's fault record (it divides integers)."""
    return src.params[-1] == FAULT_RECORD


def _unit(kernel: Kernel, body: list, layout: str) -> CudaSource:
    params = _signature(kernel, any(FAULT_RECORD[1] in line for line in body))
    header = f"// {kernel.name}: {len(kernel.stores)} outputs over {list(kernel.shape)}"
    if kernel.reduce_shape:
        header += f", reducing {list(kernel.reduce_shape)} ({layout})"
    head = f'extern "C" __global__ void {kernel.name}({", ".join(t + n for t, n in params)}) {{'
    index = f"typedef {'unsigned' if index_bits(kernel) == 32 else 'long long'} munet_idx;"
    source = "\n".join([HEADER, PRELUDE, header, head, "  " + index, *("  " + line for line in body), "}"]) + "\n"
    return CudaSource(kernel.name, source, params, BLOCK, layout)


def index_bits(kernel: Kernel) -> int:
    """32 when every index the kernel computes (the full space's, each load's, store's and
    Index's) is below 2**31, else 64: 32-bit index arithmetic is several times cheaper."""
    sizes = tuple(kernel.shape) + tuple(kernel.reduce_shape)
    reach = [_numel(sizes) + 1]
    stack = [st.expr for st in kernel.stores]
    seen: set = set()
    for st in kernel.stores:
        if isinstance(st, StoreFull):
            reach.append(sum((n - 1) * s for n, s in zip(sizes, st.strides)))
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if isinstance(e, (Load, Index)):
            reach.append(e.offset + sum((n - 1) * abs(s) for n, s in zip(sizes, e.strides)))
        if isinstance(e, Reduce):
            stack.append(e.expr)
            if e.key is not None:
                stack.append(e.key)
        stack.extend(getattr(e, "args", ()))
    return 32 if max(reach) < 2**31 else 64


def _check_dtypes(kernel: Kernel) -> None:
    for what, dtypes in (("input", kernel.inputs), ("output", kernel.outputs)):
        for k, dt in enumerate(dtypes):
            if dt is None:
                raise UnsupportedKernelError(f"render_cuda: {what} {k} has a dtype fused kernels do not hold")


def render_cuda(kernel: Kernel) -> CudaSource:
    """The CUDA C of ``kernel`` (see the module docstring for its signature and layouts)."""
    try:
        return _render(kernel)
    except UnrenderableError as error:
        raise UnsupportedKernelError(f"render_cuda: {error}") from error


def _render(kernel: Kernel) -> CudaSource:
    _check_dtypes(kernel)
    layout = reduction_layout(kernel)
    if layout == "elements":
        return _unit(kernel, _elementwise_body(kernel), layout)
    return _unit(kernel, (_row_body if layout == "rows" else _serial_body)(kernel), layout)


def reduction_layout(kernel: Kernel) -> str:
    """``'elements'``, ``'outputs'`` or ``'rows'`` (see the module docstring)."""
    if not kernel.reduce_shape:
        return "elements"
    inside, reduces = _walk([st.expr for st in kernel.stores if isinstance(st, StoreFull)], True)
    loads, more = _walk([st.expr for st in kernel.stores if not isinstance(st, StoreFull)], True)
    reduces += more
    if any(r.op not in ("sum", "max", "argmax") for r in reduces):
        raise UnsupportedKernelError(f"render_cuda: reductions {sorted({r.op for r in reduces})}")
    if any(r.op == "argmax" for r in reduces) or _numel(kernel.reduce_shape) <= SHORT_ROW:
        return "outputs"
    k = len(kernel.shape)
    contiguous = [ld for ld in inside + loads if isinstance(ld, Load) and ld.strides[k:] and ld.strides[-1] == 1]
    return "rows" if contiguous else "outputs"


def _elementwise_body(kernel: Kernel) -> list:
    loads, _ = _walk([st.expr for st in kernel.stores])
    shape, collapsed = collapse(kernel.shape, [contiguous_strides(kernel.shape)] + [ld.strides for ld in loads])
    per_load = {ld: collapsed[k + 1] for k, ld in enumerate(loads)}
    names = [f"c{d}" for d in range(len(shape))]
    lines = _coords("idx", shape, "c")
    emitter = _emitter(lambda ld: _index(names, per_load[ld], ld.offset), lines)
    values = [(st.buffer, emitter.emit(st.expr)) for st in kernel.stores]
    lines += [f"out{b}[idx] = {v};" for b, v in values]
    loop = f"for (munet_idx idx = blockIdx.x * (munet_idx)blockDim.x + threadIdx.x; idx < {kernel.numel}; idx += (munet_idx)blockDim.x * gridDim.x) {{"
    return [loop, *("  " + line for line in lines), "}"]


def _parts(kernel: Kernel):
    """``(names, index_of, outside Stores, StoreFulls, reduces)`` over uncollapsed coordinates."""
    names = [f"c{d}" for d in range(len(kernel.shape))] + [f"q{d}" for d in range(len(kernel.reduce_shape))]

    def index_of(e) -> str:
        return _index(names, e.strides, e.offset)

    outside = [st for st in kernel.stores if not isinstance(st, StoreFull)]
    fulls = [st for st in kernel.stores if isinstance(st, StoreFull)]
    _, reduces = _walk([st.expr for st in outside])
    return names, index_of, outside, fulls, reduces


def _accumulators(reduces) -> list:
    lines = []
    for j, r in enumerate(reduces):
        if r.op == "sum":
            lines.append(f"double acc{j} = 0.0;")
        elif r.op == "max":
            lines.append(f"{ctype(r.dtype)} acc{j} = {literal(float('-inf'), r.dtype)};")
        else:
            lines.append(f"{ctype(r.expr.dtype)} best{j} = 0; long long key{j} = 0, nan{j} = -1;")
    return lines


def _max_into(acc: str, v: str) -> str:
    return f"{acc} = ({acc} >= {v} || {acc} != {acc}) ? {acc} : {v};"  # NumPy's max: NaN propagates


def _row_loop(kernel, names, index_of, fulls, reduces, start: str, step: str) -> list:
    """The loop over reduction indices ``r = start, start + step, ...``: prologue, combine, full stores."""
    loop = _coords("r", kernel.reduce_shape, "q")
    inner = _emitter(index_of, loop, prefix="u")
    for j, r in enumerate(reduces):
        v = inner.emit(r.expr)
        if r.op == "sum":
            loop.append(f"acc{j} += (double){v};")
        elif r.op == "max":
            loop.append(_max_into(f"acc{j}", v))
        else:  # argmax: the first cell starts it, a strictly greater one replaces it, the last NaN wins
            key = inner.emit(r.key)
            loop.append(f"if (r == 0 || {v} > best{j}) {{ best{j} = {v}; key{j} = {key}; }}")
            loop.append(f"if ({v} != {v}) nan{j} = {key};")
    for st in kernel.stores:
        if isinstance(st, StoreFull):
            loop.append(f"out{st.buffer}[{_index(names, st.strides)}] = {inner.emit(st.expr)};")
    rows = _numel(kernel.reduce_shape)
    return [f"for (munet_idx r = {start}; r < {rows}; r += {step}) {{", *("  " + line for line in loop), "}"]


def _result(j: int, r) -> str:
    if r.op == "sum":
        return f"({ctype(r.dtype)})acc{j}"
    if r.op == "max":
        return f"acc{j}"
    return f"(nan{j} >= 0 ? nan{j} : key{j})"


def _epilogue(index_of, outside, reduces, results) -> list:
    lines = [f"const {ctype(r.dtype)} red{j} = {results[j]};" for j, r in enumerate(reduces)]
    em = _emitter(index_of, lines, prefix="e", reduced={r: f"red{j}" for j, r in enumerate(reduces)})
    values = [(st.buffer, em.emit(st.expr)) for st in outside]
    return lines + [f"out{b}[idx] = {v};" for b, v in values]


def _serial_body(kernel: Kernel) -> list:
    names, index_of, outside, fulls, reduces = _parts(kernel)
    body = _coords("idx", kernel.shape, "c") + _accumulators(reduces)
    body += _row_loop(kernel, names, index_of, fulls, reduces, "0", "1")
    body += _epilogue(index_of, outside, reduces, [_result(j, r) for j, r in enumerate(reduces)])
    loop = f"for (munet_idx idx = blockIdx.x * (munet_idx)blockDim.x + threadIdx.x; idx < {kernel.numel}; idx += (munet_idx)blockDim.x * gridDim.x) {{"
    return [loop, *("  " + line for line in body), "}"]


def _row_body(kernel: Kernel) -> list:
    names, index_of, outside, fulls, reduces = _parts(kernel)
    lines = [
        f"__shared__ {'double' if r.op == 'sum' else ctype(r.dtype)} part{j}[{BLOCK}];" for j, r in enumerate(reduces)
    ]
    lines += ["const munet_idx idx = blockIdx.x;", "const int t = threadIdx.x;"]
    lines.append(f"if (idx >= {kernel.numel}) return;  // the whole block: no thread waits at a barrier")
    lines += _coords("idx", kernel.shape, "c") + _accumulators(reduces)
    lines += _row_loop(kernel, names, index_of, fulls, reduces, "t", f"{BLOCK}")
    lines += [f"part{j}[t] = acc{j};" for j in range(len(reduces))]
    lines.append("__syncthreads();")
    combine = []
    for j, r in enumerate(reduces):
        a, b = f"part{j}[t]", f"part{j}[t + s]"
        combine.append(f"{a} += {b};" if r.op == "sum" else _max_into(a, b))
    lines += [
        f"for (int s = {BLOCK // 2}; s > 0; s >>= 1) {{",
        f"  if (t < s) {{ {' '.join(combine)} }}",
        "  __syncthreads();",
        "}",
    ]
    results = [f"({ctype(r.dtype)})part{j}[0]" if r.op == "sum" else f"part{j}[0]" for j, r in enumerate(reduces)]
    epilogue = _epilogue(index_of, outside, reduces, results)
    return [*lines, "if (t == 0) {", *("  " + line for line in epilogue), "}"]
