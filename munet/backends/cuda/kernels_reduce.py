"""Eager cuda reductions (sum, prod, amax, amin, argmax, argmin) as CUDA C.

``render_reduction(op, in_dtype, out_dtype, kept_rank=, reduced_rank=, layout=)`` returns a
:class:`ReductionSource`. The input is seen as a kept space (the output's, C-contiguous) times a
reduced space, each a shape with the input's element strides, so any dims of any view reduce
without a copy. ``layout="outputs"``: one thread per output walks its row in row-major order (no
shared memory; best for short rows and for rows strided across neighbouring outputs, such as a
column sum); ``"rows"``: one block of ``BLOCK`` threads per output, thread ``t`` combining
elements ``t, t + BLOCK, ...``, then a shared-memory tree (long contiguous rows).
:func:`choose_layout` picks one. Launching is the device side's::

    src = render_reduction("sum", "float32", "float32", kept_rank=1, reduced_rank=1, layout="rows")
    args = src.arguments(kept_shape, reduced_shape, out_ptr, (in_ptr, kept_strides, reduced_strides, offset))
    # grid src.grid(prod(kept_shape)), block src.block, args in order as (C type, value)

Semantics (the CPU backend's): ``sum``/``prod`` accumulate floats in double (one rounding at the
end; float16/bfloat16 included) and integers in 64 bits, wrapping; over an empty row they give
0/1. ``amax``/``amin`` propagate NaN. ``argmax``/``argmin`` give the row-major position in the
reduced space of the first extreme value, a NaN counting as the extreme (PyTorch's rule), as
``int64``. An empty row for ``amax``/``argmax`` is the caller's error to raise (the op does).
``index_bits`` as for the elementwise kernels (``kernels_elementwise.index_bits_for``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from munet.backends.cuda.kernels_elementwise import index_type
from munet.backends.cuda.scalar_cuda import (
    HEADER,
    PRELUDE,
    UnrenderableError,
    compute_dtype,
    ctype,
    literal,
    load,
    store,
)
from munet.backends.cuda.source import CudaSource
from munet.ops._scalar import FLOAT, kind

OPS = ("sum", "prod", "amax", "amin", "argmax", "argmin")
BLOCK = 256
SHORT_ROW = 64


@dataclass(frozen=True)
class ReductionSource(CudaSource):
    kept_rank: int = 0
    reduced_rank: int = 0
    index_bits: int = 64  # sizes, strides, offsets: unsigned 32-bit or long long

    def arguments(self, kept_shape, reduced_shape, out, source) -> list:
        """``[(C type, value), ...]`` in parameter order; ``source`` is ``(pointer, kept strides,
        reduced strides, offset)`` in elements, ``out`` the contiguous output's pointer."""
        pointer, kept_strides, reduced_strides, offset = source
        if len(kept_shape) != self.kept_rank or len(reduced_shape) != self.reduced_rank:
            raise ValueError(
                f"{self.name}: expected {self.kept_rank} kept and {self.reduced_rank} reduced dims, "
                f"got {tuple(kept_shape)} and {tuple(reduced_shape)}"
            )
        if any(int(st) < 0 for st in (*kept_strides, *reduced_strides)) or int(offset) < 0:
            raise ValueError(f"{self.name}: negative strides or offset")
        if len(kept_strides) != self.kept_rank or len(reduced_strides) != self.reduced_rank:
            raise ValueError(f"{self.name}: strides {tuple(kept_strides)}, {tuple(reduced_strides)} do not match")
        n_out, n_red = _prod(kept_shape), _prod(reduced_shape)
        values = [n_out, n_red, *kept_shape, *reduced_shape, out, pointer, offset, *kept_strides, *reduced_strides]
        return [(t, v) for (t, _), v in zip(self.params, values, strict=True)]


def _prod(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def choose_layout(reduced_numel: int, innermost_reduced_stride: int) -> str:
    """``'rows'`` for a long row read contiguously, else ``'outputs'``."""
    return "rows" if reduced_numel > SHORT_ROW and innermost_reduced_stride == 1 else "outputs"


def _accumulator(op: str, dtype: str) -> str:
    if op in ("sum", "prod"):
        return "double" if kind(dtype) == FLOAT else "long long"
    return ctype(compute_dtype(dtype))


def _coordinates(var: str, prefix: str, sizes: str, rank: int, index: str) -> list:
    if rank == 0:
        return []
    lines = [f"{index} rem_{prefix} = {var};"]
    for d in reversed(range(rank)):
        lines.append(f"const {index} {prefix}{d} = rem_{prefix} % {sizes}{d}; rem_{prefix} /= {sizes}{d};")
    return lines


def render_reduction(
    op: str,
    in_dtype: str,
    out_dtype: str,
    *,
    kept_rank: int,
    reduced_rank: int,
    layout: str = "outputs",
    index_bits: int = 64,
) -> ReductionSource:
    """The reduction kernel (see the module docstring for its parameters and semantics)."""
    if op not in OPS:
        raise UnrenderableError(f"cuda: no reduction kernel '{op}' (reductions: {', '.join(OPS)})")
    if layout not in ("outputs", "rows"):
        raise ValueError(f"render_reduction: layout must be 'outputs' or 'rows', got {layout!r}")
    acc = _accumulator(op, in_dtype)
    arg = op.startswith("arg")
    index = index_type(index_bits)
    params = [(index, "n_out"), (index, "n_red")]
    params += [(index, f"ksize{d}") for d in range(kept_rank)]
    params += [(index, f"rsize{d}") for d in range(reduced_rank)]
    params += [(f"{ctype(out_dtype)} *", "out"), (f"const {ctype(in_dtype)} *", "in"), (index, "in_off")]
    params += [(index, f"kst{d}") for d in range(kept_rank)]
    params += [(index, f"rst{d}") for d in range(reduced_rank)]
    at = " + ".join(
        ["in_off", *(f"k{d} * kst{d}" for d in range(kept_rank)), *(f"q{d} * rst{d}" for d in range(reduced_rank))]
    )
    init = {"sum": "0", "prod": "1"}.get(op, literal(0.0, compute_dtype(in_dtype)))
    row = [
        *_coordinates("r", "q", "rsize", reduced_rank, index),
        f"const {acc} v = ({acc}){load(in_dtype, f'in[{at}]')};",
        *_step(op),
    ]
    start, stride = ("0", "1") if layout == "outputs" else ("threadIdx.x", str(BLOCK))
    body = [
        *_coordinates("o", "k", "ksize", kept_rank, index),
        f"{acc} acc = {init}; long long key = -1;",
        f"for ({index} r = {start}; r < n_red; r += {stride}) {{",
        *("  " + line for line in row),
        "}",
    ]
    result = "key" if arg else "acc"
    if layout == "outputs":
        loop = f"for ({index} o = blockIdx.x * ({index})blockDim.x + threadIdx.x; o < n_out; o += ({index})blockDim.x * gridDim.x) {{"
        text = [loop, *("  " + line for line in body), f"  out[o] = {_store(out_dtype, result, acc, arg)};", "}"]
    else:
        text = [
            f"__shared__ {acc} part[{BLOCK}];",
            f"__shared__ long long part_key[{BLOCK}];",
            f"const {index} o = blockIdx.x;",
            "if (o >= n_out) return;  // the whole block: no thread waits at a barrier",
            *body,
            "part[threadIdx.x] = acc; part_key[threadIdx.x] = key;",
            "__syncthreads();",
            f"for (int s = {BLOCK // 2}; s > 0; s >>= 1) {{",
            "  if (threadIdx.x < s) {",
            f"    const {acc} v = part[threadIdx.x + s]; const long long vkey = part_key[threadIdx.x + s];",
            f"    {acc} acc = part[threadIdx.x]; long long key = part_key[threadIdx.x];",
            *("    " + line for line in _combine(op)),
            "    part[threadIdx.x] = acc; part_key[threadIdx.x] = key;",
            "  }",
            "  __syncthreads();",
            "}",
            f"if (threadIdx.x == 0) {{ const {acc} acc = part[0]; const long long key = part_key[0]; "
            f"out[o] = {_store(out_dtype, result, acc, arg)}; }}",
        ]
    signature = ", ".join(f"{t}{'' if t.endswith('*') else ' '}{n}" for t, n in params)
    unit = "\n".join([f'extern "C" __global__ void KERNEL({signature}) {{', *("  " + line for line in text), "}"])
    name = f"munet_{op}_{in_dtype}_{hashlib.sha1(unit.encode()).hexdigest()[:12]}"
    source = "\n".join([HEADER, PRELUDE, unit.replace("KERNEL", name, 1)]) + "\n"
    return ReductionSource(name, source, tuple(params), BLOCK, layout, kept_rank, reduced_rank, index_bits)


def _store(out_dtype: str, value: str, acc: str, arg: bool) -> str:
    return store(out_dtype, value, "int64" if arg else {"double": "float64", "long long": "int64"}.get(acc, "float32"))


_BETTER = {"argmax": ">", "argmin": "<", "amax": ">", "amin": "<"}


def _step(op: str) -> list:
    """One element ``v`` at position ``r`` into ``acc`` (and ``key``), walking in row-major order."""
    if op == "sum":
        return ["acc += v;"]
    if op == "prod":
        return ["acc *= v;"]
    # amax/amin: a NaN accumulator stays, a NaN element takes over (NaN propagates); argmax/argmin: the
    # first extreme wins and the first NaN beats everything, so both are this one rule
    return [f"if (key < 0 || acc == acc && (v != v || v {_BETTER[op]} acc)) {{ acc = v; key = r; }}"]


def _combine(op: str) -> list:
    """Partial ``(v, vkey)`` into ``(acc, key)`` in the tree (a key of -1: an empty partial)."""
    if op == "sum":
        return ["acc += v;"]
    if op == "prod":
        return ["acc *= v;"]
    sign = _BETTER[op]
    takes = (
        f"vkey >= 0 && (key < 0 || (v != v && (acc == acc || vkey < key)) || "
        f"(acc == acc && v == v && (v {sign} acc || (v == acc && vkey < key))))"
    )
    return [f"if ({takes}) {{ acc = v; key = vkey; }}"]
