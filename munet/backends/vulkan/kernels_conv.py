"""Convolution as implicit GEMM, max pooling, and the 2-D grid sampler (forward and backward).

``convolution`` (1-3 spatial dims, stride, per-side padding, dilation, groups, transposed):
per group, out[n, o, p] = sum_r W[o, r] * X_col[r, (n, p)] with r = (c, kernel position). The
columns are never materialized: each workgroup computes a 64x64 output tile (output channels
x (batch, pixel)), staging 16-deep K slices of W and of the gathered input window in
workgroup memory, with a 4x4 register block per thread (the matmul kernel's scheme). On CPU
drivers (``runtime.cpu_driver``: lavapipe, SwiftShader) each invocation instead computes a 16x16
block from registers with no workgroup memory, as matmul does there (6x on lavapipe, see
docs/perf/vulkan.md). A transposed convolution gathers too: output pixel q takes input pixel (q + pad - k*d) / s
when that divides exactly. Operands are read through their strides; padding is bounds checks.
Gradients are convolutions again (``munet/ops/conv.py``), so they need no kernel of their own.

``grid_sampler_2d_backward``: ``grad_grid`` is one thread per sample; ``grad_input`` is a
deterministic gather: the (pixel, sample-corner) pairs are sorted by pixel with the bitonic
sort of ``kernels_movement`` and each (pixel, channel) thread sums its run in a fixed order.
No float atomics, so the result is the same on every run.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.vulkan.copies import copy_into, new_view
from munet.backends.vulkan.kernels_movement import LOWER_BOUND, sort_keys
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import storage_type
from munet.backends.vulkan.wgsl import PRELUDE, WORKGROUP, bindings
from munet.ops.conv import conv_output_spatial

TILE, DEPTH = 64, 16

# convolution ----------------------------------------------------------------------------------------


class _Layout:
    """Word positions of the convolution's parameter block (they depend only on the rank)."""

    def __init__(self, nd: int):
        self.nd = nd
        fields = ["M", "NCOL", "KR", "Cg", "Og", "Kp", "PP", "TM", "COUT", "XOFF", "XSN", "XSC"]
        self.pos = {f: i for i, f in enumerate(fields)}
        at = len(fields)
        for name in ("XS", "WHEAD", "IN", "OUT", "K", "S", "PAD", "DIL"):
            size = 3 if name == "WHEAD" else nd
            self.pos[name] = at
            at += size
        self.pos["WS"] = at

    def __getitem__(self, name: str) -> str:
        return f"P[{self.pos[name]}]"

    def at(self, name: str, i: int) -> str:
        return f"P[{self.pos[name] + i}]"


def _conv_source(kind: str, nd: int, transposed: bool) -> str:
    lay = _Layout(nd)
    zero = f"{kind}(0)"
    # B tile: input window element (r, col), r = (c, k...), col = (n, p...)
    bcoords = [f"      let n = col / {lay['PP']};", f"      var prem = col % {lay['PP']};"]
    for i in reversed(range(nd)):
        bcoords.append(f"      let o{i} = prem % {lay.at('OUT', i)}; prem = prem / {lay.at('OUT', i)};")
    kdec = [f"      let c = r / {lay['Kp']};", f"      var krem = r % {lay['Kp']};"]
    for i in reversed(range(nd)):
        kdec.append(f"      let k{i} = krem % {lay.at('K', i)}; krem = krem / {lay.at('K', i)};")
    gather = [
        f"      var xi = {lay['XOFF']} + n * {lay['XSN']} + (g * {lay['Cg']} + c) * {lay['XSC']};",
        "      var ok = true;",
    ]
    for i in range(nd):
        s, pad, dil, size = lay.at("S", i), lay.at("PAD", i), lay.at("DIL", i), lay.at("IN", i)
        if transposed:
            gather += [
                f"      let t{i} = i32(o{i}) + bitcast<i32>({pad}) - i32(k{i} * {dil});",
                f"      let q{i} = t{i} / i32({s});",
                f"      ok = ok && t{i} >= 0 && t{i} % i32({s}) == 0 && q{i} < i32({size});",
                f"      xi = xi + u32(max(q{i}, 0)) * {lay.at('XS', i)};",
            ]
        else:
            gather += [
                f"      let q{i} = i32(o{i} * {s} + k{i} * {dil}) - bitcast<i32>({pad});",
                f"      ok = ok && q{i} >= 0 && q{i} < i32({size});",
                f"      xi = xi + u32(max(q{i}, 0)) * {lay.at('XS', i)};",
            ]
    # A tile: weight element (m, r)
    adec = [f"      let c = r / {lay['Kp']};", f"      var krem = r % {lay['Kp']};"]
    woff = [lay.at("WHEAD", 0)]
    for i in reversed(range(nd)):
        adec.append(f"      let k{i} = krem % {lay.at('K', i)}; krem = krem / {lay.at('K', i)};")
    for i in range(nd):
        woff.append(f"k{i} * {lay.at('WS', i)}")
    if transposed:  # weight (Cin, Og, *K): row m is an output channel of group g
        woff += [f"(g * {lay['Cg']} + c) * {lay.at('WHEAD', 1)}", f"m * {lay.at('WHEAD', 2)}"]
    else:  # weight (Cout, Cg, *K)
        woff += [f"(g * {lay['Og']} + m) * {lay.at('WHEAD', 1)}", f"c * {lay.at('WHEAD', 2)}"]
    nl = "\n"
    return f"""{bindings(kind, [kind, kind])}
var<workgroup> As: array<{kind}, {TILE * DEPTH}>;
var<workgroup> Bs: array<{kind}, {TILE * DEPTH}>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) t: u32) {{
  let tile = wid.x + wid.y * nwg.x;
  let TM = {lay["TM"]};
  if (tile >= TM * ((({lay["NCOL"]}) + {TILE - 1}u) / {TILE}u)) {{ return; }}
  let g = wid.z;
  let M = {lay["M"]};
  let NCOL = {lay["NCOL"]};
  let KR = {lay["KR"]};
  let row0 = (tile % TM) * {TILE}u;
  let col0 = (tile / TM) * {TILE}u;
  var acc: array<{kind}, 16>;
  for (var k0 = 0u; k0 < KR; k0 = k0 + {DEPTH}u) {{
    for (var l = 0u; l < 4u; l = l + 1u) {{
      let e = t + l * 256u;
      let mm = e % {TILE}u;
      let r = k0 + e / {TILE}u;
      var av = {zero};
      let m = row0 + mm;
      if (m < M && r < KR) {{
{nl.join(adec)}
        av = IN1[{" + ".join(woff)}];
      }}
      As[e] = av;
      var bv = {zero};
      let col = col0 + mm;
      if (col < NCOL && r < KR) {{
{nl.join(bcoords)}
{nl.join(kdec)}
{nl.join(gather)}
        if (ok) {{ bv = IN0[xi]; }}
      }}
      Bs[e] = bv;
    }}
    workgroupBarrier();
    for (var kk = 0u; kk < {DEPTH}u; kk = kk + 1u) {{
      var ar: array<{kind}, 4>;
      var br: array<{kind}, 4>;
      for (var i = 0u; i < 4u; i = i + 1u) {{
        ar[i] = As[kk * {TILE}u + lid.y + 16u * i];
        br[i] = Bs[kk * {TILE}u + lid.x + 16u * i];
      }}
      for (var i = 0u; i < 4u; i = i + 1u) {{
        for (var j = 0u; j < 4u; j = j + 1u) {{
          acc[i * 4u + j] = acc[i * 4u + j] + ar[i] * br[j];
        }}
      }}
    }}
    workgroupBarrier();
  }}
  for (var i = 0u; i < 4u; i = i + 1u) {{
    for (var j = 0u; j < 4u; j = j + 1u) {{
      let m = row0 + lid.y + 16u * i;
      let col = col0 + lid.x + 16u * j;
      if (m < M && col < NCOL) {{
        let n = col / {lay["PP"]};
        let p = col % {lay["PP"]};
        OUT[(n * {lay["COUT"]} + g * M + m) * {lay["PP"]} + p] = acc[i * 4u + j];
      }}
    }}
  }}
}}
"""


# Register-blocked kernel for CPU drivers (matmul's scheme, see kernels_linalg): a
# (BLOCK_Y * RB) x (BLOCK_X * RB) tile of (output channel, column) per workgroup, no workgroup
# memory; invocation (x, y) owns channels y*RB .. y*RB+RB-1 and columns x, x+BLOCK_X, ...
# Each column's batch offset and window origin are decoded once, before the K loop.
BLOCK_X, BLOCK_Y, RB = 8, 4, 16


def _blocked_source(kind: str, nd: int, transposed: bool) -> str:
    lay = _Layout(nd)
    zero = f"{kind}(0)"
    rows, cols = range(RB), range(RB)
    pre = []
    for j in cols:
        pre += [
            f"  let col{j} = min(c0 + {BLOCK_X * j}u, NCOL - 1u);",
            f"  let xb{j} = {lay['XOFF']} + (col{j} / {lay['PP']}) * {lay['XSN']} + g * {lay['Cg']} * {lay['XSC']};",
            f"  var pr{j} = col{j} % {lay['PP']};",
        ]
        for i in reversed(range(nd)):
            size = lay.at("OUT", i)
            o = f"(pr{j} % {size})"
            if transposed:  # input pixel (o + pad - k*d) / s
                pre.append(f"  let ob{j}_{i} = i32{o} + bitcast<i32>({lay.at('PAD', i)});")
            else:  # input pixel o*s - pad + k*d
                pre.append(f"  let ob{j}_{i} = i32({o} * {lay.at('S', i)}) - bitcast<i32>({lay.at('PAD', i)});")
            pre.append(f"  pr{j} = pr{j} / {size};")
    kdec = [f"    let c = r / {lay['Kp']};", f"    var krem = r % {lay['Kp']};"]
    for i in reversed(range(nd)):
        kdec.append(f"    let k{i} = krem % {lay.at('K', i)}; krem = krem / {lay.at('K', i)};")
        kdec.append(f"    let kd{i} = i32(k{i} * {lay.at('DIL', i)});")
    wk = [lay.at("WHEAD", 0)] + [f"k{i} * {lay.at('WS', i)}" for i in range(nd)]
    if transposed:  # weight (Cin, Og, *K): row m is an output channel of group g
        wk.append(f"(g * {lay['Cg']} + c) * {lay.at('WHEAD', 1)}")
        wrow = lay.at("WHEAD", 2)
    else:  # weight (Cout, Cg, *K)
        wk += [f"g * {lay['Og']} * {lay.at('WHEAD', 1)}", f"c * {lay.at('WHEAD', 2)}"]
        wrow = lay.at("WHEAD", 1)
    body = kdec + [f"    let wk = {' + '.join(wk)};", f"    let cx = c * {lay['XSC']};"]
    # Clamped (always in-bounds) weight loads; padded window taps read XOFF and are zeroed.
    body += [f"    let a{i} = IN1[wk + min(r0 + {i}u, M - 1u) * {wrow}];" for i in rows]
    for j in cols:
        ok, idx = [], [f"xb{j}", "cx"]
        for i in range(nd):
            if transposed:
                body += [
                    f"    let t{j}_{i} = ob{j}_{i} - kd{i};",
                    f"    let q{j}_{i} = t{j}_{i} / i32({lay.at('S', i)});",
                ]
                ok.append(
                    f"t{j}_{i} >= 0 && t{j}_{i} % i32({lay.at('S', i)}) == 0 && q{j}_{i} < i32({lay.at('IN', i)})"
                )
            else:
                body.append(f"    let q{j}_{i} = ob{j}_{i} + kd{i};")
                ok.append(f"u32(q{j}_{i}) < {lay.at('IN', i)}")
            idx.append(f"u32(q{j}_{i}) * {lay.at('XS', i)}")
        body += [
            f"    let ok{j} = {' && '.join(ok)};",
            f"    let b{j} = select({zero}, IN0[select({lay['XOFF']}, {' + '.join(idx)}, ok{j})], ok{j});",
        ]
    body += [f"    acc{i}_{j} = acc{i}_{j} + a{i} * b{j};" for i in rows for j in cols]
    stores = []
    for j in cols:
        stores += [
            f"  if (c0 + {BLOCK_X * j}u < NCOL) {{",
            f"    let ob = (col{j} / {lay['PP']}) * {lay['COUT']} * {lay['PP']} + col{j} % {lay['PP']};",
        ]
        stores += [
            f"    if (r0 + {i}u < M) {{ OUT[ob + (g * M + r0 + {i}u) * {lay['PP']}] = acc{i}_{j}; }}" for i in rows
        ]
        stores.append("  }")
    acc = "\n".join(f"  var acc{i}_{j} = {zero};" for i in rows for j in cols)
    nl = "\n"
    return f"""{bindings(kind, [kind, kind])}
@compute @workgroup_size({BLOCK_X}, {BLOCK_Y})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {{
  let tile = wid.x + wid.y * nwg.x;
  let TM = {lay["TM"]};
  let M = {lay["M"]};
  let NCOL = {lay["NCOL"]};
  let KR = {lay["KR"]};
  if (tile >= TM * ((NCOL + {BLOCK_X * RB - 1}u) / {BLOCK_X * RB}u)) {{ return; }}
  let g = wid.z;
  let r0 = (tile % TM) * {BLOCK_Y * RB}u + lid.y * {RB}u;
  let c0 = (tile / TM) * {BLOCK_X * RB}u + lid.x;
{nl.join(pre)}
{acc}
  for (var r = 0u; r < KR; r = r + 1u) {{
{nl.join(body)}
  }}
{nl.join(stores)}
}}
"""


@kernel("convolution")
def convolution(rt, x, w, *, stride, padding, dilation, groups, transposed, output_padding):
    kind = storage_type(x.dtype, "convolution")
    if kind == "u32":
        raise DeviceError("convolution: bool tensors are not supported")
    nd = w.ndim - 2
    if not 1 <= nd <= 3:
        raise DeviceError(f"convolution: {nd} spatial dims; the vulkan kernel supports 1 to 3")
    n, cin = x.shape[:2]
    kernel_size = tuple(w.shape[2:])
    spatial_in = tuple(x.shape[2:])
    cg, og = (cin // groups, w.shape[1]) if transposed else (w.shape[1], w.shape[0] // groups)
    spatial = conv_output_spatial(spatial_in, kernel_size, stride, padding, dilation, transposed, output_padding)
    cout = og * groups
    out = new_view(rt, (n, cout, *spatial), x.dtype)
    if out.size == 0:
        return out
    kp = math.prod(kernel_size)
    if cg * kp == 0 or x.size == 0:
        return copy_into(rt, out, 0)
    pp = math.prod(spatial)
    ncol = n * pp
    if rt.cpu_driver:
        tm, tn = -(-og // (BLOCK_Y * RB)), -(-ncol // (BLOCK_X * RB))
    else:
        tm, tn = -(-og // TILE), -(-ncol // TILE)
    params = [og, ncol, cg * kp, cg, og, kp, pp, tm, cout, x.offset, x.strides[0], x.strides[1]]
    params += [*x.strides[2:], w.offset, w.strides[0], w.strides[1], *spatial_in, *spatial, *kernel_size]
    params += [*stride, *(p[0] for p in padding), *dilation, *w.strides[2:]]
    params = [p & 0xFFFFFFFF for p in params]
    if groups > rt.max_groups:
        raise DeviceError(f"convolution: {groups} groups exceed this device's {rt.max_groups} workgroups per dim")
    gx, gy, _ = rt.grid(tm * tn)
    if rt.cpu_driver:
        source = _blocked_source(kind, nd, bool(transposed))
    else:
        source = _conv_source(kind, nd, bool(transposed))
    rt.dispatch(source, [out.buffer, x.buffer, w.buffer], [True, False, False], params, (gx, gy, groups))
    return out


# max pooling ------------------------------------------------------------------------------------------


def _pool_source(kind: str, nd: int, adaptive: bool) -> str:
    # P: [numel, C, x_off, xs_n, xs_c, xs.., in.., out.., (kernel.., stride.., pad.., dil..)]
    xs, ins, outs, ks = 5, 5 + nd, 5 + 2 * nd, 5 + 3 * nd
    st, pd, dl = ks + nd, ks + 2 * nd, ks + 3 * nd
    lines = [
        f"  let plane = idx / {_prod(outs, nd)};",
        f"  var rem = idx % {_prod(outs, nd)};",
    ]
    for i in reversed(range(nd)):
        lines.append(f"  let o{i} = i32(rem % P[{outs + i}]); rem = rem / P[{outs + i}];")
    lines += [
        "  let base = P[2] + (plane / P[1]) * P[3] + (plane % P[1]) * P[4];",
        f"  var best: {kind};",
        "  var best_i = -1;",
    ]
    depth = 1
    for i in range(nd):
        size = f"i32(P[{ins + i}])"
        ind = "  " * depth
        if adaptive:
            lines.append(f"{ind}let lo{i} = (o{i} * {size}) / i32(P[{outs + i}]);")
            lines.append(f"{ind}let hi{i} = ((o{i} + 1) * {size} + i32(P[{outs + i}]) - 1) / i32(P[{outs + i}]);")
            lines.append(f"{ind}for (var q{i} = lo{i}; q{i} < hi{i}; q{i} = q{i} + 1) {{")
        else:
            lines.append(f"{ind}for (var k{i} = 0; k{i} < i32(P[{ks + i}]); k{i} = k{i} + 1) {{")
            lines.append(f"{ind}  let q{i} = o{i} * i32(P[{st + i}]) - i32(P[{pd + i}]) + k{i} * i32(P[{dl + i}]);")
            lines.append(f"{ind}  if (q{i} < 0 || q{i} >= {size}) {{ continue; }}")
        depth += 1
    ind = "  " * depth
    flat = "q0"
    for i in range(1, nd):
        flat = f"({flat}) * i32(P[{ins + i}]) + q{i}"
    offset = " + ".join(["base"] + [f"u32(q{i}) * P[{xs + i}]" for i in range(nd)])
    lines += [
        f"{ind}let v = IN0[{offset}];",
        # PyTorch's rule (the decomposition's, ops/pooling.py): the first cell starts, a greater
        # one or a NaN replaces it, so a window reports its first maximum or its last NaN
        f"{ind}if (best_i < 0 || v > best || isnan_f_{kind}(v)) {{ best = v; best_i = {flat}; }}",
    ]
    while depth > 1:
        depth -= 1
        lines.append("  " * depth + "}")
    nan_helper = (
        "fn isnan_f_f32(x: f32) -> bool { return isnan_f(x); }"
        if kind == "f32"
        else f"fn isnan_f_{kind}(x: {kind}) -> bool {{ return false; }}"
    )
    return f"""{PRELUDE}
{nan_helper}
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> OUT: array<{kind}>;
@group(0) @binding(2) var<storage, read_write> IDX: array<i32>;
@group(0) @binding(3) var<storage, read> IN0: array<{kind}>;
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let idx = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (idx >= P[0]) {{ return; }}
{chr(10).join(lines)}
  OUT[idx] = best;
  IDX[idx] = max(best_i, 0);
}}
"""


def _prod(base: int, nd: int) -> str:
    return "(" + " * ".join(f"P[{base + i}]" for i in range(nd)) + ")"


def _pool(rt, x, output_size, extra, adaptive: bool):
    kind = storage_type(x.dtype, "max_pool")
    nd = len(output_size)
    if not 1 <= nd <= 3 or x.ndim != nd + 2:
        raise DeviceError(f"max_pool: expected (N, C, *spatial) with 1-3 spatial dims, got shape {x.shape}")
    shape = (*x.shape[:2], *output_size)
    values, indices = new_view(rt, shape, x.dtype), new_view(rt, shape, D.int64)
    if values.size == 0:
        return values, indices
    params = [values.size, x.shape[1], x.offset, *x.strides, *x.shape[2:], *output_size, *extra]
    source = _pool_source(kind, nd, adaptive)
    groups = rt.grid(-(-values.size // WORKGROUP))
    rt.dispatch(source, [values.buffer, indices.buffer, x.buffer], [True, True, False], params, groups)
    return values, indices


@kernel("max_pool")
def max_pool(rt, x, *, kernel_size, stride, padding, dilation, output_size):
    return _pool(rt, x, tuple(output_size), [*kernel_size, *stride, *padding, *dilation], False)


@kernel("adaptive_max_pool")
def adaptive_max_pool(rt, x, *, output_size):
    return _pool(rt, x, tuple(output_size), [], True)


# grid sampler ----------------------------------------------------------------------------------------

_PADDING = {"zeros": 0, "border": 1, "reflection": 2}

# PyTorch's GridSampler coordinate rules (unnormalize, clip/reflect) with their derivatives.
_GRID_HELPERS = """
fn reflect_c(coord: f32, twice_low: f32, twice_high: f32, g: ptr<function, f32>) -> f32 {
  if (twice_low == twice_high) { *g = 0.0; return 0.0; }
  let low = twice_low / 2.0;
  let span = (twice_high - twice_low) / 2.0;
  var shifted = coord - low;
  var sign = 1.0;
  if (shifted < 0.0) { sign = -1.0; shifted = -shifted; }
  let extra = shifted % span;
  let flips = floor(shifted / span);
  if (flips % 2.0 == 0.0) { *g = sign; return extra + low; }
  *g = -sign;
  return span - extra + low;
}
fn clip_c(coord: f32, size: f32, g: ptr<function, f32>) -> f32 {
  *g = select(0.0, 1.0, coord > 0.0 && coord < size - 1.0);
  return clamp(select(coord, 0.0, isnan_f(coord)), 0.0, size - 1.0);
}
// source coordinate along an axis of ``size`` and d(source)/d(coord) in *g
fn source_c(coord: f32, size: f32, g: ptr<function, f32>) -> f32 {
  var src: f32;
  if (P[3] != 0u) { src = (coord + 1.0) / 2.0 * (size - 1.0); *g = (size - 1.0) / 2.0; }
  else { src = ((coord + 1.0) * size - 1.0) / 2.0; *g = size / 2.0; }
  var g1 = 1.0;
  var g2 = 1.0;
  if (P[2] == 2u) {
    if (P[3] != 0u) { src = reflect_c(src, 0.0, 2.0 * (size - 1.0), &g1); }
    else { src = reflect_c(src, -1.0, 2.0 * size - 1.0, &g1); }
  }
  if (P[2] != 0u) { src = clip_c(src, size, &g2); }
  *g = *g * g1 * g2;
  return src;
}
// corner k (0..3 bilinear, 0 nearest) of a sample at (ix, iy): pixel (fx, fy) as floats (NaN or
// infinite where the coordinate is), weight, d weight/d ix, d weight/d iy
struct Corner { fx: f32, fy: f32, w: f32, dx: f32, dy: f32 }
fn corner(ix: f32, iy: f32, k: u32) -> Corner {
  if (P[1] == 1u) { return Corner(round(ix), round(iy), 1.0, 0.0, 0.0); }
  let x0 = floor(ix);
  let y0 = floor(iy);
  let wx1 = ix - x0;
  let wy1 = iy - y0;
  let wx0 = 1.0 - wx1;
  let wy0 = 1.0 - wy1;
  if (k == 0u) { return Corner(x0, y0, wx0 * wy0, -wy0, -wx0); }
  if (k == 1u) { return Corner(x0 + 1.0, y0, wx1 * wy0, wy0, -wx1); }
  if (k == 2u) { return Corner(x0, y0 + 1.0, wx0 * wy1, -wy1, wx0); }
  return Corner(x0 + 1.0, y0 + 1.0, wx1 * wy1, wy1, wx1);
}
fn within(v: f32, size: u32) -> bool { return !isnan_f(v) && !isinf_f(v) && v >= 0.0 && v <= f32(size) - 1.0; }
fn inside(c: Corner) -> bool { return within(c.fx, P[7]) && within(c.fy, P[6]); }
// the corner's pixel offset in an operand with row stride rs and column stride cs (only where inside)
fn pixel(c: Corner, rs: u32, cs: u32) -> u32 { return u32(c.fy) * rs + u32(c.fx) * cs; }
"""

# P: [total, nearest, padding_mode, align_corners, N, C, H, W, Ho*Wo, x_off, xs_n, xs_c, xs_h, xs_w,
#     grid_off, gs_n, gs_h, gs_w, gs_2, Wo, g_off, g_n, g_c, g_h, g_w, n_sorted]
_SAMPLE = """  let gp = P[14] + n * P[15] + (p / P[19]) * P[16] + (p % P[19]) * P[17];
  var gxs: f32;
  var gys: f32;
  let ix = source_c(GRID[gp], f32(P[7]), &gxs);
  let iy = source_c(GRID[gp + P[18]], f32(P[6]), &gys);
  let corners = select(4u, 1u, P[1] == 1u);"""


def _grid_params(x, grid, mode, padding_mode, align_corners, total):
    n, c, h, w = x.shape
    ho, wo = grid.shape[1:3]
    return [
        total, int(mode == "nearest"), _PADDING[padding_mode], int(bool(align_corners)), n, c, h, w, ho * wo,
        x.offset, *x.strides, grid.offset, *grid.strides, wo,
    ]  # fmt: skip


def _check_grid(x, grid, mode):
    if storage_type(x.dtype, "grid_sampler_2d") != "f32" or grid.dtype is not x.dtype:
        raise DeviceError(
            f"grid_sampler_2d: expected float32 or float16 input and grid of one dtype on vulkan, "
            f"got {x.dtype.name} and {grid.dtype.name}"
        )
    if mode not in ("bilinear", "nearest"):
        raise DeviceError(f"grid_sampler_2d: mode '{mode}' is not supported on vulkan")


@kernel("grid_sampler_2d")
def grid_sampler_2d(rt, x, grid, *, mode, padding_mode, align_corners):
    _check_grid(x, grid, mode)
    n, c = x.shape[:2]
    out = new_view(rt, (n, c, *grid.shape[1:3]), x.dtype)
    if out.size == 0:
        return out
    params = _grid_params(x, grid, mode, padding_mode, align_corners, out.size)
    source = f"""{PRELUDE}
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read> GRID: array<f32>;
{_GRID_HELPERS}
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let idx = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (idx >= P[0]) {{ return; }}
  let p = idx % P[8];
  let ch = (idx / P[8]) % P[5];
  let n = idx / (P[8] * P[5]);
{_SAMPLE}
  let base = P[9] + n * P[10] + ch * P[11];
  // as the decomposition: a masked corner reads 0 (times its weight, NaN at a NaN coordinate),
  // and the terms are summed from the first (a -0.0 term stays -0.0)
  var acc = 0.0;
  for (var k = 0u; k < corners; k = k + 1u) {{
    let cr = corner(ix, iy, k);
    var v = 0.0;
    if (inside(cr)) {{ v = X[base + pixel(cr, P[12], P[13])]; }}
    let term = v * cr.w;
    acc = select(acc + term, term, k == 0u);
  }}
  OUT[idx] = acc;
}}
"""
    groups = rt.grid(-(-out.size // WORKGROUP))
    rt.dispatch(source, [out.buffer, x.buffer, grid.buffer], [True, False, False], params, groups)
    return out


@kernel("grid_sampler_2d_backward")
def grid_sampler_2d_backward(rt, g, x, grid, *, mode, padding_mode, align_corners):
    _check_grid(x, grid, mode)
    n, c, h, w = x.shape
    grad_x = new_view(rt, x.shape, x.dtype)
    grad_grid = new_view(rt, grid.shape, grid.dtype)
    p = grid.shape[1] * grid.shape[2]
    if grid.size == 0 or x.size == 0:
        copy_into(rt, grad_grid, 0) if grid.size else None
        return (copy_into(rt, grad_x, 0) if x.size else grad_x), grad_grid
    corners = 1 if mode == "nearest" else 4
    base = _grid_params(x, grid, mode, padding_mode, align_corners, 0)
    gparams = [g.offset, *g.strides]
    head = f"""{PRELUDE}
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read> X: array<f32>;
@group(0) @binding(3) var<storage, read> GRID: array<f32>;
@group(0) @binding(4) var<storage, read> G: array<f32>;
"""
    # grad_grid: one thread per (n, sample), summing over channels and corners.
    source = f"""{head}{_GRID_HELPERS}
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let idx = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (idx >= P[0]) {{ return; }}
  let p = idx % P[8];
  let n = idx / P[8];
{_SAMPLE}
  if (P[1] == 1u) {{ OUT[2u * idx] = 0.0; OUT[2u * idx + 1u] = 0.0; return; }}  // nearest: piecewise constant
  var gix = 0.0;
  var giy = 0.0;
  for (var k = 0u; k < corners; k = k + 1u) {{
    let cr = corner(ix, iy, k);
    let in_plane = inside(cr);  // a masked corner's values read as 0
    var weighted = 0.0;
    for (var ch = 0u; ch < P[5]; ch = ch + 1u) {{
      var v = 0.0;
      if (in_plane) {{ v = X[P[9] + n * P[10] + ch * P[11] + pixel(cr, P[12], P[13])]; }}
      weighted = weighted + v * G[P[20] + n * P[21] + ch * P[22] + (p / P[19]) * P[23] + (p % P[19]) * P[24]];
    }}
    gix = select(gix + weighted * cr.dx, weighted * cr.dx, k == 0u);
    giy = select(giy + weighted * cr.dy, weighted * cr.dy, k == 0u);
  }}
  OUT[2u * idx] = gix * gxs;
  OUT[2u * idx + 1u] = giy * gys;
}}
"""
    params = [n * p, *base[1:], *gparams]
    buffers = [grad_grid.buffer, x.buffer, grid.buffer, g.buffer]
    rt.dispatch(source, buffers, [True, False, False, False], params, rt.grid(-(-(n * p) // WORKGROUP)))
    # grad_input: sort (pixel, sample-corner) pairs by pixel, then gather per (pixel, channel).
    count = n * p * corners
    key = f"""    let n = idx / (P[8] * {corners}u);
    let p = (idx / {corners}u) % P[8];
    let k = idx % {corners}u;
{_SAMPLE}
    let cr = corner(ix, iy, k);
    if (inside(cr)) {{ key = n * P[6] * P[7] + pixel(cr, P[7], 1u); }}"""
    keys, ids, n_sorted = sort_keys(
        rt, key, [("f32", grid.buffer)], [count, *base[1:]], count, helpers=_GRID_HELPERS, names=("GRID",)
    )
    source = f"""{PRELUDE}
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read> SK: array<u32>;
@group(0) @binding(3) var<storage, read> SI: array<u32>;
@group(0) @binding(4) var<storage, read> GRID: array<f32>;
@group(0) @binding(5) var<storage, read> G: array<f32>;
{_GRID_HELPERS}
{LOWER_BOUND}
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let idx = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (idx >= P[0]) {{ return; }}
  let hw = P[6] * P[7];
  let pix = idx % hw;
  let ch = (idx / hw) % P[5];
  let n = idx / (hw * P[5]);
  let key = n * hw + pix;
  let lo = lower_bound(key, P[25]);
  let hi = lower_bound(key + 1u, P[25]);
  var acc = 0.0;
  for (var s = lo; s < hi; s = s + 1u) {{
    let id = SI[s];
    let p = (id / {corners}u) % P[8];
{_SAMPLE}
    let cr = corner(ix, iy, id % {corners}u);
    acc = acc + cr.w * G[P[20] + n * P[21] + ch * P[22] + (p / P[19]) * P[23] + (p % P[19]) * P[24]];
  }}
  OUT[idx] = acc;
}}
"""
    params = [grad_x.size, *base[1:], *gparams, n_sorted]
    buffers = [grad_x.buffer, keys, ids, grid.buffer, g.buffer]
    rt.dispatch(source, buffers, [True] + [False] * 4, params, rt.grid(-(-grad_x.size // WORKGROUP)))
    return grad_x, grad_grid
