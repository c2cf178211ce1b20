"""Every scalar op of the formula vocabulary (munet/ops/_scalar.py) renders on every renderer.

For each entry of ``SCALAR_OPS`` and each dtype kind it takes: the NumPy renderer
(backends/cpu/kernels_formula.py) computes it; the C renderer (codegen/c.py) compiles it, and
its values match NumPy's on special values (NaN, infinities, signed zeros, domain edges):
bit for bit where both compute the exact IEEE result, within a few ulp for library functions;
the WGSL renderer (backends/vulkan/scalar_wgsl.py) prints it, and on a vulkan device its values
match NumPy's in float32. The (op, kind) pairs a renderer leaves out are exactly the ones it
documents (integer division by zero, which C and WGSL cannot report).
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

import munet
from munet.backends.cpu.kernels_formula import RENDERED_OPS, NumpyFormula
from munet.backends.vulkan import (
    registry,  # noqa: F401 - loads the kernel modules in their order
    scalar_wgsl,
)
from munet.backends.vulkan.kernels_formula import WgslFormula, render_wgsl_function
from munet.compiler.codegen import build, c
from munet.compiler.codegen.kernel import Kernel, Load, Store
from munet.ops._scalar import BOOL, FLOAT, INT, SCALAR_OPS, Arg, kind, scalar
from tests.reference import DEVICE_TOL

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler on this machine")

FLOATS = [0.0, -0.0, 1.0, -1.0, 0.25, -0.75, 0.5, -0.5, 2.5, -3.0, 7.0, 1e-3, 0.999, -0.999, 30.0, -30.0,
          1e-30, 3e38, math.inf, -math.inf, math.nan]  # fmt: skip
INTS = [0, 1, -1, 2, -2, 3, 7, -7, 100, -128, 63]
BOOLS = [False, True]
# float ops NumPy and C both compute exactly (IEEE, or exact by construction): compared bit for bit
EXACT = {"add", "sub", "mul", "div", "floor_divide", "fmod", "copysign", "maximum", "minimum", "fmax", "fmin",
         "neg", "abs", "sqrt", "floor", "ceil", "trunc", "rint", "signbit", "isnan", "isinf", "where", "cast",
         "lt", "le", "gt", "ge", "eq", "ne", "frexp_mantissa", "frexp_exponent", "nextafter"}  # fmt: skip
TIES = {"maximum", "minimum", "fmax", "fmin"}  # which zero a -0.0/0.0 tie gives is unspecified
C_DTYPES = {FLOAT: ("f32", "f64"), INT: ("i64",), BOOL: ("bool",)}
NP_DTYPES = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32, "bool": np.bool_}
CASES = [(op, k) for op, spec in SCALAR_OPS.items() for k in spec.kinds]


def _samples(op: str, k: str, position: int, target=None, device=False) -> list:
    if k == BOOL:
        return BOOLS
    if k == FLOAT and device:  # WGSL leaves builtins at infinities and huge arguments undefined
        return [x for x in FLOATS if abs(x) <= 30 or x != x]
    if k == FLOAT and target == INT:
        return [x for x in FLOATS if abs(x) < 1e9]  # a float outside the integers' range has no defined cast
    if k == FLOAT:
        return FLOATS
    if op in ("shift_left", "shift_right") and position == 1:
        return [0, 1, 3, 31]  # counts in [0, bits) only
    if op == "pow" and position == 1:
        return [0, 1, 2, 5]  # exponents >= 0 only
    if op in ("floor_divide", "fmod") and position == 1:
        return [1, -1, 2, -3, 7]  # nonzero divisors (a zero one raises)
    return INTS


def _operand_kinds(op: str, k: str) -> list:
    if op == "where":
        return [BOOL, k, k]
    return [k] * SCALAR_OPS[op].arity


def _grid(op: str, kinds: list, dtypes: list, target=None, device=False) -> list:
    """One flat array per operand: every combination of the operands' samples."""
    axes = [
        np.array(_samples(op, k, i, target, device), dtype=NP_DTYPES[d]) for i, (k, d) in enumerate(zip(kinds, dtypes))
    ]
    return [g.ravel().copy() for g in np.meshgrid(*axes, indexing="ij")]


def _expression(op: str, args: list, target: str | None = None):
    if op == "cast":
        return scalar.cast(args[0], target)
    return getattr(scalar, op)(*args)


def _numpy_values(op, inputs, target=None):
    rendered = NumpyFormula(lambda args, t: _expression(op, args, target))
    with np.errstate(all="ignore"):
        return np.asarray(rendered.fresh(*inputs))


def _c_values(op, dtypes, inputs, target=None):
    args = [Load(i, (1,), 0, d) for i, d in enumerate(dtypes)]
    expr = _expression(op, args, target)
    kernel = Kernel(f"scalar_{op}", (len(inputs[0]),), (), list(dtypes), [], [expr.dtype], [Store(0, expr)])
    fn, _ = build.load_kernel(c.render_c(kernel), kernel.name)
    out = np.empty(len(inputs[0]), NP_DTYPES[expr.dtype])
    ins = (ctypes.c_void_p * len(inputs))(*[a.ctypes.data for a in inputs])
    ps = (ctypes.c_double * 1)()
    outs = (ctypes.c_void_p * 1)(out.ctypes.data)
    fn(ctypes.addressof(ins), ctypes.addressof(outs), ctypes.addressof(ps), 1)
    return out


def _assert_agree(op, got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=op)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=op)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)], err_msg=op)
    if op in EXACT:
        np.testing.assert_array_equal(got[finite], want[finite], err_msg=op)
        if op not in TIES:
            np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]), err_msg=op)
        return
    ulp = np.finfo(want.dtype).eps
    # float64 erf, erfc, erfinv: NumPy's own series (~1e-15) against the C library's, and Newton steps on them
    rtol = {"erf": 1e-14, "erfc": 1e-14, "erfinv": 1e-10}.get(op, 8 * ulp) if dtype == "f64" else 8 * ulp
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=1e-300, err_msg=op)


def _targets(op, k):
    return [t for t in (FLOAT, INT, BOOL) if t != k] if op == "cast" else [None]


def test_every_scalar_op_has_a_numpy_rendering():
    assert RENDERED_OPS == frozenset(SCALAR_OPS)


@pytest.mark.parametrize("op, k", CASES)
def test_numpy_renders_every_scalar_op(op, k):
    for target in _targets(op, k):
        for dtype in C_DTYPES[k]:
            kinds = _operand_kinds(op, k)
            dtypes = [C_DTYPES[kk][0] if kk != k else dtype for kk in kinds]
            inputs = _grid(op, kinds, dtypes, target)
            values = _numpy_values(op, inputs, target and C_DTYPES[target][0])
            assert values.shape == inputs[0].shape


@needs_cc
@pytest.mark.parametrize("op, k", CASES)
def test_c_renders_every_scalar_op_as_numpy_computes_it(op, k, tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    if (op, k) in c.UNRENDERED:
        expr = getattr(scalar, op)(Load(0, (1,), 0, "i64"), Load(1, (1,), 0, "i64"))
        with pytest.raises(RuntimeError, match="internal error.*division by zero"):
            c.render_c_apply(expr, ["a", "b"])
        return
    for target in _targets(op, k):
        for dtype in C_DTYPES[k]:
            kinds = _operand_kinds(op, k)
            dtypes = [C_DTYPES[kk][0] if kk != k else dtype for kk in kinds]
            inputs = _grid(op, kinds, dtypes, target)
            cast_to = target and C_DTYPES[target][0]
            want = _numpy_values(op, inputs, cast_to)
            got = _c_values(op, dtypes, inputs, cast_to)
            _assert_agree(op, got, want.astype(got.dtype) if op in ("erf", "erfc", "erfinv") else want, dtype)


WGSL_DTYPES = {FLOAT: "f32", INT: "i32", BOOL: "bool"}


@pytest.mark.parametrize("op, k", CASES)
def test_wgsl_renders_every_scalar_op(op, k):
    kinds = _operand_kinds(op, k)
    dtypes = [WGSL_DTYPES[kk] for kk in kinds]
    args = [Arg(i, d) for i, d in enumerate(dtypes)]
    for target in _targets(op, k):
        expr = _expression(op, args, target and WGSL_DTYPES[target])
        if (op, k) in scalar_wgsl.UNRENDERED:
            with pytest.raises(scalar_wgsl.UnrenderableError, match="division by zero"):
                render_wgsl_function(expr, dtypes)
            continue
        source = render_wgsl_function(expr, dtypes)
        assert source.startswith("fn value(") and "return" in source


def test_only_integer_division_is_left_out_by_c_and_wgsl():
    assert set(c.UNRENDERED) == set(scalar_wgsl.UNRENDERED) == {("floor_divide", INT), ("fmod", INT)}


@pytest.mark.parametrize("op, k", [case for case in CASES if case not in scalar_wgsl.UNRENDERED])
def test_wgsl_computes_every_scalar_op_as_numpy_does(op, k, vulkan):
    kinds = _operand_kinds(op, k)
    dtypes = [WGSL_DTYPES[kk] for kk in kinds]
    for target in _targets(op, k):
        cast_to = target and WGSL_DTYPES[target]
        inputs = _grid(op, kinds, dtypes, target, device=True)
        want = _numpy_values(op, inputs, cast_to)
        want = want.astype(np.float32) if want.dtype == np.float64 else want  # erf's float64, rounded once
        fn = WgslFormula(f"test_{op}", lambda args, t: _expression(op, args, cast_to), [0] if op == "where" else [])
        runtime = munet._device.get_backend(vulkan).runtime
        views = [munet.tensor(x).to(vulkan)._data for x in inputs]
        got = munet.Tensor._from_kernel(munet._device.get_backend(vulkan), fn(runtime, *views), _meta(want)).cpu()
        got = got.numpy()
        if op in scalar_wgsl.APPROXIMATE:  # compared where the quotient is small (exact in float32)
            small = np.abs(inputs[0]) < 8 * np.abs(inputs[1])
            got, want = got[small], want[small]
        if want.dtype.kind == "f":
            finite = np.isfinite(want)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=op)
            np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
            rtol, atol = DEVICE_TOL["float32"]
            np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol, err_msg=op)
        else:
            np.testing.assert_array_equal(got, want, err_msg=op)


def _meta(array):
    from munet import _dtype as D
    from munet.ops._registry import Meta

    return Meta(array.shape, D.from_numpy_dtype(array.dtype))


def test_formula_dtypes_are_classified():
    assert [kind(t) for t in ("f32", "float16", "bfloat16", "i64", "uint8", "int32", "bool")] == [
        FLOAT, FLOAT, FLOAT, INT, INT, INT, BOOL,
    ]  # fmt: skip


@needs_cc
def test_c_float32_erf_is_within_an_ulp_of_the_exact_value(tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    x = np.concatenate([np.linspace(-5, 5, 20001, dtype=np.float32), np.float32([1e-30, -1e-30, 0.0, -0.0])])
    got = _c_values("erf", ["f32"], [x])
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 1.0
    np.testing.assert_array_equal(np.signbit(got), np.signbit(x))


# the float-parts ops on subnormals and at the edges of the float32 range, where float arithmetic
# on a driver that flushes subnormals would be wrong: every renderer agrees with NumPy bit for bit
PARTS = np.float32([1e-45, -1e-45, 1e-40, -3e-39, 2.0**-126, -(2.0**-126), 2.0**-127, 3.4028235e38, -3.4028235e38,
                    0.0, -0.0, 1.0, -0.75, np.inf, -np.inf, np.nan])  # fmt: skip
PARTS_OPS = ["frexp_mantissa", "frexp_exponent", "nextafter"]


def _parts_inputs(op):
    if op != "nextafter":
        return [PARTS]
    x, y = np.meshgrid(PARTS, PARTS, indexing="ij")
    return [x.ravel().copy(), y.ravel().copy()]


def _bits_agree(op, got, want):
    assert got.dtype == want.dtype == np.float32, op
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=op)
    keep = ~np.isnan(want)
    np.testing.assert_array_equal(got[keep].view(np.uint32), want[keep].view(np.uint32), err_msg=op)


@needs_cc
@pytest.mark.parametrize("op", PARTS_OPS)
def test_c_float_parts_are_bit_exact_on_subnormals(op, tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    inputs = _parts_inputs(op)
    _bits_agree(op, _c_values(op, ["f32"] * len(inputs), inputs), _numpy_values(op, inputs))


@pytest.mark.parametrize("op", PARTS_OPS)
def test_wgsl_float_parts_are_bit_exact_on_subnormals(op, vulkan):
    inputs = _parts_inputs(op)
    fn = WgslFormula(f"test_{op}", lambda args, t: _expression(op, args))
    backend = munet._device.get_backend(vulkan)
    views = [munet.tensor(x).to(vulkan)._data for x in inputs]
    want = _numpy_values(op, inputs)
    got = munet.Tensor._from_kernel(backend, fn(backend.runtime, *views), _meta(want)).cpu().numpy()
    _bits_agree(op, got, want)
