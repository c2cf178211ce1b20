"""Random kernels: the cpu backend's Philox4x64-10 stream, reproduced on the device.

WGSL has no 64-bit integers, so each 64-bit word is a ``vec2<u32>`` (lo, hi) and the
64x64->128-bit multiply of a Philox round is built from 16-bit limbs. Word ``w`` of a draw is
lane ``w % 4`` of the block at counter ``start + 1 + w / 4`` (NumPy increments the counter
before generating), and every kernel advances the generator by the same number of blocks as
the cpu kernel, so the raw bits are identical on both devices for the same seed and offset.

Which results are bit-identical to cpu (the transforms of ``munet/backends/cpu/kernels_random.py``):
``uniform`` (top 24 bits), ``randint`` (64-bit word modulo the range, done by long division),
``randperm`` (stable sort of the 64-bit words), ``bernoulli`` (the 53-bit uniform compared with
p exactly in integers). The cpu computes ``normal``/``normal_tensor`` (Box-Muller),
``exponential`` and ``multinomial`` in float64; here they are float32 from the same bits, so
they agree to float32 rounding (multinomial picks the same category except when a uniform
falls within float32 rounding of a cdf boundary). The cpu's argument checks that need the
data (negative std, p outside [0, 1], invalid multinomial rows) are not made on the device.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet._device import DeviceError
from munet.backends.vulkan.copies import contiguous, new_view
from munet.backends.vulkan.kernels_indexing import Params, launch
from munet.backends.vulkan.kernels_sort import _extract, _pow2, sort_rows
from munet.backends.vulkan.registry import kernel
from munet.backends.vulkan.views import INT32_MAX, INT32_MIN, VkView, storage_type
from munet.backends.vulkan.wgsl import Scalar, elementwise

_PHILOX = """
fn mul32(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0; let p11 = a1 * b1;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
// The 128-bit product of two 64-bit words: (lo.x, lo.y, hi.x, hi.y).
fn mulhilo(a: vec2<u32>, b: vec2<u32>) -> vec4<u32> {
  let ll = mul32(a.x, b.x); let lh = mul32(a.x, b.y); let hl = mul32(a.y, b.x); let hh = mul32(a.y, b.y);
  let s1 = ll.y + lh.x; var c1 = select(0u, 1u, s1 < ll.y);
  let r1 = s1 + hl.x; c1 = c1 + select(0u, 1u, r1 < s1);
  let s2 = hh.x + lh.y; var c2 = select(0u, 1u, s2 < hh.x);
  let t2 = s2 + hl.y; c2 = c2 + select(0u, 1u, t2 < s2);
  let r2 = t2 + c1; c2 = c2 + select(0u, 1u, r2 < t2);
  return vec4<u32>(ll.x, r1, r2, hh.y + c2);
}
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
// Word w of the stream: lane w % 4 of Philox4x64-10 at counter start + 1 + w / 4.
fn word(w: u32) -> vec2<u32> {
  let blk = w / 4u + 1u;
  let c0 = P[2] + blk;
  let carry0 = c0 < blk;
  let c1 = P[3] + select(0u, 1u, carry0);
  let carry1 = carry0 && c1 == 0u;
  let c2 = P[4] + select(0u, 1u, carry1);
  let carry2 = carry1 && c2 == 0u;
  var x0 = vec2<u32>(c0, c1);
  var x1 = vec2<u32>(c2, P[5] + select(0u, 1u, carry2));
  var x2 = vec2<u32>(0u, 0u);
  var x3 = vec2<u32>(0u, 0u);
  var k0 = vec2<u32>(P[0], P[1]);
  var k1 = vec2<u32>(0u, 0u);
  let m0 = vec2<u32>(0xE14C6C93u, 0xD2E7470Eu);
  let m1 = vec2<u32>(0x95121157u, 0xCA5A8263u);
  for (var r = 0u; r < 10u; r = r + 1u) {
    if (r > 0u) { k0 = add64(k0, vec2<u32>(0x7F4A7C15u, 0x9E3779B9u)); k1 = add64(k1, vec2<u32>(0x84CAA73Bu, 0xBB67AE85u)); }
    let p0 = mulhilo(m0, x0);
    let p1 = mulhilo(m1, x2);
    let y0 = p1.zw ^ x1 ^ k0;
    let y2 = p0.zw ^ x3 ^ k1;
    x0 = y0; x1 = p1.xy; x2 = y2; x3 = p0.xy;
  }
  switch (w % 4u) {
    case 0u: { return x0; }
    case 1u: { return x1; }
    case 2u: { return x2; }
    default: { return x3; }
  }
}
// The top 53 bits of a word as a float32 in [0, 1) (u53 rounded to float32).
fn u53(v: vec2<u32>) -> f32 { return f32(v.y) * 2.3283064365386963e-10 + f32(v.x >> 11u) * 1.1102230246251565e-16; }
"""


def _stream(generator, n_words: int) -> Params:
    """Params starting with the Philox key and counter (P[0..5]) for a draw of ``n_words`` words."""
    key, counter = generator.philox_advance((n_words + 3) // 4)
    p = Params()
    p.add_all([key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF])
    p.add_all([(counter >> (32 * k)) & 0xFFFFFFFF for k in range(4)])
    return p


def _float_out(rt, shape, dtype, op: str) -> VkView:
    if storage_type(dtype, op) != "f32":
        raise DeviceError(
            f"{op}: dtype {dtype.name} is not a float dtype supported on vulkan (float32 and float16 are)"
        )
    return new_view(rt, tuple(shape), dtype)


@kernel("uniform")
def uniform(rt, *, shape, dtype, low, high, generator):
    out = _float_out(rt, shape, dtype, "uniform")
    p = _stream(generator, out.size)
    span, lo = p.scalar("f32", high - low), p.scalar("f32", low)
    # The top 24 bits of the word (11 for float16, as the cpu: every value exact in the dtype).
    bits = 11 if dtype is D.float16 else 24
    # Two separate statements keep the compiler from fusing them into an fma (the cpu rounds twice).
    body = f"""  let u = f32(word(i).y >> {32 - bits}u) * {2.0**-bits!r};
  let scaled = u * {span};
  OUT[i] = scaled + {lo};"""
    launch(rt, body, [("OUT", "f32", out.buffer)], [], p, out.size, _PHILOX)
    return out


def _standard_normal(rt, generator, n: int) -> VkView:
    """Box-Muller over words [0, m) (radii) and [m, 2m) (angles), m = ceil(n / 2), as the cpu."""
    out = new_view(rt, (n,), D.float32)
    m = (n + 1) // 2
    p = _stream(generator, 2 * m)
    mw = p.add(m)
    body = f"""  let j = select(i - {mw}, i, i < {mw});
  let w1 = word(j);
  let u1 = f32(w1.y) * 2.3283064365386963e-10 + f32((w1.x >> 11u) + 1u) * 1.1102230246251565e-16;
  let angle = 6.283185307179586 * u53(word({mw} + j));
  let radius = sqrt(-2.0 * log(u1));
  OUT[i] = select(radius * sin(angle), radius * cos(angle), i < {mw});"""
    launch(rt, body, [("OUT", "f32", out.buffer)], [], p, n, _PHILOX)
    return out


@kernel("normal")
def normal(rt, *, shape, dtype, mean, std, generator):
    out = _float_out(rt, shape, dtype, "normal")
    z = _standard_normal(rt, generator, out.size)
    z = VkView(z.buffer, out.shape, out.strides, 0, D.float32)
    return elementwise(rt, "a * b + c", [z, Scalar("f32", std), Scalar("f32", mean)], out)


@kernel("normal_tensor")
def normal_tensor(rt, mean, std, *, generator):
    from munet.ops._utils import broadcast_shapes

    tensors = [t for t in (mean, std) if isinstance(t, VkView)]
    shape = broadcast_shapes(*(tuple(t.shape) for t in tensors), op="normal")
    out = _float_out(rt, shape, tensors[0].dtype, "normal")
    z = _standard_normal(rt, generator, out.size)
    z = VkView(z.buffer, out.shape, out.strides, 0, D.float32)
    ops = [t if isinstance(t, VkView) else Scalar("f32", t) for t in (std, mean)]
    return elementwise(rt, "a * b + c", [z, *ops], out)


@kernel("exponential")
def exponential(rt, *, shape, dtype, lambd, generator):
    out = _float_out(rt, shape, dtype, "exponential")
    p = _stream(generator, out.size)
    lw = p.scalar("f32", lambd)
    # -log1p(-u): from u itself below 1/2, from the exact complement 1 - u above.
    body = f"""  let w = word(i);
  var e: f32;
  if (w.y < 0x80000000u) {{ e = -log1p_f(-u53(w)); }}
  else {{ e = -log(f32(~w.y) * 2.3283064365386963e-10 + f32(((~w.x) >> 11u) + 1u) * 1.1102230246251565e-16); }}
  OUT[i] = e / {lw};"""
    launch(rt, body, [("OUT", "f32", out.buffer)], [], p, out.size, _PHILOX)
    return out


@kernel("bernoulli")
def bernoulli(rt, p_tensor, *, generator):
    kind = storage_type(p_tensor.dtype, "bernoulli")
    out = new_view(rt, p_tensor.shape, p_tensor.dtype)
    probs = contiguous(rt, p_tensor)
    p = _stream(generator, out.size)
    off = p.add(probs.offset)
    prob = f"f32(PR[{off} + i])"
    one, zero = {"f32": ("1.0", "0.0"), "i32": ("1", "0"), "u32": ("1u", "0u")}[kind]
    # u = k / 2^53 < p exactly: k = hi24 * 2^29 + lo29 against p * 2^24 = q + frac.
    body = f"""  let w = word(i);
  let hi24 = w.y >> 8u;
  let lo29 = ((w.y & 0xffu) << 21u) | (w.x >> 11u);
  let q = {prob} * 16777216.0;
  let qf = floor(q);
  let qi = u32(qf);
  let f = u32(ceil((q - qf) * 536870912.0));
  let hit = hi24 < qi || (hi24 == qi && lo29 < f);
  OUT[i] = select({zero}, {one}, hit);"""
    launch(rt, body, [("OUT", kind, out.buffer)], [("PR", kind, probs.buffer)], p, out.size, _PHILOX)
    return out


@kernel("randint")
def randint(rt, *, shape, dtype, low, high, generator):
    kind = storage_type(dtype, "randint")
    span = high - low
    in_range = INT32_MIN <= low and high - 1 <= INT32_MAX
    if span > (1 << 32) or (dtype is not D.int32 and not in_range):
        raise DeviceError(
            f"randint: range [{low}, {high}) on vulkan must be at most 2**32 wide and, for {dtype.name}, lie in the "
            "int32 range (integers are held as int32 on this backend)"
        )
    out = new_view(rt, tuple(shape), dtype)
    p = _stream(generator, out.size)
    sw, lw = p.add(span & 0xFFFFFFFF), p.add(low & 0xFFFFFFFF)
    value = {"i32": "bitcast<i32>(v)", "f32": "f32(bitcast<i32>(v))", "u32": "select(0u, 1u, v != 0u)"}[kind]
    modulo = (
        "  let r = w.x;"  # span == 2**32: the low word
        if span == 1 << 32
        else f"""  let s = {sw};
  var r = w.y % s;
  for (var b = 31i; b >= 0i; b = b - 1i) {{
    let top = r >> 31u;
    r = (r << 1u) | ((w.x >> u32(b)) & 1u);
    if (top == 1u || r >= s) {{ r = r - s; }}
  }}"""
    )
    body = f"""  let w = word(i);
{modulo}
  let v = r + {lw};
  OUT[i] = {value};"""
    launch(rt, body, [("OUT", kind, out.buffer)], [], p, out.size, _PHILOX)
    return out


def _random_keys(rt, p: Params, rows: int, n: int, n2: int) -> tuple[VkView, VkView]:
    """Padded rows of 64-bit random keys (word ``r * n + j``) and their positions."""
    keys = new_view(rt, (2 * rows * n2,), D.int32)  # vec2<u32> per key
    idx = new_view(rt, (rows * n2,), D.int32)
    n2w, nw = p.add(n2), p.add(n)
    body = f"""  let r = i / {n2w};
  let q = i % {n2w};
  if (q < {nw}) {{ K[i] = word(r * {nw} + q); I[i] = q; }} else {{ I[i] = 0xffffffffu; }}"""
    launch(rt, body, [("K", "vec2<u32>", keys.buffer), ("I", "u32", idx.buffer)], [], p, rows * n2, _PHILOX)
    return keys, idx


@kernel("randperm")
def randperm(rt, *, n, dtype, generator):
    kind = storage_type(dtype, "randperm")
    p = _stream(generator, n)
    out = new_view(rt, (n,), dtype)
    if n == 0:
        return out
    n2 = _pow2(n)
    keys, idx = _random_keys(rt, p, 1, n, n2)
    sort_rows(rt, keys, idx, 1, n2, "u64", False)
    conv = {"i32": "i32(I[i])", "f32": "f32(I[i])", "u32": "select(0u, 1u, I[i] != 0u)"}[kind]
    launch(rt, f"  OUT[i] = {conv};", [("OUT", kind, out.buffer)], [("I", "u32", idx.buffer)], Params(), n)
    return out


def _row_cdf(rt, probs: VkView, rows: int, k: int) -> VkView:
    """Inclusive cumulative sums along each row (one workgroup per row, 256-wide chunks)."""
    cdf = new_view(rt, (rows * k,), D.float32)
    source = """@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> CDF: array<f32>;
@group(0) @binding(2) var<storage, read> PR: array<f32>;
var<workgroup> part: array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let row = wid.x + wid.y * nwg.x;
  let live = row < P[0];
  var carry = 0.0;
  for (var base = 0u; base < P[1]; base = base + 256u) {
    let j = base + t;
    var v = 0.0;
    if (live && j < P[1]) { v = PR[P[2] + row * P[1] + j]; }
    part[t] = v;
    workgroupBarrier();
    for (var s = 1u; s < 256u; s = s << 1u) {
      var add = 0.0;
      if (t >= s) { add = part[t - s]; }
      workgroupBarrier();
      part[t] = part[t] + add;
      workgroupBarrier();
    }
    if (live && j < P[1]) { CDF[row * P[1] + j] = carry + part[t]; }
    carry = carry + part[255];
    workgroupBarrier();
  }
}
"""
    rt.dispatch(source, [cdf.buffer, probs.buffer], [True, False], [rows, k, probs.offset], rt.grid(rows))
    return cdf


@kernel("multinomial")
def multinomial(rt, probs, *, num_samples, replacement, generator):
    if storage_type(probs.dtype, "multinomial") != "f32":
        raise DeviceError("multinomial: expected float32 or float16 probabilities on vulkan")
    k = probs.shape[-1]
    rows = math.prod(probs.shape[:-1])
    out = new_view(rt, (*probs.shape[:-1], num_samples), D.int64)
    src = contiguous(rt, probs)
    if replacement:
        cdf = _row_cdf(rt, src, rows, k)
        p = _stream(generator, rows * num_samples)
        nsw, kw = p.add(num_samples), p.add(k)
        body = f"""  let row = i / {nsw};
  let base = row * {kw};
  let goal = u53(word(i)) * CDF[base + {kw} - 1u];
  var lo = 0u;
  var hi = {kw};
  loop {{
    if (lo >= hi) {{ break; }}
    let mid = (lo + hi) / 2u;
    if (!(goal < CDF[base + mid])) {{ lo = mid + 1u; }} else {{ hi = mid; }}
  }}
  OUT[i] = i32(min(lo, {kw} - 1u));"""
        launch(rt, body, [("OUT", "i32", out.buffer)], [("CDF", "f32", cdf.buffer)], p, rows * num_samples, _PHILOX)
        return out
    # Without replacement: exponential races, the num_samples smallest E_j / p_j in order.
    p = _stream(generator, rows * k)
    n2 = _pow2(k)
    keys = new_view(rt, (rows * n2,), D.float32)
    idx = new_view(rt, (rows * n2,), D.int32)
    n2w, kw, off = p.add(n2), p.add(k), p.add(src.offset)
    body = f"""  let r = i / {n2w};
  let q = i % {n2w};
  if (q >= {kw}) {{ I[i] = 0xffffffffu; return; }}
  let w = word(r * {kw} + q);
  var e: f32;
  if (w.y < 0x80000000u) {{ e = -log1p_f(-u53(w)); }}
  else {{ e = -log(f32(~w.y) * 2.3283064365386963e-10 + f32(((~w.x) >> 11u) + 1u) * 1.1102230246251565e-16); }}
  K[i] = e / PR[{off} + r * {kw} + q];
  I[i] = q;"""
    outs = [("K", "f32", keys.buffer), ("I", "u32", idx.buffer)]
    launch(rt, body, outs, [("PR", "f32", src.buffer)], p, rows * n2, _PHILOX)
    sort_rows(rt, keys, idx, rows, n2, "f32", False)
    _, indices = _extract(rt, keys, idx, rows, n2, 0, num_samples, D.float32, with_values=False)
    return VkView(indices.buffer, out.shape, out.strides, 0, D.int64)
