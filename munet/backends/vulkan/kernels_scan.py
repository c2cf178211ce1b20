"""Scans: cumsum, cumprod, cummax, cummin and their gradient kernels.

One workgroup per row walks the row in tiles of 256: each tile is scanned in workgroup
memory (Hillis-Steele over the monoid's ``S``) and offset by the carry of the tiles before
it. Rows longer than ``LONG_ROW`` with few rows take three passes: each chunk is reduced to
its total (the row reduction of ``kernels_rows``), the totals of each row are scanned, and
each chunk is scanned again starting from the total of the chunks before it.
"""

from __future__ import annotations

from munet import _dtype as D
from munet._determinism import alert_not_deterministic
from munet._device import DeviceError
from munet.backends.vulkan.copies import clone, copy_into, new_view
from munet.backends.vulkan.kernels_rows import _ADD, _ONE, pick_monoid, stats_views
from munet.backends.vulkan.reduction import (
    SHORT_ROW,
    Monoid,
    Rows,
    chunks_for,
    kernel_head,
    pack_fn,
    reduce_rows,
    reduce_source,
    row_main,
    row_reads,
)
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import VkView, compute_dtype, storage_type
from munet.backends.vulkan.wgsl import PRELUDE, WORKGROUP, Scalar, elementwise


def _scan_source(
    m: Monoid, in_kinds, out_kinds, emit: str, geometry: str | None, reverse: bool, carry: bool, serial: bool = False
) -> str:
    """One workgroup per (row, chunk); ``emit`` writes the inclusive state ``r`` at position ``j``.

    With ``geometry`` None, IN0 holds packed states (``o * P[1] + j``). With ``carry``, the last
    input holds the packed inclusive scan of the chunk totals. ``serial``: one thread per short row.
    """
    wg = WORKGROUP
    head, bases, read = row_reads(m, in_kinds, geometry)
    start = ""
    if carry:
        n_in = len(in_kinds)
        w = len(m.types)
        fields = ", ".join(
            (f"IN{n_in}[q * {w}u + {k}u]" if t == "u32" else f"bitcast<{t}>(IN{n_in}[q * {w}u + {k}u])")
            for k, t in enumerate(m.types)
        )
        before = "c + 1u < P[2]" if reverse else "c > 0u"
        q = "o * P[2] + c + 1u" if reverse else "o * P[2] + c - 1u"
        start = f"if ({before}) {{ let q = {q}; carry = S({fields}); }}"
        in_kinds = [*in_kinds, "u32"]
    j = "hi - 1u - p" if reverse else "lo + p"
    if serial:
        return f"""{kernel_head(m, in_kinds, out_kinds, head)}
{row_main(wg, serial=True)}
  {bases}
  var carry = identity();
  {start}
  for (var p = 0u; p < hi - min(lo, hi); p = p + 1u) {{
    let j = {j};
    let r = combine(carry, {read});
{emit}
    carry = r;
  }}
}}
"""
    return f"""{kernel_head(m, in_kinds, out_kinds, head)}
var<workgroup> part: array<S, {wg}>;
{row_main(wg, serial=False)}
  {bases}
  var carry = identity();
  {start}
  for (var s0 = 0u; s0 < hi - min(lo, hi); s0 = s0 + {wg}u) {{
    let p = s0 + t;
    let live = p < hi - lo;
    let j = {j};
    var v = identity();
    if (live) {{ v = {read}; }}
    part[t] = v;
    workgroupBarrier();
    for (var d = 1u; d < {wg}u; d = d << 1u) {{
      var w = part[t];
      if (t >= d) {{ w = combine(part[t - d], w); }}
      workgroupBarrier();
      part[t] = w;
      workgroupBarrier();
    }}
    let r = combine(carry, part[t]);
    if (live) {{
{emit}
    }}
    carry = combine(carry, part[{wg - 1}u]);
    workgroupBarrier();
  }}
}}
"""


def scan_rows(rt, m: Monoid, inputs, dim: int, outputs, reverse: bool = False) -> list:
    """Inclusive scan of ``inputs`` along ``dim``; ``outputs`` are ``(dtype, [exprs of r])`` per output."""
    shape = tuple(inputs[0].shape)
    results = [new_view(rt, shape, dtype) for dtype, _ in outputs]
    geo = Rows(shape, (dim,), [*inputs, *results])
    if geo.rows == 0 or geo.length == 0:
        return results
    n_in = len(inputs)
    in_kinds = [storage_type(v.dtype) for v in inputs]
    out_kinds = [storage_type(dtype) for dtype, _ in outputs]
    emit = "\n".join(
        f"      OUT{k}[row_at{n_in + k}(o) + col_at{n_in + k}(j)] = {expr};" for k, (_, expr) in enumerate(outputs)
    )
    chunks = chunks_for(geo.rows, geo.length)
    chunk_len = -(-geo.length // chunks)
    head = [geo.rows, geo.length, chunks, chunk_len]
    geometry = geo.wgsl(len(head))
    buffers = [r.buffer for r in results] + [v.buffer for v in inputs]
    writable = [True] * len(results) + [False] * n_in
    params = head + geo.params()
    if chunks == 1:
        serial = geo.length <= SHORT_ROW
        source = _scan_source(m, in_kinds, out_kinds, emit, geometry, reverse, False, serial)
        groups = rt.grid(-(-geo.rows // WORKGROUP) if serial else geo.rows)
        rt.dispatch(source, buffers, writable, params, groups)
        return results
    w = len(m.types)
    totals = new_view(rt, (geo.rows * chunks * w,), D.int32)
    prefix = new_view(rt, (geo.rows * chunks * w,), D.int32)
    in_geo = Rows(shape, (dim,), inputs)
    first = reduce_source(m, in_kinds, ["u32"], "    pack(g, s);", in_geo.wgsl(4), WORKGROUP, pack_fn(m, "OUT0"))
    rt.dispatch(first, [totals.buffer] + [v.buffer for v in inputs], [True] + [False] * n_in, head + in_geo.params(),
                rt.grid(geo.rows * chunks))  # fmt: skip
    second = _scan_source(m, ["u32"], ["u32"], "      pack(o * P[1] + j, r);", None, reverse, False)
    second += pack_fn(m, "OUT0")
    rt.dispatch(second, [prefix.buffer, totals.buffer], [True, False], [geo.rows, chunks, 1, chunks], rt.grid(geo.rows))
    third = _scan_source(m, in_kinds, out_kinds, emit, geometry, reverse, True)
    rt.dispatch(third, buffers + [prefix.buffer], writable + [False], params, rt.grid(geo.rows * chunks))
    return results


def _plain(kind: str, op: str, zero: str) -> Monoid:
    return Monoid((kind,), f"S({zero})", f"return S(a.f0 {op} b.f0);", "return S(v0);")


def _row(x: VkView) -> VkView:
    return x if x.ndim else VkView(x.buffer, (1,), (1,), x.offset, x.dtype)


def _scan_one(rt, name: str, op: str, identity: dict, x, dim, reverse=False):
    kind = storage_type(x.dtype, name)
    if kind == "u32":
        raise DeviceError(f"{name}: bool input must be cast to an integer dtype first")
    (out,) = scan_rows(rt, _plain(kind, op, identity[kind]), [_row(x)], dim if x.ndim else 0,
                       [(x.dtype, "r.f0")], reverse)  # fmt: skip
    return VkView(out.buffer, x.shape, out.strides[: x.ndim], 0, x.dtype)


@kernel("cumsum")
def cumsum(rt, x, *, dim, reverse):
    return _scan_one(rt, "cumsum", "+", _ADD, x, dim, reverse)


@kernel("cumprod")
def cumprod(rt, x, *, dim):
    return _scan_one(rt, "cumprod", "*", _ONE, x, dim)


def _cum_extreme(rt, name: str, x, dim, largest: bool):
    kind = storage_type(x.dtype, name)
    if x.ndim == 0:
        return clone(rt, x), copy_into(rt, new_view(rt, (), D.int64), 0)
    values, idx = scan_rows(rt, pick_monoid(kind, largest, last=True), [x], dim,
                            [(x.dtype, "r.f0"), (D.int64, "i32(r.f1)")])  # fmt: skip
    return values, idx


@kernel("cummax")
def cummax(rt, x, *, dim):
    return _cum_extreme(rt, "cummax", x, dim, True)


@kernel("cummin")
def cummin(rt, x, *, dim):
    return _cum_extreme(rt, "cummin", x, dim, False)


def _scatter_add_source(geometry: str) -> str:
    return f"""{PRELUDE}
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> OUT0: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read> IN0: array<f32>;
@group(0) @binding(3) var<storage, read> IN1: array<i32>;
{geometry}
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let e = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (e >= P[0] * P[1]) {{ return; }}
  let o = e / P[1];
  let j = e % P[1];
  let v = IN0[row_at0(o) + col_at0(j)];
  let k = row_at2(o) + col_at2(u32(IN1[row_at1(o) + col_at1(j)]));
  var old = atomicLoad(&OUT0[k]);
  loop {{
    let r = atomicCompareExchangeWeak(&OUT0[k], old, bitcast<u32>(bitcast<f32>(old) + v));
    if (r.exchanged) {{ break; }}
    old = r.old_value;
  }}
}}
"""


@kernel("cumulative_select_backward")
def cumulative_select_backward(rt, g, indices, *, dim):
    """Each gradient added (float atomics by compare-and-swap) at the index it came from."""
    if storage_type(g.dtype, "cumulative_select_backward") != "f32":
        raise DeviceError("cumulative_select_backward: expected a float32 or float16 gradient")
    if g.ndim == 0 or g.size == 0:
        return clone(rt, g)
    alert_not_deterministic("cumulative_select_backward (cummax/cummin backward) on vulkan")
    out = copy_into(rt, new_view(rt, g.shape, compute_dtype(g.dtype)), 0)  # atomics add 32-bit words
    geo = Rows(g.shape, (dim,), [g, indices, out])
    source = _scatter_add_source(geo.wgsl(2))
    groups = rt.grid(-(-g.size // WORKGROUP))
    rt.dispatch(source, [out.buffer, g.buffer, indices.buffer], [True, False, False],
                [geo.rows, geo.length, *geo.params()], groups)  # fmt: skip
    return out


# (first position of a zero), as a float: 2^32 - 1 when the row has none
_FIRST_ZERO = Monoid(("u32",), "S(0xffffffffu)", "return S(min(a.f0, b.f0));",
                     "return S(select(0xffffffffu, j, v0 == 0.0));")  # fmt: skip
_SUM_AFTER = Monoid(("f32",), "S(0.0)", "return S(a.f0 + b.f0);", "return S(select(0.0, v0 * v1, f32(j) >= v2));")


@kernel("cumprod_backward")
def cumprod_backward(rt, g, x, *, dim):
    """The CPU kernel's formula, exact with zeros: see ``munet.backends.cpu.kernels_reduce``."""
    if storage_type(x.dtype, "cumprod_backward") != "f32":
        raise DeviceError("cumprod_backward: expected float32 or float16 tensors")
    if x.ndim == 0:
        return clone(rt, g)
    shape = tuple(x.shape)
    if x.size == 0:
        return new_view(rt, shape, x.dtype)
    dims = (dim,)
    (first,) = stats_views(reduce_rows(rt, _FIRST_ZERO, [x], dims, [(D.float32, "f32(s.f0)")]), shape, dims)
    inner = 1
    for n in shape[dim + 1 :]:
        inner *= n
    pos_args = [Scalar("u32", inner), Scalar("u32", shape[dim])]
    pos = "f32((idx / c) % d)"
    dtype, work = x.dtype, compute_dtype(x.dtype)
    if work is not dtype:  # the products in float32, as the decomposition: float16 would overflow them
        x = elementwise(rt, "a", [x], new_view(rt, shape, work))
    y = cumprod(rt, x, dim=dim)
    gy = elementwise(rt, "a * b", [g, y], new_view(rt, shape, work))
    tail = cumsum(rt, gy, dim=dim, reverse=True)
    skipped = elementwise(rt, f"select(a, 1.0, {pos} == b)", [x, first, *pos_args], new_view(rt, shape, work))
    y_skip = cumprod(rt, skipped, dim=dim)
    (grad_first,) = stats_views(reduce_rows(rt, _SUM_AFTER, [g, y_skip, _expand(first, shape)], dims,
                                            [(D.float32, "s.f0")]), shape, dims)  # fmt: skip
    # a=tail b=x c=inner d=n e=first f=grad_first
    expr = f"select(select(0.0, f, {pos} == e), a / b, {pos} < e)"
    operands = [tail, x, *pos_args, first, grad_first]
    return elementwise(rt, expr, operands, new_view(rt, shape, dtype))


def _expand(v: VkView, shape) -> VkView:
    return VkView(v.buffer, shape, v.expand_to(shape), v.offset, v.dtype)
