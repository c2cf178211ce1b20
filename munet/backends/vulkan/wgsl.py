"""WGSL building blocks shared by the kernels: helper functions, bindings, strided indexing.

Every kernel reads its parameters (sizes, strides, offsets, scalars) from a ``u32`` storage
array ``P`` at binding 0, so one compiled pipeline serves every shape of the same rank.
Sources are specialized only on what changes the code: ranks, operand types, scalar-ness.
"""

from __future__ import annotations

import re
import struct

from munet.backends.vulkan.views import INT32_MAX, INT32_MIN, VkView, coalesce

WORKGROUP = 256

PRELUDE = """
fn isnan_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn isinf_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn inf_f() -> f32 { return bitcast<f32>(0x7f800000u); }
fn nan_f() -> f32 { return bitcast<f32>(0x7fc00000u); }
fn max_f(a: f32, b: f32) -> f32 { if (isnan_f(a) || isnan_f(b)) { return nan_f(); } return select(b, a, a > b); }
fn min_f(a: f32, b: f32) -> f32 { if (isnan_f(a) || isnan_f(b)) { return nan_f(); } return select(b, a, a < b); }
fn fmax_f(a: f32, b: f32) -> f32 { if (isnan_f(a)) { return b; } if (isnan_f(b)) { return a; } return select(b, a, a > b); }
fn fmin_f(a: f32, b: f32) -> f32 { if (isnan_f(a)) { return b; } if (isnan_f(b)) { return a; } return select(b, a, a < b); }
fn sign_f(x: f32) -> f32 { return select(select(0.0, -1.0, x < 0.0), 1.0, x > 0.0); }
fn tanh_f(x: f32) -> f32 { if (isnan_f(x)) { return x; } return tanh(clamp(x, -15.0, 15.0)); }
// exp and log with derived error bounds (the Vulkan spec lets a driver's exp be off by 3 + 2|x| ulp
// and log by 2^-21 absolute near 1; lavapipe's are, docs/vulkan.md "Float accuracy"). exp: x = n ln2 + r with
// ln2_hi (15 significant bits: n ln2_hi exact for |n| <= 150) and ln2_lo, |r| <= 0.347, and the
// Taylor polynomial of degree 7 (truncation 0.347^8/8! < 5.4e-9 relative); about 1 ulp of Horner
// rounding and 0.25 ulp from r's rounding. log: x = 2^e m, m in [0.707, 1.414), f = m - 1 (exact),
// s = f / (2 + f), log(m) = f - s (f - R) with R = 2 s^2 / 3 + 2 s^4 / 5 + ... (|s| <= 0.172, the
// first term left out is below 1e-9 of log(m)): the leading f is exact, so about 1 ulp, 1.5 after
// adding e ln2 (e ln2_hi exact). log reads subnormal operands from the bits; exp's results below
// 2^-126 come from one multiplication by a power of two (subnormal where the driver keeps them).
fn exp_f(x: f32) -> f32 {
  if (isnan_f(x)) { return x; }
  if (x > 88.7228394) { return inf_f(); }
  if (x < -103.972084) { return 0.0; }
  let n = round(x * 1.44269502);
  return exp_scaled((x - n * 0.693145751953125) - n * 1.42860677e-06, i32(n));
}
// exp2: x = n + r exactly, exp(r ln2) with r ln2 rounded (0.35 ulp more), exact at integers
fn exp2_f(x: f32) -> f32 {
  if (isnan_f(x)) { return x; }
  if (x >= 128.0) { return inf_f(); }
  if (x < -150.0) { return 0.0; }
  let n = round(x);
  return exp_scaled((x - n) * 0.693147182, i32(n));
}
// exp(r) 2^k for |r| <= 0.347, k in [-150, 128]: the power of two in two factors, each a normal f32
fn exp_scaled(r: f32, k: i32) -> f32 {
  var p = 1.98412698e-04;
  p = p * r + 1.38888889e-03; p = p * r + 8.33333333e-03; p = p * r + 4.16666667e-02;
  p = p * r + 0.166666667; p = p * r + 0.5; p = p * r + 1.0; p = p * r + 1.0;
  let h = k / 2;
  return p * bitcast<f32>(u32(h + 127) << 23u) * bitcast<f32>(u32(k - h + 127) << 23u);
}
// (e, log(m)) of finite x > 0 as above, read from the bits (a subnormal's fraction is a normal f32)
fn log_parts(x: f32) -> vec2<f32> {
  var bits = bitcast<u32>(x);
  var e = i32(bits >> 23u) - 127;
  if (e == -127) { bits = bitcast<u32>(f32(bits)); e = i32(bits >> 23u) - 276; }
  var m = bitcast<f32>((bits & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421354) { m = m * 0.5; e = e + 1; }
  return vec2<f32>(f32(e), log_near_one(m - 1.0));
}
// log(1 + f) for f in [-0.293, 0.415] (f exact)
fn log_near_one(f: f32) -> f32 {
  let s = f / (2.0 + f);
  let z = s * s;
  let r = z * (0.666666667 + z * (0.4 + z * (0.285714286 + z * 0.222222222)));
  return f - s * (f - r);
}
// log and log2: -inf at +-0, NaN below 0, decided on the bits (a driver that flushes subnormals
// would take a subnormal for 0)
fn log_regular(bits: u32) -> bool { return bits != 0u && bits < 0x7f800000u; }
fn log_edge(x: f32) -> f32 {
  let bits = bitcast<u32>(x);
  if ((bits & 0x7fffffffu) == 0u) { return -inf_f(); }
  return select(nan_f(), x, bits == 0x7f800000u);
}
fn log_f(x: f32) -> f32 {
  if (!log_regular(bitcast<u32>(x))) { return log_edge(x); }
  let p = log_parts(x);
  return p.x * 0.693145751953125 + (p.y + p.x * 1.42860677e-06);
}
fn log2_f(x: f32) -> f32 {
  if (!log_regular(bitcast<u32>(x))) { return log_edge(x); }
  let p = log_parts(x);
  return p.x + p.y * 1.44269504;
}
// |x| < 1: the Taylor polynomial of degree 11 (truncation below 1 / 12! relative, 2e-9), so no
// cancellation in exp(x) - 1; beyond, exp(x) - 1 loses at most a factor e / (e - 1) = 1.6.
fn expm1_f(x: f32) -> f32 {
  if (abs(x) >= 1.0) { return exp_f(x) - 1.0; }
  var p = 2.50521084e-08;
  p = p * x + 2.75573192e-07; p = p * x + 2.75573192e-06; p = p * x + 2.48015873e-05;
  p = p * x + 1.98412698e-04; p = p * x + 1.38888889e-03; p = p * x + 8.33333333e-03;
  p = p * x + 4.16666667e-02; p = p * x + 0.166666667; p = p * x + 0.5; p = p * x + 1.0;
  return p * x;
}
// log1p: near 0, log(1 + x) of the exact x itself; beyond, 1 + x rounds by at most 2^-24 relative,
// which moves log(1 + x) (|log| >= 0.25 there) by at most 2 ulp. (The usual log(u) x / (u - 1)
// trick fails: the shader compiler folds (1 + x) - 1 into x, as float ops are not exact in SPIR-V.)
fn log1p_f(x: f32) -> f32 {
  if (abs(x) < 0.29) { return log_near_one(x); }
  if (x < -1.0) { return nan_f(); }
  return log_f(1.0 + x);
}
fn pow_f(a: f32, b: f32) -> f32 {
  if (b == 0.0 || a == 1.0 || (a == -1.0 && isinf_f(b))) { return 1.0; }
  if (isnan_f(a) || isnan_f(b)) { return nan_f(); }
  if (a < 0.0 && b != trunc(b)) { return nan_f(); }
  let m = abs(a);
  var r: f32;
  if (m == 0.0) { r = select(inf_f(), 0.0, b > 0.0); } else { r = exp2_f(b * log2_f(m)); }
  let odd = abs(b) < 16777216.0 && b == trunc(b) && fract(b * 0.5) != 0.0;
  if ((bitcast<u32>(a) & 0x80000000u) != 0u && odd) { r = -r; }
  return r;
}
fn atan2_f(y: f32, x: f32) -> f32 {
  if (isnan_f(y) || isnan_f(x)) { return nan_f(); }
  if (y == 0.0 && x == 0.0) {
    let r = select(0.0, 3.14159274, (bitcast<u32>(x) & 0x80000000u) != 0u);
    return select(r, -r, (bitcast<u32>(y) & 0x80000000u) != 0u);
  }
  return atan2(y, x);
}
fn pow_i(a: i32, b: i32) -> i32 {
  if (b < 0) { if (a == 1) { return 1; } if (a == -1) { return select(1, -1, (b & 1) == 1); } return 0; }
  var r = 1; var x = a; var e = b;
  loop { if (e == 0) { break; } if ((e & 1) == 1) { r = r * x; } x = x * x; e = e >> 1u; }
  return r;
}
"""


class Scalar:
    """A number operand of a kernel, passed in ``P`` as one 32-bit word of ``kind``."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value):
        self.kind, self.value = kind, value

    def word(self) -> int:
        return scalar_word(self.kind, self.value)


def scalar_word(kind: str, value) -> int:
    if kind == "f32":
        return struct.unpack("<I", struct.pack("<f", float(value)))[0]
    if kind == "u32":
        return int(bool(value)) if isinstance(value, bool) else int(value) & 0xFFFFFFFF
    value = int(value)
    if not INT32_MIN <= value <= INT32_MAX:
        raise OverflowError(f"vulkan: integer {value} does not fit in int32, the device's integer representation")
    return value & 0xFFFFFFFF


def load_scalar(kind: str, word_index: int) -> str:
    return f"P[{word_index}]" if kind == "u32" else f"bitcast<{kind}>(P[{word_index}])"


def store_cond(kind: str, expr: str) -> str:
    """A WGSL bool ``expr`` as a value of storage ``kind``."""
    one, zero = {"f32": ("1.0", "0.0"), "i32": ("1", "0"), "u32": ("1u", "0u")}[kind]
    return f"select({zero}, {one}, {expr})"


def bindings(out_kind: str | None, in_kinds) -> str:
    lines = ["@group(0) @binding(0) var<storage, read> P: array<u32>;"]
    binding = 1
    if out_kind is not None:
        lines.append(f"@group(0) @binding(1) var<storage, read_write> OUT: array<{out_kind}>;")
        binding = 2
    for k, kind in enumerate(in_kinds):
        lines.append(f"@group(0) @binding({binding + k}) var<storage, read> IN{k}: array<{kind}>;")
    return "\n".join(lines)


NAMES = "abcdefgh"


def elementwise(rt, expr: str, operands, out: VkView, cond: bool = False, prelude: str = "") -> VkView:
    """Write ``expr`` (over operands named a, b, c, ... and the linear index ``idx``) into ``out``.

    Tensor operands are VkViews broadcast to ``out.shape`` and read through their strides;
    ``out`` may be strided too (``copy_`` into a view). ``cond`` means ``expr`` is a WGSL bool.
    ``prelude`` adds WGSL functions that ``expr`` calls.
    """
    numel = out.size
    if numel == 0:
        return out
    tensors = [op for op in operands if isinstance(op, VkView)]
    shape, strides = coalesce(out.shape, out.strides, *(t.expand_to(out.shape) for t in tensors))
    if not shape:
        shape, strides = (1,), [(0,) for _ in strides]
    rank = len(shape)
    out_kind = STORAGE_OF(out)
    params = [numel, *shape, out.offset, *strides[0]]
    loads, in_kinds, buffers = [], [], [out.buffer]
    t = 0
    for name, op in zip(NAMES, operands):
        if isinstance(op, VkView):
            base = len(params)
            params += [op.offset, *strides[1 + t]]
            k = len(in_kinds)
            in_kinds.append(STORAGE_OF(op))
            buffers.append(op.buffer)
            loads.append(f"  let {name} = IN{k}[{_offset(base, rank)}];")
            t += 1
        else:
            loads.append(f"  let {name} = {load_scalar(op.kind, len(params))};")
            params.append(op.word())
    value = store_cond(out_kind, expr) if cond else expr
    source = f"""{PRELUDE}{prelude}
{bindings(out_kind, in_kinds)}
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let idx = gid.x + gid.y * nwg.x * {WORKGROUP}u;
  if (idx >= P[0]) {{ return; }}
{_decompose("idx", 1, rank, bounded=True)}
{chr(10).join(loads)}
  OUT[{_offset(1 + rank, rank)}] = {value};
}}
"""
    groups = rt.grid(-(-numel // WORKGROUP))
    rt.dispatch(source, buffers, [True] + [False] * len(in_kinds), params, groups)
    return out


def STORAGE_OF(view: VkView) -> str:  # noqa: N802 - reads like a type constructor
    from munet.backends.vulkan.views import storage_type

    return storage_type(view.dtype)


_PARAM_READ = re.compile(r"\bP\[(\d+)u?\]")


def hoist_params(source: str) -> str:
    """``source`` with each constant-index read ``P[k]`` in ``main`` done once, at its top.

    Parameters are uniform, but a read placed after a divergent branch (the usual
    ``if (idx >= P[0]) { return; }``) is done per invocation under a mask by CPU drivers:
    on lavapipe that made every elementwise kernel 3-4x slower than its memory traffic.
    Only ``main``'s body is rewritten (helper functions keep their reads); the meaning is
    unchanged because ``P`` is read-only.
    """
    start = source.find("fn main(")
    open_at = source.find("{", start)  # the signature holds no braces
    if start < 0 or open_at < 0:
        return source
    depth, end = 0, -1
    for i in range(open_at, len(source)):
        if source[i] == "{":
            depth += 1
        elif source[i] == "}":
            depth -= 1
            if depth == 0:
                end = i
                break
    if end < 0:
        return source
    body = source[open_at + 1 : end]
    indices = sorted({int(k) for k in _PARAM_READ.findall(body)})
    if not indices:
        return source
    body = _PARAM_READ.sub(lambda m: f"P_{int(m.group(1))}", body)
    lets = "".join(f"\n  let P_{k} = P[{k}];" for k in indices)
    return source[: open_at + 1] + lets + body + source[end:]


_DECLARATION = re.compile(r"@binding\((\d+)\)\s*var<storage,\s*(?:read|read_write)>\s*(\w+)\s*:\s*array<([^;]*)>;")
_STORE = re.compile(r"\s*([-+*/]?)=(?!=)")

# Stores round once, to nearest even; out-of-range values become +-inf explicitly (a WGSL f32 -> f16
# conversion of a value beyond the f16 range is not defined), as NumPy and PyTorch do.
_STORE_F16 = """
fn store_f16(x: f32) -> f16 { return f16(select(x, x * bitcast<f32>(0x7f800000u), abs(x) >= 65520.0)); }
"""


def half_storage(source: str, halves: tuple[int, ...]) -> str:
    """``source`` with the buffers at bindings ``halves`` (float16 tensors) declared ``array<f16>``.

    Kernels are written over f32 (``storage_type(float16)`` is ``f32``). Here each read of such a
    buffer becomes ``f32(NAME[i])`` and each store ``NAME[i] = store_f16(value)`` (compound
    assignments likewise), so arithmetic runs in f32 and a result is rounded to float16 once,
    where it is stored. This is PyTorch's CPU float16 arithmetic, so results match it. A binding
    already declared ``array<f16>`` is left as written; one declared as anything else (atomics,
    integers) is a bug in the kernel and raises.
    """
    if not halves:
        return source
    names = []
    for binding in halves:
        found = [m for m in _DECLARATION.finditer(source) if int(m.group(1)) == binding]
        if len(found) == 1 and found[0].group(3) == "f16":  # a kernel written for f16 storage
            continue
        if len(found) != 1 or found[0].group(3) != "f32":
            declared = found[0].group(3) if found else "nothing"
            raise RuntimeError(
                f"internal error: a vulkan kernel binds a float16 buffer at binding {binding} as "
                f"array<{declared}>, expected array<f32> (float16 kernels compute in f32)"
            )
        m = found[0]
        names.append(m.group(2))
        source = source[: m.start(3)] + "f16" + source[m.end(3) :]
    enable = "" if "enable f16;" in source else "enable f16;\n"
    if not names:
        return enable + source
    access = re.compile(r"(?<![\w.])(" + "|".join(names) + r")\s*\[")
    return enable + _rewrite_half_accesses(source, access) + _STORE_F16


def _rewrite_half_accesses(text: str, access: re.Pattern) -> str:
    out, pos = [], 0
    while (m := access.search(text, pos)) is not None:
        out.append(text[pos : m.start()])
        if text[: m.start()].rstrip().endswith("&"):
            raise RuntimeError(f"internal error: a vulkan kernel takes a pointer into float16 buffer {m.group(1)}")
        close = _closing(text, m.end() - 1)
        ref = f"{m.group(1)}[{_rewrite_half_accesses(text[m.end() : close], access)}]"
        store = _STORE.match(text, close + 1)
        if store is None:
            out.append(f"f32({ref})")
            pos = close + 1
            continue
        end = _closing(text, store.end() - 1, ";")
        value = _rewrite_half_accesses(text[store.end() : end], access).strip()
        if store.group(1):
            value = f"f32({ref}) {store.group(1)} ({value})"
        out.append(f"{ref} = store_f16({value})")
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _closing(text: str, start: int, target: str = "]") -> int:
    """Index of the ``target`` that closes the bracket at ``start`` (or, for ``;``, ends the
    statement after ``start``), skipping nested brackets."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth == 0 and c == target:
                return i
        elif c == target and depth == 0:
            return i
    raise RuntimeError(f"internal error: unbalanced WGSL near {text[start : start + 60]!r}")


def _decompose(index: str, shape_base: int, rank: int, prefix: str = "c", bounded: bool = False) -> str:
    """Coordinates ``c0..c{rank-1}`` of ``index`` over the shape at ``P[shape_base..]``.

    ``bounded``: the caller guarantees ``index`` < the shape's size, so a rank-1 index is
    its own coordinate (no div/mod: coalesced contiguous operands are rank 1).
    """
    if bounded and rank == 1:
        return f"  let {prefix}0 = {index};"
    lines = [f"  var rem_{prefix} = {index};"]
    for d in reversed(range(rank)):
        lines.append(
            f"  let {prefix}{d} = rem_{prefix} % P[{shape_base + d}]; rem_{prefix} = rem_{prefix} / P[{shape_base + d}];"
        )
    return "\n".join(lines)


def _offset(base: int, rank: int, prefix: str = "c") -> str:
    """``P[base] + c0 * P[base+1] + ...``: an element offset from an (offset, strides) block."""
    terms = [f"P[{base}]"] + [f"{prefix}{d} * P[{base + 1 + d}]" for d in range(rank)]
    return " + ".join(terms)
