"""WGSL forms of the scalar ops (``munet/ops/_scalar.py``): how the vulkan backend prints a formula.

:func:`render_apply` gives the WGSL text of one :class:`~munet.ops._scalar.Apply` over its rendered
arguments; the eager kernels (``kernels_formula.py``) and the compiler's fused kernels
(``munet/compiler/codegen/wgsl.py``) both print formulas with it, so the two compute alike. Values
are WGSL ``f32``, ``i32`` (int64 is held as int32) or ``bool`` (stored as u32 0/1); a formula's
dtype names are those (:func:`formula_dtype`). Float helpers are the backend's ``PRELUDE``
(NaN-propagating ``max_f``, ``tanh_f`` ...); ``log``/``sqrt`` and friends of an argument outside
their domain are NaN, said explicitly because WGSL leaves them undefined, and ``asin``/``acos``
go through ``atan2`` (lavapipe's builtins are off by ~4e-4), and ``exp``, ``log``, ``log2``,
``log10``, ``log1p``, ``expm1`` are the prelude's functions with derived error bounds, not the
builtins. ``erf``, ``erfc``, ``erfinv`` and the float-parts ops (``frexp_mantissa``,
``frexp_exponent``, ``nextafter``, on the bits) call :data:`SPECIAL_FUNCTIONS`, which a shader
using them must include (:func:`uses_special`).

:data:`UNRENDERED` lists the (op, kind) pairs of the vocabulary with no WGSL form: integer
``floor_divide``/``fmod`` (WGSL defines a division by zero instead of reporting it). An op whose
formula needs one has no vulkan kernel for that dtype.
"""

from __future__ import annotations

from munet.ops._scalar import BOOL, BOOL_FORMS, FLOAT, INT, kind

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "=="}


def _guard(expr: str, bad: str) -> str:
    return f"select({expr}, nan_f(), {bad})"


# operand kind -> scalar op -> WGSL template over the rendered arguments {0}, {1}, {2}
_FORMS = {
    FLOAT: {
        **{op: f"({{0}} {sign} {{1}})" for op, sign in _INFIX.items()},
        "ne": "!({0} == {1})",  # not ``!=``: lavapipe evaluates it as an ordered comparison (NaN != x false)
        "floor_divide": "floor({0} / {1})",  # the quotient rounds first: NumPy's is exact (APPROXIMATE)
        "fmod": "({0} % {1})",  # WGSL's a - b * trunc(a / b): inexact for a large quotient (APPROXIMATE)
        "pow": "pow_f({0}, {1})",
        "atan2": "atan2_f({0}, {1})",  # lavapipe's atan2 gives 0 for NaN and 3pi/4 at (0, 0)
        "hypot": "sqrt({0} * {0} + {1} * {1})",
        "copysign": "select(abs({0}), -abs({0}), (bitcast<u32>({1}) & 0x80000000u) != 0u)",
        "maximum": "max_f({0}, {1})",
        "minimum": "min_f({0}, {1})",
        "fmax": "fmax_f({0}, {1})",
        "fmin": "fmin_f({0}, {1})",
        "neg": "(-{0})",
        "abs": "abs({0})",
        "exp": "exp_f({0})",
        "exp2": "exp2_f({0})",
        "expm1": "expm1_f({0})",
        "log": "log_f({0})",
        "log2": "log2_f({0})",
        "log10": "(log_f({0}) * 0.43429448190325176)",
        "log1p": _guard("log1p_f({0})", "{0} < -1.0"),
        "sqrt": _guard("sqrt({0})", "{0} < 0.0"),
        "sin": "sin({0})",
        "cos": "cos({0})",
        "tan": "tan({0})",
        "asin": _guard("atan2({0}, sqrt((1.0 - {0}) * (1.0 + {0})))", "!(abs({0}) <= 1.0)"),
        "acos": _guard("atan2(sqrt((1.0 - {0}) * (1.0 + {0})), {0})", "!(abs({0}) <= 1.0)"),
        "atan": _guard("atan({0})", "isnan_f({0})"),
        "sinh": "sinh({0})",
        "cosh": "cosh({0})",
        "tanh": "tanh_f({0})",
        "asinh": "asinh({0})",
        "acosh": _guard("acosh({0})", "{0} < 1.0"),
        "atanh": _guard("select(atanh({0}), sign_f({0}) * inf_f(), abs({0}) == 1.0)", "abs({0}) > 1.0"),
        "erf": "erf_f({0})",
        "erfc": "erfc_f({0})",
        "erfinv": "erfinv_f({0})",
        "floor": "floor({0})",
        "ceil": "ceil({0})",
        "trunc": "trunc({0})",
        "rint": "round({0})",  # WGSL's round: ties to even
        "signbit": "((bitcast<u32>({0}) & 0x80000000u) != 0u)",
        "isnan": "isnan_f({0})",
        "isinf": "isinf_f({0})",
        "frexp_mantissa": "frexp_mantissa_f({0})",
        "frexp_exponent": "frexp_exponent_f({0})",
        "nextafter": "nextafter_f({0}, {1})",
    },
    INT: {
        **{op: f"({{0}} {sign} {{1}})" for op, sign in _INFIX.items() if op != "div"},
        "ne": "({0} != {1})",
        "pow": "pow_i({0}, {1})",
        "maximum": "max({0}, {1})",
        "minimum": "min({0}, {1})",
        "bitwise_and": "({0} & {1})",
        "bitwise_or": "({0} | {1})",
        "bitwise_xor": "({0} ^ {1})",
        "bitwise_not": "(~{0})",
        "shift_left": "({0} << u32({1}))",
        "shift_right": "({0} >> u32({1}))",
        "neg": "(-{0})",
        "abs": "abs({0})",
    },
    BOOL: BOOL_FORMS,
}
for _forms in _FORMS.values():
    _forms["where"] = "select({2}, {1}, {0})"
_CASTS = {
    (FLOAT, INT): "i32({0})",
    (FLOAT, BOOL): "!({0} == 0.0)",  # NaN is true
    (INT, FLOAT): "f32({0})",
    (INT, BOOL): "({0} != 0)",
    (BOOL, FLOAT): "select(0.0, 1.0, {0})",
    (BOOL, INT): "select(0, 1, {0})",
}
UNRENDERED = {
    ("floor_divide", INT): "WGSL defines an integer division by zero instead of reporting it",
    ("fmod", INT): "WGSL defines an integer division by zero instead of reporting it",
}
# float ops whose WGSL form is not the exactly rounded result NumPy and C compute
APPROXIMATE = {
    "floor_divide": "floor(a / b) floors the rounded quotient (off by one where a / b rounds up to an integer)",
    "fmod": "WGSL's % is a - b * trunc(a / b), inexact when the quotient is large",
}
WGSL_TYPES = {FLOAT: "f32", INT: "i32", BOOL: "bool"}


class UnrenderableError(ValueError):
    """A scalar op with no WGSL form for its operands' kind (see :data:`UNRENDERED`)."""


def formula_dtype(storage: str) -> str:
    """The formula dtype of a vulkan storage type: ``'f32'``, ``'i32'``, or ``'bool'`` for ``'u32'``."""
    return "bool" if storage == "u32" else storage


def literal(value: float, dtype: str) -> str:
    """``value`` as a WGSL literal of ``dtype``'s kind (an integer truncates toward zero, as NumPy casts)."""
    k = kind(dtype)
    if k == BOOL:
        return "true" if value else "false"
    if k == INT:
        return f"i32({int(value)})"
    if value != value:
        return "nan_f()"
    if value in (float("inf"), float("-inf")):
        return "(-inf_f())" if value < 0 else "inf_f()"
    return f"{float(value)!r}f"


def render_apply(e, args: list) -> str:
    """The WGSL text of ``Apply`` ``e`` whose arguments render as ``args``."""
    if e.op == "cast":
        pair = (kind(e.args[0].dtype), kind(e.dtype))
        return args[0] if pair[0] == pair[1] else _CASTS[pair].format(*args)
    operand = kind(e.dtype if e.op == "where" else e.args[0].dtype)
    form = _FORMS[operand].get(e.op)
    if form is None:
        reason = UNRENDERED.get((e.op, operand), "internal error: the vocabulary has no such form")
        raise UnrenderableError(f"vulkan: scalar op '{e.op}' on {operand} operands has no WGSL form ({reason})")
    return form.format(*args)


def uses_special(source: str) -> bool:
    """Whether WGSL ``source`` calls one of :data:`SPECIAL_FUNCTIONS`."""
    return any(f"{name}(" in source for name in _SPECIAL_NAMES)


_SPECIAL_NAMES = ("erf_f", "erfc_f", "erfinv_f", "frexp_mantissa_f", "frexp_exponent_f", "nextafter_f")
# frexp and nextafter work on the bits, exact on any driver: float arithmetic would depend on the
# driver's exp2/log2 (lavapipe's exp2 of an integer is off by an ulp) and on it keeping subnormals
# (Vulkan lets a driver flush them; lavapipe keeps them). A subnormal's fraction bits, converted to
# f32 (exact below 2**24), are a normal number with the same leading bits. nextafter orders the
# operands by their sign-magnitude bits read as signed integers.
SPECIAL_FUNCTIONS = """
fn frexp_exponent_f(x: f32) -> f32 {
  let bits = bitcast<u32>(x);
  let biased = (bits >> 23u) & 0xffu;
  let fraction = bits & 0x7fffffu;
  if (biased == 0xffu || (biased == 0u && fraction == 0u)) { return 0.0; }
  if (biased == 0u) { return f32(i32((bitcast<u32>(f32(fraction)) >> 23u) & 0xffu) - 275); }
  return f32(i32(biased) - 126);
}
fn frexp_mantissa_f(x: f32) -> f32 {
  let bits = bitcast<u32>(x);
  let biased = (bits >> 23u) & 0xffu;
  let fraction = bits & 0x7fffffu;
  if (biased == 0xffu || (biased == 0u && fraction == 0u)) { return x; }
  var normal = bits;
  if (biased == 0u) { normal = bitcast<u32>(f32(fraction)) | (bits & 0x80000000u); }
  return bitcast<f32>((normal & 0x807fffffu) | 0x3f000000u);
}
fn ordered_bits(bits: u32) -> i32 {
  return select(i32(bits), -i32(bits & 0x7fffffffu), (bits & 0x80000000u) != 0u);
}
fn nextafter_f(x: f32, y: f32) -> f32 {
  let bx = bitcast<u32>(x);
  let by = bitcast<u32>(y);
  let ax = bx & 0x7fffffffu;
  let ay = by & 0x7fffffffu;
  if (ax > 0x7f800000u || ay > 0x7f800000u) { return nan_f(); }
  if (bx == by || (ax == 0u && ay == 0u)) { return y; }
  if (ax == 0u) { return bitcast<f32>((by & 0x80000000u) | 1u); }
  let away = (ordered_bits(by) > ordered_bits(bx)) == ((bx & 0x80000000u) == 0u);
  return bitcast<f32>(select(bx - 1u, bx + 1u, away));
}
fn exp_neg_square(x: f32) -> f32 {
  if (isinf_f(x)) { return 0.0; }
  let head = round(x * 16.0) / 16.0;
  let tail = x - head;
  return exp_f(-head * head) * exp_f(-tail * (x + head));
}
fn erf_series(x: f32) -> f32 {
  var term = x; var total = x; let x2 = 2.0 * x * x;
  for (var n = 1; n < 40; n = n + 1) { term = term * x2 / f32(2 * n + 1); total = total + term; }
  return 1.1283791670955126 * exp_neg_square(x) * total;
}
fn erfc_fraction(a: f32) -> f32 {
  var t = a;
  for (var k = 60; k > 0; k = k - 1) { t = a + (0.5 * f32(k)) / t; }
  return 0.5641895835477563 * exp_neg_square(a) / t;
}
fn erf_f(x: f32) -> f32 {
  if (isnan_f(x)) { return x; }
  if (abs(x) < 2.0) { return erf_series(x); }
  return sign_f(x) * (1.0 - erfc_fraction(abs(x)));
}
fn erfc_f(x: f32) -> f32 {
  if (isnan_f(x)) { return x; }
  if (abs(x) < 1.5) { return 1.0 - erf_series(x); }
  let tail = erfc_fraction(abs(x));
  return select(tail, 2.0 - tail, x < 0.0);
}
fn erfinv_f(y: f32) -> f32 {
  if (abs(y) > 1.0 || isnan_f(y)) { return nan_f(); }
  if (abs(y) == 1.0) { return sign_f(y) * inf_f(); }
  let w = -log_f((1.0 - y) * (1.0 + y));
  var p: f32;
  if (w < 5.0) {
    let v = w - 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * v; p = -3.5233877e-06 + p * v; p = -4.39150654e-06 + p * v;
    p = 0.00021858087 + p * v; p = -0.00125372503 + p * v; p = -0.00417768164 + p * v;
    p = 0.246640727 + p * v; p = 1.50140941 + p * v;
  } else {
    let v = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * v; p = 0.00134934322 + p * v; p = -0.00367342844 + p * v;
    p = 0.00573950773 + p * v; p = -0.0076224613 + p * v; p = 0.00943887047 + p * v;
    p = 1.00167406 + p * v; p = 2.83297682 + p * v;
  }
  var x = p * y;
  let a = abs(y);
  for (var i = 0; i < 2; i = i + 1) {
    let density = 1.1283791670955126 * exp_neg_square(x);
    if (density == 0.0) { break; }
    if (a >= 0.5) {
      let upper = erfc_f(abs(x));
      x = x + sign_f(y) * (log_f(upper) - log_f(1.0 - a)) * upper / density;
    } else {
      x = x - (erf_f(x) - y) / density;
    }
  }
  return x;
}
"""
