"""CUDA C forms of the scalar ops (``munet/ops/_scalar.py``): how the cuda backend prints a formula.

:func:`render_apply` gives the CUDA C text of one :class:`~munet.ops._scalar.Apply` over its
rendered arguments; the eager kernels (``kernels_elementwise.py``, ``kernels_reduce.py``) and the
compiler's fused kernels (``munet/compiler/codegen/cuda.py``) both print formulas with it, so the
two compute alike. Values are C types named by :data:`CUDA_TYPES` (the kernel IR's short dtype
names and NumPy's); float16/bfloat16 are storage types only: a formula over them computes in
float32, as on the CPU (loads convert with ``__half2float``/``__bfloat162float``, stores round to
nearest even with ``__float2half_rn``/``__float2bfloat16_rn``).

Float math is CUDA's math library (``expf``, ``erfinvf``...: within its documented ulp bounds of
the correctly rounded result; NumPy's are within 1-2 ulp too), one IEEE operation per node (the
kernels are compiled with ``--fmad=false``, so ``a * b + c`` rounds twice as NumPy does).
Integer ``add``/``sub``/``mul``/``neg``/``shift_left`` go through 64-bit unsigned arithmetic, so
they wrap as NumPy's do instead of overflowing a signed C type. A float to integer cast of NaN or
of a value outside the target's range is what the hardware gives (PyTorch on CUDA does the same;
NumPy on x86 gives the minimum integer): the tests leave those cases out.

Integer ``floor_divide`` (Python's floor, as PyTorch) and ``fmod`` (C's truncated remainder) need
the device's fault record (``device_asserts.py``): a zero divisor records PyTorch's
``RuntimeError("ZeroDivisionError")``, raised at the next synchronization, and gives 0; a divisor
of -1 negates with wrapping (no overflow trap for the minimum integer, as NumPy's result). Their
forms name the record ``munet_fault_record``: an :class:`Emitter` given ``fault_record=True`` may
print them (and sets ``used_fault_record``; its renderer then adds that parameter), any other
refuses them with :class:`UnrenderableError`. :data:`PRELUDE` holds the helper device functions the
forms call; every rendered source starts with it (after :data:`HEADER`); it is guarded, so
several rendered sources concatenate into one program.
"""

from __future__ import annotations

from munet.backends.cuda.device_asserts import FAULT_HELPER, ZERO_DIVISION_SITE
from munet.ops._scalar import BOOL, BOOL_FORMS, FLOAT, INT, SCALAR_OPS, Apply, Const, kind

CUDA_TYPES = {
    "f32": "float",
    "f64": "double",
    "i32": "int",
    "i64": "long long",
    "bool": "bool",
    "float32": "float",
    "float64": "double",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "int8": "signed char",
    "uint8": "unsigned char",
    "uint16": "unsigned short",  # the bits of a 16-bit float (a copy moves them untouched)
    "int16": "short",
    "int32": "int",
    "int64": "long long",
}
LOW_PRECISION = ("float16", "bfloat16")
# the load and the store conversions of the 16-bit storage types
TO_FLOAT = {"float16": "__half2float", "bfloat16": "__bfloat162float"}
FROM_FLOAT = {"float16": "__float2half_rn", "bfloat16": "__float2bfloat16_rn"}
FROM_DOUBLE = {"float16": "__double2half", "bfloat16": "__double2bfloat16"}

HEADER = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"

PRELUDE = (
    FAULT_HELPER
    + r"""#ifndef MUNET_PRELUDE
#define MUNET_PRELUDE
// integer floor_divide and fmod: a zero divisor records a fault (device_asserts.py) and gives 0
static __device__ __forceinline__ long long munet_floor_divide_i(long long a, long long b, unsigned long long *fault) {
  if (b == 0) { munet_fault(fault, MUNET_ZERO_DIVISION_SITE, 0ULL, 0ULL); return 0; }
  if (b == -1) return (long long)(0ULL - (unsigned long long)a);
  const long long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static __device__ __forceinline__ long long munet_fmod_i(long long a, long long b, unsigned long long *fault) {
  if (b == 0) { munet_fault(fault, MUNET_ZERO_DIVISION_SITE, 0ULL, 0ULL); return 0; }
  return b == -1 ? 0 : a % b;
}
#define MUNET_INFF __int_as_float(0x7f800000)
#define MUNET_NANF __int_as_float(0x7fc00000)
#define MUNET_INF __longlong_as_double(0x7ff0000000000000LL)
#define MUNET_NAN __longlong_as_double(0x7ff8000000000000LL)
// NumPy's float floor_divide (npy_divmod): exact, unlike floor(a / b)
static __device__ __forceinline__ float munet_floor_divide_f(float a, float b) {
  if (b == 0) return a / b;
  const float mod = fmodf(a, b);
  float div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysignf(0.0f, a / b);
  float floordiv = floorf(div);
  if (div - floordiv > 0.5f) floordiv += 1;
  return floordiv;
}
static __device__ __forceinline__ double munet_floor_divide_d(double a, double b) {
  if (b == 0) return a / b;
  const double mod = fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysign(0.0, a / b);
  double floordiv = floor(div);
  if (div - floordiv > 0.5) floordiv += 1;
  return floordiv;
}
// frexp's two parts as the vocabulary defines them (0 and x itself for zeros, infinities and NaN)
static __device__ __forceinline__ float munet_frexp_mantissa_f(float x) { int e; return isfinite(x) && x != 0 ? frexpf(x, &e) : x; }
static __device__ __forceinline__ double munet_frexp_mantissa_d(double x) { int e; return isfinite(x) && x != 0 ? frexp(x, &e) : x; }
static __device__ __forceinline__ float munet_frexp_exponent_f(float x) { int e = 0; if (isfinite(x) && x != 0) frexpf(x, &e); return (float)e; }
static __device__ __forceinline__ double munet_frexp_exponent_d(double x) { int e = 0; if (isfinite(x) && x != 0) frexp(x, &e); return (double)e; }
static __device__ __forceinline__ long long munet_powi(long long a, long long b) {
  unsigned long long r = 1, x = (unsigned long long)a;
  for (; b > 0; b >>= 1) { if (b & 1) r *= x; x *= x; }
  return (long long)r;
}
#endif
""".replace("MUNET_ZERO_DIVISION_SITE", f"{ZERO_DIVISION_SITE}ULL")
)

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==",
          "ne": "!="}  # fmt: skip
_COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
# float scalar ops that are one math library call (float32: the ``f``-suffixed function)
_LIBM = ("fmod", "pow", "atan2", "hypot", "copysign", "fmax", "fmin", "exp", "exp2", "expm1", "log", "log2", "log10",
         "log1p", "sqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
         "atanh", "erf", "erfc", "erfinv", "floor", "ceil", "trunc", "rint", "nextafter")  # fmt: skip
_FLOAT_FORMS = {
    "maximum": "(({0} >= {1} || {0} != {0}) ? {0} : {1})",  # NumPy's maximum: NaN propagates
    "minimum": "(({0} <= {1} || {0} != {0}) ? {0} : {1})",
    "neg": "(-{0})",
    "abs": "fabs{f}({0})",
    "floor_divide": "munet_floor_divide_{d}({0}, {1})",
    "signbit": "(signbit({0}) != 0)",
    "isnan": "({0} != {0})",
    "isinf": "(isinf({0}) != 0)",
    "frexp_mantissa": "munet_frexp_mantissa_{d}({0})",
    "frexp_exponent": "munet_frexp_exponent_{d}({0})",
}
_WIDE = "(unsigned long long)"
_INT_FORMS = {
    "add": f"(({{t}})({_WIDE}{{0}} + {_WIDE}{{1}}))",
    "sub": f"(({{t}})({_WIDE}{{0}} - {_WIDE}{{1}}))",
    "mul": f"(({{t}})({_WIDE}{{0}} * {_WIDE}{{1}}))",
    "neg": f"(({{t}})(0ULL - {_WIDE}{{0}}))",
    "abs": f"({{0}} < 0 ? ({{t}})(0ULL - {_WIDE}{{0}}) : {{0}})",
    "shift_left": f"(({{t}})({_WIDE}{{0}} << {{1}}))",
    "shift_right": "(({t})({0} >> {1}))",
    "pow": "(({t})munet_powi((long long){0}, (long long){1}))",
    "maximum": "({0} >= {1} ? {0} : {1})",
    "minimum": "({0} <= {1} ? {0} : {1})",
    "bitwise_and": "(({t})({0} & {1}))",
    "bitwise_or": "(({t})({0} | {1}))",
    "bitwise_xor": "(({t})({0} ^ {1}))",
    "bitwise_not": "(({t})(~{0}))",
}
# integer forms that record a zero divisor in the fault record ``munet_fault_record``
_FAULTING_INT_FORMS = {
    "floor_divide": "(({t})munet_floor_divide_i((long long){0}, (long long){1}, munet_fault_record))",
    "fmod": "(({t})munet_fmod_i((long long){0}, (long long){1}, munet_fault_record))",
}


class UnrenderableError(ValueError):
    """A scalar op with no CUDA form for its operands' kind (or one that needs the fault record where
    the renderer has none)."""


def ctype(dtype: str) -> str:
    """The C type of a dtype name (short or NumPy); raises UnrenderableError for one cuda kernels lack."""
    try:
        return CUDA_TYPES[dtype]
    except KeyError:
        raise UnrenderableError(f"cuda: dtype '{dtype}' has no CUDA C type") from None


def compute_dtype(dtype: str) -> str:
    """The dtype a formula over ``dtype`` computes in: float32 for the 16-bit floats, else itself."""
    return "float32" if dtype in LOW_PRECISION else dtype


def is_double(dtype: str) -> bool:
    return dtype in ("f64", "float64")


def literal(value: float, dtype: str) -> str:
    """``value`` as a CUDA C literal of ``dtype`` (an integer truncates toward zero and wraps, as NumPy casts)."""
    k = kind(dtype)
    if k == BOOL:
        return "true" if value else "false"
    if k == INT:
        return f"(({ctype(dtype)})({int(value) % 2**64}ULL))"  # two's complement: -2**63 has no signed literal
    double = is_double(dtype)
    if value != value:
        return "MUNET_NAN" if double else "MUNET_NANF"
    if value in (float("inf"), float("-inf")):
        return ("(-" if value < 0 else "(") + ("MUNET_INF)" if double else "MUNET_INFF)")
    return repr(float(value)) if double else f"{float(value)!r}f"


def needs_fault_record(e) -> bool:
    """Whether ``Apply`` ``e``'s form writes the fault record (an integer division)."""
    return e.op in _FAULTING_INT_FORMS and kind(e.args[0].dtype) == INT


def render_apply(e, args: list, fault_record: bool = False) -> str:
    """The CUDA C text of ``Apply`` ``e`` whose arguments render as ``args``; ``fault_record``:
    whether the kernel has the ``munet_fault_record`` parameter an integer division needs."""
    if e.op == "where":
        return f"({args[0]} ? {args[1]} : {args[2]})"
    if e.op == "cast":
        if e.dtype == "bool":
            return f"({args[0]} != 0)"  # NaN is true
        return f"(({ctype(e.dtype)}){args[0]})"
    operand = kind(e.args[0].dtype)
    if e.op in _COMPARE or (e.op in _INFIX and operand == FLOAT):
        if operand != BOOL or e.op in ("eq", "ne"):
            return f"({args[0]} {_INFIX[e.op]} {args[1]})"
    double = is_double(e.args[0].dtype)
    if operand == FLOAT:
        if e.op in _FLOAT_FORMS:
            return _FLOAT_FORMS[e.op].format(*args, f="" if double else "f", d="d" if double else "f")
        if e.op in _LIBM:
            return f"{e.op}{'' if double else 'f'}({', '.join(args)})"
    if needs_fault_record(e):
        if not fault_record:
            raise UnrenderableError(
                f"cuda: integer '{e.op}' needs the device's fault record for a zero divisor, which this kernel "
                "does not take (the elementwise and fused kernels do)"
            )
        return _FAULTING_INT_FORMS[e.op].format(*args, t=ctype(e.dtype))
    form = (_INT_FORMS if operand == INT else BOOL_FORMS if operand == BOOL else {}).get(e.op)
    if form is None:
        raise UnrenderableError(f"cuda: scalar op '{e.op}' on {operand} operands has no CUDA C form")
    return form.format(*args, t=ctype(e.dtype))


def load(dtype: str, text: str) -> str:
    """A stored value ``text`` of ``dtype`` as the value a formula computes with."""
    return f"{TO_FLOAT[dtype]}({text})" if dtype in TO_FLOAT else text


def store(dtype: str, value: str, value_dtype: str) -> str:
    """Formula value ``value`` (of ``value_dtype``) converted to storage ``dtype``."""
    if dtype in FROM_FLOAT:
        return f"{(FROM_DOUBLE if is_double(value_dtype) else FROM_FLOAT)[dtype]}({value})"
    if kind(dtype) == BOOL:
        return f"(({value}) != 0)" if kind(value_dtype) != BOOL else value
    # the cast applies to the whole expression: ``(float)(a / b)`` rounds the double quotient once
    return value if CUDA_TYPES.get(value_dtype) == ctype(dtype) else f"(({ctype(dtype)})({value}))"


class Emitter:
    """Prints a formula expression as CUDA C statements, each distinct subexpression once.

    ``emit(e)`` returns the C expression holding ``e``'s value, appending ``const T name = ...;``
    lines to ``lines``. :class:`~munet.ops._scalar.Const` s become literals and ``Apply`` s their
    forms; any other leaf (a formula's ``Arg``, the kernel IR's ``Load``/``Param``/``Index``) is
    given to ``bind(e)``, which returns its C text (``None`` for a leaf it does not know). ``known``
    seeds names already computed (a reduction's accumulators). ``fault_record``: whether the kernel
    has the ``munet_fault_record`` parameter (then integer divisions render, and
    ``used_fault_record`` says whether one did)."""

    def __init__(self, bind, lines: list, prefix: str = "t", known=None, fault_record: bool = False):
        self.bind = bind
        self.lines = lines
        self.prefix = prefix
        self.names: dict = dict(known or {})
        self.fault_record = fault_record
        self.used_fault_record = False

    def emit(self, e) -> str:
        if isinstance(e, Const):
            return literal(e.value, e.dtype)
        name = self.names.get(e)
        if name is not None:
            return name
        if isinstance(e, Apply):
            text = render_apply(e, [self.emit(a) for a in e.args], self.fault_record)
            self.used_fault_record |= needs_fault_record(e)
        else:
            text = self.bind(e)
            if text is None:
                raise UnrenderableError(f"cuda: internal error: {e!r} is not a formula expression")
        name = f"{self.prefix}{len(self.names)}"
        self.names[e] = name
        self.lines.append(f"const {ctype(e.dtype)} {name} = {text};")
        return name


SCALAR_KINDS = {name: spec.kinds for name, spec in SCALAR_OPS.items()}
