"""The reduction template of the vulkan kernels: a row reduction as a monoid over strided rows.

A reduction is a :class:`Monoid` (a WGSL struct ``S`` with an identity, a commutative
``combine`` and a ``load`` of one element). :class:`Rows` sees operands of one shape as
(row ``o``, position ``j``): ``o`` runs over the kept dims, ``j`` over the reduced ones, and
each operand is read in place through its strides. :func:`reduce_source` is the one WGSL
template: one workgroup per (row, chunk) folds its strided share of the row, then a
workgroup-memory tree combines the partial states (or, ``serial``, one invocation per short row
folds it in order). :func:`reduce_rows` runs it, in two passes for rows longer than
``LONG_ROW`` with few rows: chunks are reduced into packed partial states, which a second pass
combines. ``kernels_reduce`` (sum, amax, amin), ``kernels_rows`` (softmax, norms, prod, the
boolean reductions, max/min along a dim) and ``kernels_scan`` all build on it; the fused
reductions of ``codegen/wgsl.py`` follow the same ``SHORT_ROW``/``CHUNK`` layout, so they give
the same bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from munet import _dtype as D
from munet._tensor import contiguous_strides
from munet.backends.vulkan.copies import new_view
from munet.backends.vulkan.views import VkView, coalesce, storage_type
from munet.backends.vulkan.wgsl import PRELUDE, WORKGROUP, scalar_word

CHUNK = 8192  # very long rows into few outputs are split into chunks of this length
SHORT_ROW = 32  # rows up to this length may be folded in order by one invocation each
LONG_ROW = 8 * CHUNK
FIRST_SCALAR = 4


# geometry -----------------------------------------------------------------------------------------


class Rows:
    """Views of one ``shape`` as rows: ``row_at{v}(o)`` and ``col_at{v}(j)`` give element offsets.

    ``o`` enumerates the kept dims and ``j`` the dims in ``dims`` (both row-major); dims that
    are contiguous in every view are merged, so the WGSL index arithmetic stays short.
    """

    def __init__(self, shape, dims, views):
        kept = [d for d in range(len(shape)) if d not in dims]
        self.rows = math.prod(shape[d] for d in kept)
        self.length = math.prod(shape[d] for d in dims)
        self.kshape, self.kstrides = _merged([shape[d] for d in kept], [[v.strides[d] for d in kept] for v in views])
        self.rshape, self.rstrides = _merged([shape[d] for d in dims], [[v.strides[d] for d in dims] for v in views])
        self.offsets = [v.offset for v in views]

    def params(self) -> list:
        out = [*self.offsets, *self.kshape]
        for s in self.kstrides:
            out += s
        out += self.rshape
        for s in self.rstrides:
            out += s
        return out

    def wgsl(self, base: int) -> str:
        n, kr, rr = len(self.offsets), len(self.kshape), len(self.rshape)
        kshape_at = base + n
        kstr_at = kshape_at + kr
        rshape_at = kstr_at + n * kr
        rstr_at = rshape_at + rr
        fns = []
        for v in range(n):
            fns.append(_offset_fn(f"row_at{v}", "o", f"P[{base + v}]", kshape_at, kstr_at + v * kr, kr))
            fns.append(_offset_fn(f"col_at{v}", "j", "0u", rshape_at, rstr_at + v * rr, rr))
        return "\n".join(fns)


def _merged(shape, stride_sets):
    shape, strides = coalesce(shape, *stride_sets)
    if not shape:
        return (1,), [(0,) for _ in stride_sets]
    return shape, strides


def _offset_fn(name: str, index: str, start: str, shape_at: int, stride_at: int, rank: int) -> str:
    lines = [f"fn {name}({index}: u32) -> u32 {{", f"  var rem = {index};", f"  var off = {start};"]
    for d in reversed(range(rank)):
        lines.append(f"  off += (rem % P[{shape_at + d}]) * P[{stride_at + d}]; rem = rem / P[{shape_at + d}];")
    lines += ["  return off;", "}"]
    return "\n".join(lines)


def keep_shape(shape, dims) -> tuple:
    return tuple(1 if d in dims else n for d, n in enumerate(shape))


def reshaped(view: VkView, shape) -> VkView:
    """A contiguous ``view`` seen with another ``shape`` of the same size."""
    return VkView(view.buffer, tuple(shape), contiguous_strides(shape), view.offset, view.dtype)


# monoids and the reduction template ----------------------------------------------------------------


@dataclass(frozen=True)
class Monoid:
    """A row reduction: ``S`` has fields ``f0, f1, ...`` of ``types``.

    ``combine`` (body of ``fn combine(a: S, b: S) -> S``) must be commutative and associative;
    ``load`` (body of ``fn load(v0, v1, ..., j) -> S``) lifts one element at position ``j``.
    ``sc(i)`` reads the i-th float scalar parameter.
    """

    types: tuple
    identity: str
    combine: str
    load: str


def struct_source(m: Monoid) -> str:
    fields = ", ".join(f"f{i}: {t}" for i, t in enumerate(m.types))
    return f"""struct S {{ {fields} }}
fn identity() -> S {{ return {m.identity}; }}
fn combine(a: S, b: S) -> S {{ {m.combine} }}
fn sc(i: u32) -> f32 {{ return bitcast<f32>(P[{FIRST_SCALAR}u + i]); }}"""


def _word(t: str, expr: str) -> str:
    return expr if t == "u32" else f"bitcast<u32>({expr})"


def _unword(t: str, expr: str) -> str:
    return expr if t == "u32" else f"bitcast<{t}>({expr})"


def pack_fn(m: Monoid, buf: str) -> str:
    w = len(m.types)
    stores = "\n".join(f"  {buf}[i * {w}u + {k}u] = {_word(t, f's.f{k}')};" for k, t in enumerate(m.types))
    return f"fn pack(i: u32, s: S) {{\n{stores}\n}}"


def unpack_fn(m: Monoid, buf: str) -> str:
    w = len(m.types)
    fields = ", ".join(_unword(t, f"{buf}[i * {w}u + {k}u]") for k, t in enumerate(m.types))
    return f"fn unpack(i: u32) -> S {{ return S({fields}); }}"


def binding_lines(outs, ins) -> str:
    lines = ["@group(0) @binding(0) var<storage, read> P: array<u32>;"]
    for k, kind in enumerate(outs):
        lines.append(f"@group(0) @binding({1 + k}) var<storage, read_write> OUT{k}: array<{kind}>;")
    for k, kind in enumerate(ins):
        lines.append(f"@group(0) @binding({1 + len(outs) + k}) var<storage, read> IN{k}: array<{kind}>;")
    return "\n".join(lines)


def kernel_head(m: Monoid, in_kinds, out_kinds, head: str) -> str:
    """What a row kernel declares before its entry point: the prelude, its bindings, ``S`` and ``head``."""
    return f"{PRELUDE}\n{binding_lines(out_kinds, in_kinds)}\n{struct_source(m)}\n{head}"


def row_reads(m: Monoid, in_kinds, geometry: str | None) -> tuple[str, str, str]:
    """``(declarations, lines finding row o's bases, the read of position j as an S)`` of a row kernel.

    With ``geometry`` None the input is IN0, packed states of a previous pass (``o * P[1] + j``).
    """
    if geometry is None:
        return unpack_fn(m, "IN0"), "", "unpack(o * P[1] + j)"
    args = ", ".join(f"v{k}: {kind}" for k, kind in enumerate(in_kinds))
    head = f"fn load({args}, j: u32) -> S {{ {m.load} }}\n{geometry}"
    bases = " ".join(f"let b{k} = row_at{k}(o);" for k in range(len(in_kinds)))
    reads = ", ".join(f"IN{k}[b{k} + col_at{k}(j)]" for k in range(len(in_kinds)))
    return head, bases, f"load({reads}, j)"


def row_main(wg: int, serial: bool) -> str:
    """A row kernel's entry point up to its row ``o``, chunk ``c`` and positions ``lo..hi``.

    P starts ``[rows, length, chunks, chunk length]``. One workgroup of ``wg`` per (row, chunk)
    (thread ``t``), or ``serial``: one invocation per (row, chunk).
    """
    if serial:
        entry = f"""@compute @workgroup_size({wg})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let g = gid.x + gid.y * nwg.x * {wg}u;"""
    else:
        entry = f"""@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {{
  let g = wid.x + wid.y * nwg.x;"""
    return (
        entry
        + """
  if (g >= P[0] * P[2]) { return; }
  let o = g / P[2];
  let c = g % P[2];
  let lo = c * P[3];
  let hi = min(P[1], lo + P[3]);"""
    )


def reduce_source(
    m: Monoid, in_kinds, out_kinds, finish: str, geometry: str | None, wg: int, extra: str = "", serial: bool = False
) -> str:
    """One workgroup per (row, chunk) folds ``j`` in the chunk, then a tree; ``finish`` sees ``s``.

    With ``geometry`` None the input is IN0, packed states of the previous pass. ``serial``: one
    thread per (short) row instead.
    """
    head, bases, read = row_reads(m, in_kinds, geometry)
    fold = f"{bases}\n  for (var j = lo + t; j < hi; j = j + WGu) {{ acc = combine(acc, {read}); }}"
    if serial:
        return f"""{kernel_head(m, in_kinds, out_kinds, head)}
{extra}
{row_main(WORKGROUP, serial=True)}
  let t = 0u;
  var acc = identity();
  {fold}
  let s = acc;
{finish}
}}
""".replace("WGu", "1u")
    return f"""{kernel_head(m, in_kinds, out_kinds, head)}
{extra}
var<workgroup> part: array<S, {wg}>;
{row_main(wg, serial=False)}
  var acc = identity();
  {fold}
  part[t] = acc;
  workgroupBarrier();
  for (var s = {wg // 2}u; s > 0u; s = s >> 1u) {{
    if (t < s) {{ part[t] = combine(part[t], part[t + s]); }}
    workgroupBarrier();
  }}
  if (t == 0u) {{
    let s = part[0];
{finish}
  }}
}}
""".replace("WGu", f"{wg}u")


def workgroup_for(length: int) -> int:
    return 64 if length <= 64 else WORKGROUP


def chunks_for(rows: int, length: int) -> int:
    if length > LONG_ROW and rows < 256:
        return min(-(-length // CHUNK), 1024)
    return 1


def reduce_rows(rt, m: Monoid, inputs, dims, outputs, scalars=(), shape=None) -> list:
    """Reduce ``inputs`` (views of one shape) over ``dims``; one contiguous view per output.

    ``outputs`` are ``(dtype, wgsl expression of the final state s)``; each result has the
    kept dims' shape with size-1 reduced dims (reshape with :func:`reshaped`).
    """
    shape = tuple(inputs[0].shape if shape is None else shape)
    dims = tuple(sorted(dims))
    geo = Rows(shape, dims, inputs)
    results = [new_view(rt, keep_shape(shape, dims), dtype) for dtype, _ in outputs]
    if geo.rows == 0:
        return results
    in_kinds = [storage_type(v.dtype) for v in inputs]
    out_kinds = [storage_type(dtype) for dtype, _ in outputs]
    words = [scalar_word("f32", s) for s in scalars]
    finish = "\n".join(f"    OUT{k}[o] = {expr};" for k, (_, expr) in enumerate(outputs))
    buffers = [r.buffer for r in results]
    chunks = chunks_for(geo.rows, geo.length)
    chunk_len = -(-geo.length // chunks)
    head = [geo.rows, geo.length, chunks, chunk_len, *words]
    wg = workgroup_for(chunk_len)
    geometry = geo.wgsl(len(head))
    if chunks == 1:
        serial = geo.length <= SHORT_ROW and geo.rows >= WORKGROUP
        source = reduce_source(m, in_kinds, out_kinds, finish, geometry, wg, serial=serial)
        groups = rt.grid(-(-geo.rows // WORKGROUP) if serial else geo.rows)
        rt.dispatch(source, buffers + [v.buffer for v in inputs], [True] * len(buffers) + [False] * len(inputs),
                    head + geo.params(), groups)  # fmt: skip
        return results
    # pass 1: chunk states, packed; pass 2: combine each row's chunks
    partial = new_view(rt, (geo.rows * chunks * len(m.types),), D.int32)
    first = reduce_source(m, in_kinds, ["u32"], "    pack(g, s);", geometry, wg, pack_fn(m, "OUT0"))
    rt.dispatch(first, [partial.buffer] + [v.buffer for v in inputs], [True] + [False] * len(inputs),
                head + geo.params(), rt.grid(geo.rows * chunks))  # fmt: skip
    second = reduce_source(m, ["u32"], out_kinds, finish, None, workgroup_for(chunks))
    params = [geo.rows, chunks, 1, chunks, *words]
    rt.dispatch(second, buffers + [partial.buffer], [True] * len(buffers) + [False], params, rt.grid(geo.rows))
    return results
