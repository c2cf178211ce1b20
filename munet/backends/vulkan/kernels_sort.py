"""Sorting kernels: sort, topk, kthvalue, unique, searchsorted (and the row sort randperm uses).

Rows are sorted by a bitonic network over (key, original position): every element is distinct
under that order, so the result is exactly the stable sort the cpu backend gives (NaN sorts as
the largest value; descending keeps equal elements in their original order). Each row is
padded to a power of two ``n2``; blocks of 512 elements are sorted in workgroup memory, and
the merge stages wider than a block run one global compare-exchange pass per stage
(``log2(n2 / 512)`` merge rounds, each ending with an in-block pass), so any row length works.
``topk``/``kthvalue`` sort the row and keep the leading ``k`` / the ``k``-th entry.

``unique`` with ``dim`` (unique slices) orders the slices (rows of a contiguous copy with ``dim``
first) lexicographically by one stable sort of the current row order per column, last column first
(``m`` sorts for rows of ``m`` elements), then keeps the rows that differ from the row before
(``!=``, so a row holding a NaN equals no other, as NumPy's rule for slices; -0.0 equals 0.0).
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet._tensor import contiguous_strides
from munet.backends.vulkan.copies import contiguous, new_view
from munet.backends.vulkan.kernels_indexing import Params, check_index, exclusive_scan, launch, read_int
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import VkView, storage_type
from munet.backends.vulkan.wgsl import PRELUDE

_BLOCK = 512  # elements per workgroup in the in-block passes (256 threads, one pair each)
_PAD = "0xffffffffu"

# key kind -> (WGSL type, strict "a sorts before b" for ascending order)
_LESS = {
    "f32": ("f32", "!isnan_f(a) && (isnan_f(b) || a < b)"),
    "i32": ("i32", "a < b"),
    "u32": ("u32", "a < b"),
    "u64": ("vec2<u32>", "a.y < b.y || (a.y == b.y && a.x < b.x)"),
}


def _helpers(key: str) -> str:
    wgsl_type, less = _LESS[key]
    return f"""
fn key_less(a: {wgsl_type}, b: {wgsl_type}) -> bool {{ return {less}; }}
// Does (ka, ia) belong before (kb, ib)? Padding (index 0xffffffff) goes last.
fn before(ka: {wgsl_type}, ia: u32, kb: {wgsl_type}, ib: u32, descending: bool) -> bool {{
  if (ia == {_PAD}) {{ return false; }}
  if (ib == {_PAD}) {{ return true; }}
  if (descending) {{
    if (key_less(kb, ka)) {{ return true; }}
    if (key_less(ka, kb)) {{ return false; }}
  }} else {{
    if (key_less(ka, kb)) {{ return true; }}
    if (key_less(kb, ka)) {{ return false; }}
  }}
  return ia < ib;
}}
"""


def _block_source(key: str, merge_only: bool) -> str:
    """In-block bitonic stages: all of them (``merge_only=False``) or the ``j < 512`` tail of stage ``k``."""
    wgsl_type = _LESS[key][0]
    stages = (
        "for (var k = 2u; k <= span; k = k << 1u) { for (var j = k >> 1u; j > 0u; j = j >> 1u) { step(k, j, t, base); } }"
        if not merge_only
        else "for (var j = span >> 1u; j > 0u; j = j >> 1u) { step(P[3], j, t, base); }"
    )
    return f"""{PRELUDE}
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> K: array<{wgsl_type}>;
@group(0) @binding(2) var<storage, read_write> I: array<u32>;
{_helpers(key)}
var<workgroup> sk: array<{wgsl_type}, {_BLOCK}>;
var<workgroup> si: array<u32, {_BLOCK}>;
fn step(k: u32, j: u32, t: u32, base: u32) {{
  // P: [n2, span, descending, k]; base = position of this block within its row
  let lo = 2u * t - (t & (j - 1u));
  let hi = lo + j;
  if (hi < P[1]) {{
    let up = ((base + lo) & k) == 0u;
    let desc = P[2] != 0u;
    let swap = select(before(sk[lo], si[lo], sk[hi], si[hi], desc), before(sk[hi], si[hi], sk[lo], si[lo], desc), up);
    if (swap) {{
      let tk = sk[lo]; sk[lo] = sk[hi]; sk[hi] = tk;
      let ti = si[lo]; si[lo] = si[hi]; si[hi] = ti;
    }}
  }}
  workgroupBarrier();
}}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {{
  let g = wid.x + wid.y * nwg.x;
  let span = P[1];
  let start = g * span;           // blocks tile the padded rows
  let base = start % P[0];
  for (var e = t; e < span; e = e + 256u) {{ sk[e] = K[start + e]; si[e] = I[start + e]; }}
  workgroupBarrier();
  {stages}
  for (var e = t; e < span; e = e + 256u) {{ K[start + e] = sk[e]; I[start + e] = si[e]; }}
}}
"""


def _global_step(rt, key: str, keys, idx, total_pairs: int, n2: int, k: int, j: int, descending: bool) -> None:
    p = Params()
    n2w, kw, jw, dw = p.add(n2), p.add(k), p.add(j), p.add(int(descending))
    body = f"""  let lo = 2u * i - (i & ({jw} - 1u));
  let hi = lo + {jw};
  let up = ((lo % {n2w}) & {kw}) == 0u;
  let desc = {dw} != 0u;
  let swap = select(before(K[lo], I[lo], K[hi], I[hi], desc), before(K[hi], I[hi], K[lo], I[lo], desc), up);
  if (swap) {{
    let tk = K[lo]; K[lo] = K[hi]; K[hi] = tk;
    let ti = I[lo]; I[lo] = I[hi]; I[hi] = ti;
  }}"""
    launch(rt, body, [("K", _LESS[key][0], keys.buffer), ("I", "u32", idx.buffer)], [], p, total_pairs, _helpers(key))


def sort_rows(rt, keys: VkView, idx: VkView, rows: int, n2: int, key: str, descending: bool) -> None:
    """Sort each padded row (``n2`` a power of two) of ``keys``/``idx`` in place by (key, index)."""
    span = min(n2, _BLOCK)
    blocks = rows * n2 // span
    buffers, writable = [keys.buffer, idx.buffer], [True, True]
    rt.dispatch(_block_source(key, False), buffers, writable, [n2, span, int(descending), 0], rt.grid(blocks))
    k = 2 * span
    while k <= n2:
        j = k // 2
        while j >= span:
            _global_step(rt, key, keys, idx, rows * n2 // 2, n2, k, j, descending)
            j //= 2
        rt.dispatch(_block_source(key, True), buffers, writable, [n2, span, int(descending), k], rt.grid(blocks))
        k *= 2


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def sorted_rows(rt, x: VkView, dim: int, descending: bool):
    """(keys, idx, rows, n, n2, moved shape): rows of ``x`` along ``dim``, sorted and padded."""
    order = [d for d in range(x.ndim) if d != dim] + [dim]
    moved = VkView(x.buffer, [x.shape[d] for d in order], [x.strides[d] for d in order], x.offset, x.dtype)
    src = contiguous(rt, moved)
    n = x.shape[dim]
    rows = math.prod(moved.shape[:-1])
    n2 = _pow2(n)
    kind = storage_type(x.dtype, "sort")
    keys = new_view(rt, (rows * n2,), x.dtype)
    idx = new_view(rt, (rows * n2,), D.int32)
    p = Params()
    n2w, nw, off = p.add(n2), p.add(n), p.add(src.offset)
    body = f"""  let r = i / {n2w};
  let q = i % {n2w};
  if (q < {nw}) {{ K[i] = X[{off} + r * {nw} + q]; I[i] = q; }} else {{ I[i] = {_PAD}; }}"""
    launch(rt, body, [("K", kind, keys.buffer), ("I", "u32", idx.buffer)], [("X", kind, src.buffer)], p, rows * n2)
    sort_rows(rt, keys, idx, rows, n2, kind, descending)
    return keys, idx, rows, n, n2, tuple(moved.shape)


def _extract(rt, keys, idx, rows, n2, start, keep, dtype, with_values=True):
    """Contiguous (rows, keep) values and int64 indices from padded sorted rows, from ``start``."""
    kind = storage_type(dtype)
    values = new_view(rt, (rows, keep), dtype)
    indices = new_view(rt, (rows, keep), D.int64)
    p = Params()
    kw, n2w, sw = p.add(keep), p.add(n2), p.add(start)
    body = f"""  let src = (i / {kw}) * {n2w} + {sw} + i % {kw};
  OI[i] = i32(I[src]);"""
    outs = [("OI", "i32", indices.buffer)]
    if with_values:
        body += "\n  OV[i] = K[src];"
        outs.append(("OV", kind, values.buffer))
    launch(rt, body, outs, [("I", "u32", idx.buffer), ("K", kind, keys.buffer)], p, rows * keep)
    return values, indices


def _unmove(view: VkView, dim: int, ndim: int, keepdim: bool = True) -> VkView:
    """A (rows..., keep) contiguous result viewed in the input's dim order."""
    keep = view.shape[-1]
    lead_shape = view.shape[:-1]
    moved_shape = (*lead_shape, keep)
    moved_strides = contiguous_strides(moved_shape)
    shape, strides, r = [], [], 0
    for d in range(ndim):
        if d == dim:
            if keepdim:
                shape.append(keep)
                strides.append(moved_strides[-1])
            continue
        shape.append(moved_shape[r])
        strides.append(moved_strides[r])
        r += 1
    return VkView(view.buffer, shape, strides, view.offset, view.dtype)


def _select(rt, x: VkView, dim: int, descending: bool, start: int, keep: int, keepdim: bool = True):
    keys, idx, rows, n, n2, moved = sorted_rows(rt, x, dim, descending)
    values, indices = _extract(rt, keys, idx, rows, n2, start, keep, x.dtype)
    lead = moved[:-1]
    values = VkView(values.buffer, (*lead, keep), contiguous_strides((*lead, keep)), 0, x.dtype)
    indices = VkView(indices.buffer, (*lead, keep), contiguous_strides((*lead, keep)), 0, D.int64)
    return _unmove(values, dim, x.ndim, keepdim), _unmove(indices, dim, x.ndim, keepdim)


def _scalar_result(rt, x: VkView):
    from munet.backends.vulkan.copies import clone, copy_into

    return clone(rt, x), copy_into(rt, new_view(rt, (), D.int64), 0)


@kernel("sort")
def sort(rt, x, *, dim, descending, stable):
    if x.ndim == 0:
        return _scalar_result(rt, x)
    if x.size == 0:
        return new_view(rt, x.shape, x.dtype), new_view(rt, x.shape, D.int64)
    return _select(rt, x, dim, descending, 0, x.shape[dim])


@kernel("topk")
def topk(rt, x, *, k, dim, largest):
    if x.ndim == 0:
        return _scalar_result(rt, x)
    shape = list(x.shape)
    shape[dim] = k
    if k == 0 or x.size == 0:
        return new_view(rt, shape, x.dtype), new_view(rt, shape, D.int64)
    return _select(rt, x, dim, largest, 0, k)


@kernel("kthvalue")
def kthvalue(rt, x, *, k, dim, keepdim):
    if x.ndim == 0:
        return _scalar_result(rt, x)
    return _select(rt, x, dim, False, k - 1, 1, keepdim)


# unique ----------------------------------------------------------------------------------------------


def _lexicographic_order(rt, rows: VkView, n: int, m: int, kind: str) -> VkView:
    """The stable lexicographic order of the ``n`` contiguous rows of ``m`` in ``rows``: a u32 vector of
    row numbers, sorted by each column in turn from the last (each sort stable in the current order)."""
    n2 = _pow2(n)
    order = new_view(rt, (n,), D.int32)
    launch(rt, "  O[i] = i;", [("O", "u32", order.buffer)], [], Params(), n)
    keys, idx, moved = new_view(rt, (n2,), rows.dtype), new_view(rt, (n2,), D.int32), new_view(rt, (n,), D.int32)
    for column in reversed(range(m)):
        p = Params()
        nw, mw, cw, off = p.add(n), p.add(m), p.add(column), p.add(rows.offset)
        body = f"""  if (i < {nw}) {{ K[i] = X[{off} + O[i] * {mw} + {cw}]; I[i] = i; }} else {{ I[i] = {_PAD}; }}"""
        ins = [("X", kind, rows.buffer), ("O", "u32", order.buffer)]
        launch(rt, body, [("K", kind, keys.buffer), ("I", "u32", idx.buffer)], ins, p, n2)
        sort_rows(rt, keys, idx, 1, n2, kind, False)
        launch(
            rt,
            "  N[i] = O[I[i]];",
            [("N", "u32", moved.buffer)],
            [("O", "u32", order.buffer), ("I", "u32", idx.buffer)],
            Params(),
            n,
        )
        order, moved = moved, order
    return order


def _unique_slices(rt, x: VkView, dim: int, consecutive: bool):
    kind = storage_type(x.dtype, "unique")
    n = x.shape[dim]
    perm = [dim] + [d for d in range(x.ndim) if d != dim]
    if n == 0:
        return new_view(rt, x.shape, x.dtype), new_view(rt, (0,), D.int64), new_view(rt, (0,), D.int64)
    moved = VkView(x.buffer, [x.shape[d] for d in perm], [x.strides[d] for d in perm], x.offset, x.dtype)
    rows = contiguous(rt, moved)
    m = x.size // n
    order = None if consecutive else _lexicographic_order(rt, rows, n, m, kind)
    at = "O[i]" if order is not None else "i"
    before = "O[i - 1u]" if order is not None else "i - 1u"
    ins = [("R", kind, rows.buffer)] + ([("O", "u32", order.buffer)] if order is not None else [])
    # starts[i] = 1 where row i (in order) differs from the row before it
    starts = new_view(rt, (n + 1,), D.int32)
    p = Params()
    nw, mw, off = p.add(n), p.add(m), p.add(rows.offset)
    differ = "!(a == b) || isnan_f(a) || isnan_f(b)" if kind == "f32" else "a != b"
    body = f"""  if (i == {nw}) {{ OUT[i] = 0; return; }}
  if (i == 0u) {{ OUT[i] = 1; return; }}
  var start = 0;
  for (var c = 0u; c < {mw}; c = c + 1u) {{
    let a = R[{off} + {at} * {mw} + c];
    let b = R[{off} + ({before}) * {mw} + c];
    if ({differ}) {{ start = 1; break; }}
  }}
  OUT[i] = start;"""
    launch(rt, body, [("OUT", "i32", starts.buffer)], ins, p, n + 1)
    prefix = exclusive_scan(rt, starts)
    count = read_int(rt, prefix, n)
    inverse, first, chosen = (
        new_view(rt, (n,), D.int64),
        new_view(rt, (count + 1,), D.int32),
        new_view(rt, (count,), D.int32),
    )
    q = Params()
    nw, cw = q.add(n), q.add(count)
    body = f"""  if (i == 0u) {{ FIRST[{cw}] = i32({nw}); }}
  let g = S[i] + ST[i] - 1;
  INV[{at}] = g;
  if (ST[i] == 1) {{ FIRST[g] = i32(i); CHOSEN[g] = i32({at}); }}"""
    outs = [("INV", "i32", inverse.buffer), ("FIRST", "i32", first.buffer), ("CHOSEN", "i32", chosen.buffer)]
    ins_write = [("S", "i32", prefix.buffer), ("ST", "i32", starts.buffer)] + ins[1:]
    launch(rt, body, outs, ins_write, q, n)
    gathered = new_view(rt, (count, *moved.shape[1:]), x.dtype)
    g = Params()
    mw, off = g.add(m), g.add(rows.offset)
    body = f"  V[i] = R[{off} + u32(C[i / {mw}]) * {mw} + i % {mw}];"
    launch(
        rt, body, [("V", kind, gathered.buffer)], [("R", kind, rows.buffer), ("C", "i32", chosen.buffer)], g, count * m
    )
    counts = new_view(rt, (count,), D.int64)
    launch(
        rt, "  C[i] = F[i + 1u] - F[i];", [("C", "i32", counts.buffer)], [("F", "i32", first.buffer)], Params(), count
    )
    # the gathered (count, others...) rows viewed with dim back in its place
    strides = contiguous_strides(tuple(gathered.shape))
    shape, view_strides = list(x.shape), [0] * x.ndim
    for position, d in enumerate(perm):
        shape[d] = gathered.shape[position]
        view_strides[d] = strides[position]
    return VkView(gathered.buffer, shape, view_strides, 0, x.dtype), inverse, counts


@kernel("unique")
def unique(rt, x, *, dim, consecutive):
    if dim is not None:
        return _unique_slices(rt, x, dim, consecutive)
    kind = storage_type(x.dtype, "unique")
    n = x.size
    if n == 0:
        return new_view(rt, (0,), x.dtype), new_view(rt, x.shape, D.int64), new_view(rt, (0,), D.int64)
    flat = VkView(x.buffer, (n,), (1,), 0, x.dtype) if x.is_contiguous() else None
    if flat is None:
        c = contiguous(rt, x)
        flat = VkView(c.buffer, (n,), (1,), c.offset, x.dtype)
    else:
        flat = VkView(x.buffer, (n,), (1,), x.offset, x.dtype)
    if consecutive:
        keys, idx = flat, None
        key_off = flat.offset
    else:
        keys, idx, _, _, _, _ = sorted_rows(rt, flat, 0, False)
        key_off = 0
    # starts[i] = 1 where a run of equal values begins (NaN equals NaN, as NumPy's unique)
    starts = new_view(rt, (n + 1,), D.int32)
    p = Params()
    nw, ko = p.add(n), p.add(key_off)
    same = "a == b || (isnan_f(a) && isnan_f(b))" if kind == "f32" else "a == b"
    body = f"""  if (i == {nw}) {{ OUT[i] = 0; return; }}
  if (i == 0u) {{ OUT[i] = 1; return; }}
  let a = K[{ko} + i];
  let b = K[{ko} + i - 1u];
  OUT[i] = select(1, 0, {same});"""
    launch(rt, body, [("OUT", "i32", starts.buffer)], [("K", kind, keys.buffer)], p, n + 1)
    prefix = exclusive_scan(rt, starts)
    count = read_int(rt, prefix, n)
    values = new_view(rt, (count,), x.dtype)
    inverse = new_view(rt, x.shape, D.int64)
    first = new_view(rt, (count + 1,), D.int32)
    q = Params()
    nw, ko, cw = q.add(n), q.add(key_off), q.add(count)
    where = "I[i]" if idx is not None else "i"
    body = f"""  if (i == 0u) {{ FIRST[{cw}] = i32({nw}); }}
  let g = S[i] + ST[i] - 1;
  INV[{where}] = g;
  if (ST[i] == 1) {{ VALS[g] = K[{ko} + i]; FIRST[g] = i32(i); }}"""
    ins = [("S", "i32", prefix.buffer), ("ST", "i32", starts.buffer), ("K", kind, keys.buffer)]
    if idx is not None:
        ins.append(("I", "u32", idx.buffer))
    outs = [("VALS", kind, values.buffer), ("INV", "i32", inverse.buffer), ("FIRST", "i32", first.buffer)]
    launch(rt, body, outs, ins, q, n)
    counts = new_view(rt, (count,), D.int64)
    launch(
        rt, "  C[i] = F[i + 1u] - F[i];", [("C", "i32", counts.buffer)], [("F", "i32", first.buffer)], Params(), count
    )
    return values, inverse, counts


# searchsorted ----------------------------------------------------------------------------------------


def _check_sorter(rt, sorter: VkView, n: int) -> None:
    """Every entry of the (contiguous) ``sorter`` in ``[0, n)``, as a device-side index check."""
    p = Params()
    off = p.add(sorter.offset)
    body = f"  _ = {check_index(rt, p, f'SO[{off} + i]', p.add(n), 'searchsorted', sorter.ndim - 1)};"
    launch(rt, body, [], [("SO", "i32", sorter.buffer)], p, sorter.size, checked=True)


@kernel("searchsorted")
def searchsorted(rt, seq, values, sorter, *, right, out_int32):
    kind = storage_type(seq.dtype, "searchsorted")
    out = new_view(rt, values.shape, D.int32 if out_int32 else D.int64)
    if out.size == 0:
        return out
    seq_c, val_c = contiguous(rt, seq), contiguous(rt, values)
    n = seq.shape[-1]
    m = values.shape[-1] if values.ndim else 1
    p = Params()
    nw, mw, so, vo = p.add(n), p.add(m), p.add(seq_c.offset), p.add(val_c.offset)
    row = "0u" if seq.ndim == 1 else f"(i / {mw})"
    ins = [("S", kind, seq_c.buffer), ("V", kind, val_c.buffer)]
    at = "mid"
    if sorter is not None:
        sort_c = contiguous(rt, sorter)
        _check_sorter(rt, sort_c, n)
        at = f"min(u32(max(SO[{p.add(sort_c.offset)} + base + mid], 0)), {nw} - 1u)"  # in the row, checked above
        ins.append(("SO", "i32", sort_c.buffer))
    less = "(!isnan_f(a) && isnan_f(b)) || a < b" if kind == "f32" else "a < b"
    go_right = "!lt(v, s)" if right else "lt(s, v)"
    helper = f"fn lt(a: {kind}, b: {kind}) -> bool {{ return {less}; }}"
    body = f"""  let base = {row} * {nw};
  let v = V[{vo} + i];
  var lo = 0u;
  var hi = {nw};
  loop {{
    if (lo >= hi) {{ break; }}
    let mid = (lo + hi) / 2u;
    let s = S[{so} + base + {at}];
    if ({go_right}) {{ lo = mid + 1u; }} else {{ hi = mid; }}
  }}
  OUT[i] = i32(lo);"""
    launch(rt, body, [("OUT", "i32", out.buffer)], ins, p, out.size, helper)
    return out
