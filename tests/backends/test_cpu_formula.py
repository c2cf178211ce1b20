"""The cpu kernels rendered from scalar formulas (munet/backends/cpu/kernels_formula.py).

The moved ops must give the bits the hand-written NumPy kernels gave: the references below
are those kernels' expressions, checked bit for bit (NaN, infinities, signed zeros) on the
eager, in-place and memory-plan (``out=``) paths, for float, integer, bool and 16-bit floats.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import munet
from munet.backends.cpu.kernels_formula import NumpyFormula, out_kernel
from munet.ops._registry import OPS
from munet.ops._scalar import Apply, Const

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.25, -0.75, 2.5, np.inf, -np.inf, np.nan, 1e-38, -3e38, 7.0, -0.5])


def _same_bits(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert (
        got.tobytes() == want.tobytes()
        or np.array_equal(got, want, equal_nan=True)
        and np.array_equal(np.signbit(got), np.signbit(want))
    )


def _old_lerp(start, end, weight):
    diff = end - start
    return np.where(np.abs(weight) < 0.5, start + weight * diff, end - diff * (1 - weight))


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide}
UNARY = {"neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh}


def _pairs(dtype):
    a = SPECIAL.astype(dtype)
    return a[:, None], a[None, :]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_special_values_match_the_ufunc_bit_for_bit(name, dtype):
    a, b = _pairs(dtype)
    with np.errstate(all="ignore"):
        want = BINARY[name](a, b)
        got = munet.ops.elementwise.binary(OPS[name], munet.tensor(a), munet.tensor(b)).numpy()
        _same_bits(got, want)
        out = np.empty_like(want)
        out_kernel(name)(out, a, b)
        _same_bits(out, want)
        x = munet.tensor(np.broadcast_to(a, want.shape).copy())
        getattr(x, name + "_")(munet.tensor(b))
        _same_bits(x.numpy(), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values_match_the_ufunc_bit_for_bit(name, dtype):
    a = SPECIAL.astype(dtype)
    with np.errstate(all="ignore"):
        want = UNARY[name](a)
        _same_bits(getattr(munet, name)(munet.tensor(a)).numpy(), want)
        out = np.empty_like(want)
        out_kernel(name)(out, a)
        _same_bits(out, want)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("name", ["add", "mul", "sub"])
def test_integer_and_bool_arithmetic_with_python_numbers_wraps_as_before(name, dtype):
    if dtype is np.bool_ and name == "sub":
        pytest.skip("bool subtraction is refused by the op")
    a = np.array([0, 1, 5, 100, 127], dtype=dtype)
    x = munet.tensor(a)
    other = True if dtype is np.bool_ else 250
    got = getattr(munet, name)(x, other).numpy()
    scalar = np.array(other & 0xFF if dtype is np.uint8 else other).astype(dtype)
    assert got.dtype == a.dtype and got.tolist() == BINARY[name](a, scalar).tolist()


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_half_precision_computes_in_float32_and_rounds_once(dtype):
    a, b = (v.astype(dtype) for v in _pairs(np.float32))
    want = np.multiply(a.astype(np.float32), b.astype(np.float32)).astype(dtype)
    got = munet.tensor(a) * munet.tensor(b)
    _same_bits(got.numpy(), want)
    x = munet.tensor(np.broadcast_to(a, want.shape).copy())
    x.mul_(munet.tensor(b))
    _same_bits(x.numpy(), want)
    _same_bits(munet.exp(munet.tensor(a)).numpy(), np.exp(a.astype(np.float32)).astype(dtype))


@pytest.mark.parametrize("weight", [0.25, 0.75, -0.0, np.nan, "tensor"])
def test_lerp_matches_the_two_sided_formula_on_special_values(weight):
    start, end = _pairs(np.float32)
    start, end = np.broadcast_arrays(start, end)
    w = np.resize(SPECIAL.astype(np.float32), start.shape) if weight == "tensor" else np.float32(weight)
    with np.errstate(all="ignore"):
        want = _old_lerp(start, end, w)
        arg = munet.tensor(w) if weight == "tensor" else float(weight)
        _same_bits(munet.lerp(munet.tensor(start), munet.tensor(end), arg).numpy(), want)
        out = np.empty_like(want)
        out_kernel("lerp")(out, start, end, w if weight == "tensor" else float(weight))
        _same_bits(out, want)


def test_a_scalar_condition_evaluates_only_the_branch_it_picks():
    def formula(args, t):  # where(b > 0, a / b, a): a scalar b > 0 never divides when false
        return Apply("where", (Apply("gt", (args[1], Const(0.0, t)), "bool"), Apply("div", tuple(args), t), args[0]), t)

    rendered = NumpyFormula(formula)
    a = np.array([1.0, 2.0], np.float32)
    with np.errstate(divide="raise"):
        assert rendered.fresh(a, 0.0).tolist() == [1.0, 2.0]
    out = np.empty_like(a)
    rendered.into(out, a, 4.0)
    assert out.tolist() == [0.25, 0.5]


def test_an_unknown_scalar_op_is_an_internal_error_naming_it():
    rendered = NumpyFormula(lambda args, t: Apply("cbrt", (args[0],), t))
    with pytest.raises(RuntimeError, match="internal error.*cbrt"):
        rendered.fresh(np.ones(2, np.float32))
