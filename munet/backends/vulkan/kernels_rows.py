"""Row kernels: softmax, log_softmax, logsumexp, standardize, prod, the boolean reductions,
max/min along a dim, median and mode.

The reductions are monoids run by the reduction template (``reduction.py``: :class:`Monoid`,
:class:`Rows`, :func:`reduce_rows`); median and mode sort each row in workgroup memory.
Normalizations (softmax, standardize, prod_others) reduce each row to statistics, then one
elementwise kernel applies them to every element.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.vulkan.copies import clone, copy_into, new_view
from munet.backends.vulkan.reduction import Monoid, Rows, binding_lines, keep_shape, reduce_rows, reshaped
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import VkView, storage_type
from munet.backends.vulkan.wgsl import PRELUDE, Scalar, elementwise


def stats_views(results, shape, dims) -> list:
    """Reduction results as float views that broadcast against ``shape``."""
    return [reshaped(r, keep_shape(shape, dims)) for r in results]


def finish_shape(view: VkView, shape, dims, keepdim: bool) -> VkView:
    return reshaped(view, tuple(1 if d in dims else n for d, n in enumerate(shape) if keepdim or d not in dims))


def norm_dims(x: VkView, dims) -> tuple:
    return tuple(sorted(d % x.ndim for d in dims)) if x.ndim else ()


def as_row(x: VkView) -> VkView:
    """A rank-0 view as shape (1,), so a row kernel has a dim to walk."""
    return x if x.ndim else VkView(x.buffer, (1,), (1,), x.offset, x.dtype)


# softmax family -------------------------------------------------------------------------------------

# (max, sum of exp(x - shift)), shift = the max where it is finite, else 0 (as the CPU's logsumexp)
_LSE = Monoid(
    types=("f32", "f32"),
    identity="S(-inf_f(), 0.0)",
    combine="""let m = max_f(a.f0, b.f0);
  let sh = select(0.0, m, !(isnan_f(m) || isinf_f(m)));
  let ta = select(a.f1 * exp(select(0.0, a.f0, !(isnan_f(a.f0) || isinf_f(a.f0))) - sh), 0.0, a.f1 == 0.0);
  let tb = select(b.f1 * exp(select(0.0, b.f0, !(isnan_f(b.f0) || isinf_f(b.f0))) - sh), 0.0, b.f1 == 0.0);
  return S(m, ta + tb);""",
    load="return S(v0, select(exp(v0), 1.0, !(isnan_f(v0) || isinf_f(v0))));",
)


def _float_only(name: str, x: VkView) -> None:
    if storage_type(x.dtype, name) != "f32":
        raise DeviceError(f"{name}: expected a float32 or float16 tensor on the vulkan backend, got {x.dtype.name}")


def _softmax_stats(rt, name: str, x: VkView, dims):
    _float_only(name, x)
    return stats_views(reduce_rows(rt, _LSE, [x], dims, [(D.float32, "s.f0"), (D.float32, "s.f1")]), x.shape, dims)


def _softmax(rt, name: str, expr: str, x: VkView, dim: int) -> VkView:
    row = as_row(x)
    m, s = _softmax_stats(rt, name, row, (dim % row.ndim,))
    out = elementwise(rt, expr, [row, m, s], new_view(rt, row.shape, x.dtype))
    return reshaped(out, x.shape)


@kernel("softmax")
def softmax(rt, x, *, dim):
    return _softmax(rt, "softmax", "exp(a - b) / select(c, nan_f(), isinf_f(b) && b > 0.0)", x, dim)


@kernel("log_softmax")
def log_softmax(rt, x, *, dim):
    return _softmax(rt, "log_softmax", "(a - b) - log(select(c, nan_f(), isinf_f(b) && b > 0.0))", x, dim)


@kernel("logsumexp")
def logsumexp(rt, x, *, dims, keepdim):
    _float_only("logsumexp", x)
    dims = norm_dims(x, dims)
    expr = "log(s.f1) + select(0.0, s.f0, !(isnan_f(s.f0) || isinf_f(s.f0)))"
    (out,) = reduce_rows(rt, _LSE, [as_row(x)], dims, [(D.float32, expr)])
    return finish_shape(out, x.shape, dims, keepdim)


# standardize: Welford's (count, mean, M2), combined with Chan's rule ---------------------------------

_WELFORD = """let n = a.f0 + b.f0;
  if (n == 0.0) { return a; }
  let d = b.f1 - a.f1;
  let w = b.f0 / n;
  return S(n, a.f1 + d * w, a.f2 + b.f2 + d * d * a.f0 * w);"""
_MOMENTS = Monoid(("f32", "f32", "f32"), "S(0.0, 0.0, 0.0)", _WELFORD, "return S(1.0, v0, 0.0);")
_SQUARES = Monoid(("f32", "f32", "f32"), "S(0.0, 0.0, 0.0)", _WELFORD, "return S(1.0, 0.0, v0 * v0);")


@kernel("standardize")
def standardize(rt, x, *, dims, eps, center):
    _float_only("standardize", x)
    dims = norm_dims(x, dims)
    monoid = _MOMENTS if center else _SQUARES
    rstd_expr = "1.0 / sqrt(s.f2 / s.f0 + sc(0u))"
    outputs = [(D.float32, "s.f1"), (D.float32, rstd_expr)]
    results = reduce_rows(rt, monoid, [as_row(x)], dims, outputs, scalars=(eps,))
    mean, rstd = stats_views(results, x.shape, dims)
    xhat = new_view(rt, x.shape, x.dtype)
    if x.size:
        elementwise(rt, "(a - b) * c" if center else "a * c", [x, mean, rstd], xhat)
    return xhat, rstd


# sums, products and boolean reductions --------------------------------------------------------------

_ADD = {"f32": "0.0", "i32": "0", "u32": "0u"}
_ONE = {"f32": "1.0", "i32": "1", "u32": "1u"}


def _plain(kind: str, op: str, zero: str, load: str = "return S(v0);") -> Monoid:
    return Monoid((kind,), f"S({zero})", f"return S(a.f0 {op} b.f0);", load)


def _reduce_one(rt, m: Monoid, x, dims, keepdim, dtype, expr="s.f0"):
    dims = norm_dims(x, dims)
    (out,) = reduce_rows(rt, m, [as_row(x)], dims, [(dtype, expr)])
    return finish_shape(out, x.shape, dims, keepdim)


@kernel("prod")
def prod(rt, x, *, dims, keepdim):
    kind = storage_type(x.dtype, "prod")
    if kind == "u32":
        raise DeviceError("prod: bool input must be cast to an integer dtype first")
    return _reduce_one(rt, _plain(kind, "*", _ONE[kind]), x, dims, keepdim, x.dtype)


@kernel("nansum")
def nansum(rt, x, *, dims, keepdim):
    kind = storage_type(x.dtype, "nansum")
    if kind == "u32":
        raise DeviceError("nansum: bool input must be cast to an integer dtype first")
    load = "return S(select(v0, 0.0, isnan_f(v0)));" if kind == "f32" else "return S(v0);"
    return _reduce_one(rt, _plain(kind, "+", _ADD[kind], load), x, dims, keepdim, x.dtype)


def _nonzero(kind: str, v: str) -> str:
    # by bits: lavapipe folds NaN != 0.0 to false
    return f"((bitcast<u32>({v}) & 0x7fffffffu) != 0u)" if kind == "f32" else f"({v} != {_ADD[kind]})"


def _truth_monoid(x, op: str, zero: str) -> Monoid:
    kind = storage_type(x.dtype, "all/any")
    return Monoid(("u32",), f"S({zero})", f"return S(a.f0 {op} b.f0);", f"return S(u32({_nonzero(kind, 'v0')}));")


@kernel("all")
def all_(rt, x, *, dims, keepdim):
    return _reduce_one(rt, _truth_monoid(x, "&", "1u"), x, dims, keepdim, D.bool_)


@kernel("any")
def any_(rt, x, *, dims, keepdim):
    return _reduce_one(rt, _truth_monoid(x, "|", "0u"), x, dims, keepdim, D.bool_)


@kernel("count_nonzero")
def count_nonzero(rt, x, *, dims):
    kind = storage_type(x.dtype, "count_nonzero")
    if not dims:
        return elementwise(rt, f"i32({_nonzero(kind, 'a')})", [x], new_view(rt, x.shape, D.int64))
    m = Monoid(("i32",), "S(0)", "return S(a.f0 + b.f0);", f"return S(i32({_nonzero(kind, 'v0')}));")
    return _reduce_one(rt, m, x, dims, False, D.int64)


# product of the others (prod's gradient) -------------------------------------------------------------

# (product of the nonzeros, number of zeros)
_NONZERO_PROD = Monoid(
    ("f32", "u32"), "S(1.0, 0u)", "return S(a.f0 * b.f0, a.f1 + b.f1);",
    "return S(select(v0, 1.0, v0 == 0.0), u32(v0 == 0.0));",
)  # fmt: skip


@kernel("prod_others")
def prod_others(rt, x, *, dims):
    _float_only("prod_others", x)
    dims = norm_dims(x, dims)
    results = reduce_rows(rt, _NONZERO_PROD, [as_row(x)], dims, [(D.float32, "s.f0"), (D.float32, "f32(s.f1)")])
    p, zeros = stats_views(results, x.shape, dims)
    expr = "select(select(0.0, select(0.0, b, a == 0.0), c == 1.0), b / select(a, 1.0, a == 0.0), c == 0.0)"
    return elementwise(rt, expr, [x, p, zeros], new_view(rt, x.shape, x.dtype))


# (nonzero product, sum of g/x over nonzeros, zeros, sum of g over zeros)
_PROD_BACKWARD = Monoid(
    ("f32", "f32", "u32", "f32"), "S(1.0, 0.0, 0u, 0.0)",
    "return S(a.f0 * b.f0, a.f1 + b.f1, a.f2 + b.f2, a.f3 + b.f3);",
    """let z = v1 == 0.0;
  return S(select(v1, 1.0, z), select(v0 / v1, 0.0, z), u32(z), select(0.0, v0, z));""",
)  # fmt: skip


@kernel("prod_others_backward")
def prod_others_backward(rt, g, x, *, dims):
    _float_only("prod_others_backward", x)
    dims = norm_dims(x, dims)
    outputs = [(D.float32, "s.f0"), (D.float32, "s.f1"), (D.float32, "f32(s.f2)"), (D.float32, "s.f3")]
    results = reduce_rows(rt, _PROD_BACKWARD, [as_row(g), as_row(x)], dims, outputs)
    p, q, zeros, gz = stats_views(results, x.shape, dims)
    # a=g b=x c=p d=q e=zeros f=g_at_zeros
    expr = """select(select(0.0, (f - select(0.0, a, b == 0.0)) * (c / select(b, 1.0, b == 0.0)),
        e - select(0.0, 1.0, b == 0.0) == 1.0),
      (c / select(b, 1.0, b == 0.0)) * (d - select(a / b, 0.0, b == 0.0)), e - select(0.0, 1.0, b == 0.0) == 0.0)"""
    return elementwise(rt, expr, [g, x, p, q, zeros, gz], new_view(rt, x.shape, x.dtype))


# max/min along a dim: (value, index), NaN wins, first index on ties ----------------------------------


def pick_monoid(kind: str, largest: bool, last: bool = False) -> Monoid:
    """(value, index) of the extreme; NaN beats numbers; ties go to the first (or ``last``) index."""
    cmp = ">" if largest else "<"
    tie = ">" if last else "<"
    nan = "if (isnan_f(a.f0) != isnan_f(b.f0)) { if (isnan_f(a.f0)) { return a; } return b; }" if kind == "f32" else ""
    nan_tie = f"if (isnan_f(a.f0)) {{ if (a.f1 {tie} b.f1) {{ return a; }} return b; }}" if kind == "f32" else ""
    body = f"""if (b.f1 == 0xffffffffu) {{ return a; }}
  if (a.f1 == 0xffffffffu) {{ return b; }}
  {nan}
  {nan_tie}
  if (a.f0 {cmp} b.f0) {{ return a; }}
  if (b.f0 {cmp} a.f0) {{ return b; }}
  if (a.f1 {tie} b.f1) {{ return a; }}
  return b;"""
    return Monoid((kind, "u32"), f"S({_ADD[kind]}, 0xffffffffu)", body, "return S(v0, j);")


def _select_dim(rt, name: str, x, dim, keepdim, largest: bool):
    kind = storage_type(x.dtype, name)
    if x.ndim == 0:
        return _copy(rt, x), zeros(rt, (), D.int64)
    dims = (dim % x.ndim,)
    values, idx = reduce_rows(rt, pick_monoid(kind, largest), [x], dims, [(x.dtype, "s.f0"), (D.int64, "i32(s.f1)")])
    return finish_shape(values, x.shape, dims, keepdim), finish_shape(idx, x.shape, dims, keepdim)


def _copy(rt, x):
    return clone(rt, x)


def zeros(rt, shape, dtype) -> VkView:
    return copy_into(rt, new_view(rt, shape, dtype), 0)


@kernel("max_dim")
def max_dim(rt, x, *, dim, keepdim):
    return _select_dim(rt, "max_dim", x, dim, keepdim, True)


@kernel("min_dim")
def min_dim(rt, x, *, dim, keepdim):
    return _select_dim(rt, "min_dim", x, dim, keepdim, False)


@kernel("reduce_onehot")
def reduce_onehot(rt, indices, *, dim, shape, keepdim, dtype):
    """1 where the position along ``dim`` equals ``indices`` (broadcast over the other dims)."""
    shape = tuple(shape)
    out = new_view(rt, shape, dtype)
    if not shape:
        return elementwise(rt, "a", [Scalar(storage_type(dtype), 1)], out)
    idx = indices
    if not keepdim:
        idx = VkView(indices.buffer, keep_shape(shape, (dim,)), _insert_zero(indices.strides, dim), indices.offset,
                     indices.dtype)  # fmt: skip
    inner = Scalar("u32", math.prod(shape[dim + 1 :]))
    return elementwise(rt, "i32((idx / b) % c) == a", [idx, inner, Scalar("u32", shape[dim])], out, cond=True)


def _insert_zero(strides, dim):
    return (*strides[:dim], 0, *strides[dim:])


# median: a radix select per row (four 8-bit digit passes of a workgroup histogram) --------------------

_KEY = {
    # order-preserving u32 keys; every NaN maps above +inf, -0.0 to +0.0 (they compare equal)
    "f32": """fn key(x: f32) -> u32 {
  if (isnan_f(x)) { return 0xffffffffu; }
  var b = bitcast<u32>(x);
  if (b == 0x80000000u) { b = 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}""",
    "i32": "fn key(x: i32) -> u32 { return bitcast<u32>(x) ^ 0x80000000u; }",
    "u32": "fn key(x: u32) -> u32 { return x; }",
}


def _median_source(kind: str, geometry: str, ignore_nan: bool) -> str:
    nan = "isnan_f(v)" if kind == "f32" else "false"
    if ignore_nan:
        rank = "let k0 = select((n - nans - 1u) / 2u, 0u, n - nans == 0u);"
    else:
        rank = "let k0 = select((n - 1u) / 2u, n - nans, nans > 0u);"
    return f"""{PRELUDE}
{binding_lines([kind, "i32"], [kind])}
{_KEY[kind]}
{geometry}
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> counts: array<u32, 256>;
var<workgroup> chosen: vec2<u32>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {{
  let o = wid.x + wid.y * nwg.x;
  if (o >= P[0]) {{ return; }}
  let n = P[1];
  let b0 = row_at0(o);
  var mine = 0u;
  for (var j = t; j < n; j = j + 256u) {{ let v = IN0[b0 + col_at0(j)]; if ({nan}) {{ mine += 1u; }} }}
  counts[t] = mine;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s = s >> 1u) {{
    if (t < s) {{ counts[t] += counts[t + s]; }}
    workgroupBarrier();
  }}
  let nans = counts[0];
  {rank}
  var k = k0;
  var prefix = 0u;
  var mask = 0u;
  for (var digit_pass = 0u; digit_pass < 4u; digit_pass = digit_pass + 1u) {{
    let shift = 24u - 8u * digit_pass;
    atomicStore(&hist[t], 0u);
    workgroupBarrier();
    for (var j = t; j < n; j = j + 256u) {{
      let q = key(IN0[b0 + col_at0(j)]);
      if ((q & mask) == prefix) {{ atomicAdd(&hist[(q >> shift) & 255u], 1u); }}
    }}
    workgroupBarrier();
    if (t == 0u) {{
      var below = 0u;
      var digit = 255u;
      for (var b = 0u; b < 256u; b = b + 1u) {{
        let c = atomicLoad(&hist[b]);
        if (k < below + c) {{ digit = b; break; }}
        below += c;
      }}
      chosen = vec2<u32>(digit, k - below);
    }}
    workgroupBarrier();
    let pick = chosen;
    prefix = prefix | (pick.x << shift);
    mask = mask | (255u << shift);
    k = pick.y;
    workgroupBarrier();
  }}
  // the k-th occurrence (in row order) of the selected key: threads own contiguous spans
  let span = (n + 255u) / 256u;
  let lo = min(t * span, n);
  let hi = min(lo + span, n);
  var seen = 0u;
  for (var j = lo; j < hi; j = j + 1u) {{ if (key(IN0[b0 + col_at0(j)]) == prefix) {{ seen += 1u; }} }}
  counts[t] = seen;
  workgroupBarrier();
  var before = 0u;
  for (var u = 0u; u < t; u = u + 1u) {{ before += counts[u]; }}
  if (k >= before && k < before + seen) {{
    var r = before;
    for (var j = lo; j < hi; j = j + 1u) {{
      let v = IN0[b0 + col_at0(j)];
      if (key(v) == prefix) {{
        if (r == k) {{ OUT0[o] = v; OUT1[o] = i32(j); break; }}
        r += 1u;
      }}
    }}
  }}
}}
"""


def _median_rows(rt, name: str, x: VkView, dims, ignore_nan: bool):
    kind = storage_type(x.dtype, name)
    x = as_row(x)
    dims = dims if dims else (0,)
    geo = Rows(x.shape, dims, [x])
    shape = keep_shape(x.shape, dims)
    values, idx = new_view(rt, shape, x.dtype), new_view(rt, shape, D.int64)
    source = _median_source(kind, geo.wgsl(2), ignore_nan)
    rt.dispatch(source, [values.buffer, idx.buffer, x.buffer], [True, True, False],
                [geo.rows, geo.length, *geo.params()], rt.grid(geo.rows))  # fmt: skip
    return values, idx


def _median_full(rt, name, x, ignore_nan):
    if x.size == 0:
        return copy_into(rt, new_view(rt, (), x.dtype), float("nan") if storage_type(x.dtype) == "f32" else 0)
    values, _ = _median_rows(rt, name, x, tuple(range(x.ndim)), ignore_nan)
    return reshaped(values, ())


def _median_dim(rt, name, x, dim, keepdim, ignore_nan):
    if x.ndim == 0:
        return clone(rt, x), zeros(rt, (), D.int64)
    dims = (dim % x.ndim,)
    values, idx = _median_rows(rt, name, x, dims, ignore_nan)
    return finish_shape(values, x.shape, dims, keepdim), finish_shape(idx, x.shape, dims, keepdim)


@kernel("median")
def median(rt, x, *, dims, keepdim):
    return _median_full(rt, "median", x, False)


@kernel("nanmedian")
def nanmedian(rt, x, *, dims, keepdim):
    return _median_full(rt, "nanmedian", x, True)


@kernel("median_dim")
def median_dim(rt, x, *, dim, keepdim):
    return _median_dim(rt, "median_dim", x, dim, keepdim, False)


@kernel("nanmedian_dim")
def nanmedian_dim(rt, x, *, dim, keepdim):
    return _median_dim(rt, "nanmedian_dim", x, dim, keepdim, True)


# mode: each element counts its equals through workgroup-memory tiles of the row (O(n^2 / 256) per
# thread, sort-free), then a tree picks the highest count, the smallest value, its last index.


def _mode_source(kind: str, geometry: str) -> str:
    isnan = "isnan_f" if kind == "f32" else "no_nan"
    return f"""{PRELUDE}
{binding_lines([kind, "i32"], [kind])}
fn no_nan(x: {kind}) -> bool {{ return false; }}
{geometry}
struct S {{ c: u32, v: {kind}, i: u32 }}
fn better(a: S, b: S) -> bool {{
  if (b.i == 0xffffffffu) {{ return true; }}
  if (a.i == 0xffffffffu) {{ return false; }}
  if (a.c != b.c) {{ return a.c > b.c; }}
  let an = {isnan}(a.v);
  let bn = {isnan}(b.v);
  if (an && bn) {{ return a.i < b.i; }}
  if (an != bn) {{ return bn; }}
  if (a.v != b.v) {{ return a.v < b.v; }}
  return a.i > b.i;
}}
var<workgroup> tile: array<{kind}, 256>;
var<workgroup> part: array<S, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {{
  let o = wid.x + wid.y * nwg.x;
  if (o >= P[0]) {{ return; }}
  let n = P[1];
  let b0 = row_at0(o);
  var best = S(0u, {kind}(), 0xffffffffu);
  for (var c0 = 0u; c0 < n; c0 = c0 + 256u) {{
    let j = c0 + t;
    var v: {kind};
    if (j < n) {{ v = IN0[b0 + col_at0(j)]; }}
    var count = 0u;
    for (var s0 = 0u; s0 < n; s0 = s0 + 256u) {{
      workgroupBarrier();
      if (s0 + t < n) {{ tile[t] = IN0[b0 + col_at0(s0 + t)]; }}
      workgroupBarrier();
      let m = min(256u, n - s0);
      for (var u = 0u; u < m; u = u + 1u) {{ if (tile[u] == v) {{ count += 1u; }} }}
    }}
    if (j < n) {{
      let cand = S(max(count, 1u), v, j);
      if (better(cand, best)) {{ best = cand; }}
    }}
  }}
  part[t] = best;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s = s >> 1u) {{
    if (t < s && better(part[t + s], part[t])) {{ part[t] = part[t + s]; }}
    workgroupBarrier();
  }}
  if (t == 0u) {{ OUT0[o] = part[0].v; OUT1[o] = i32(part[0].i); }}
}}
"""


@kernel("mode")
def mode(rt, x, *, dim, keepdim):
    kind = storage_type(x.dtype, "mode")
    if x.ndim == 0:
        return clone(rt, x), zeros(rt, (), D.int64)
    dims = (dim % x.ndim,)
    geo = Rows(x.shape, dims, [x])
    shape = keep_shape(x.shape, dims)
    values, idx = new_view(rt, shape, x.dtype), new_view(rt, shape, D.int64)
    rt.dispatch(_mode_source(kind, geo.wgsl(2)), [values.buffer, idx.buffer, x.buffer], [True, True, False],
                [geo.rows, geo.length, *geo.params()], rt.grid(geo.rows))  # fmt: skip
    return finish_shape(values, x.shape, dims, keepdim), finish_shape(idx, x.shape, dims, keepdim)
