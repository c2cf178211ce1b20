"""munet.onnx.values: uint16/32/64 held in int32/int64 give NumPy's unsigned results exactly (wrapping
arithmetic, orderings, division, shifts, casts) over the whole range, including uint64 values with the
top bit set; operators without an exact uint64 form are refused at load."""

from __future__ import annotations

import numpy as np
import pytest

import munet
from munet.onnx import UnsupportedError
from tests.onnx.ort import onnx, run_ort

helper = onnx.helper
TP = onnx.TensorProto
CODES = {"uint16": TP.UINT16, "uint32": TP.UINT32, "uint64": TP.UINT64}


def binary_model(op: str, dtype: str, out_dtype: str | None = None, **attrs):
    code = CODES[dtype]
    out_code = {"bool": TP.BOOL, "float64": TP.DOUBLE}.get(out_dtype, CODES.get(out_dtype, code))
    x, y = helper.make_tensor_value_info("x", code, [64]), helper.make_tensor_value_info("y", code, [64])
    z = helper.make_tensor_value_info("z", out_code, [64])
    graph = helper.make_graph([helper.make_node(op, ["x", "y"], ["z"], **attrs)], "g", [x, y], [z])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def random_unsigned(dtype: str, rng, low: int = 0):
    info = np.iinfo(dtype)
    values = rng.integers(low, int(info.max), size=64, dtype=np.uint64, endpoint=True).astype(dtype)
    values[:4] = np.array([info.max, info.max - 1, 1 << (info.bits - 1), low], dtype=dtype)  # the edges
    return values


REFERENCE = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "Div": lambda a, b: a // b,
    "Mod": lambda a, b: a % b,
    "Less": lambda a, b: a < b,
    "LessOrEqual": lambda a, b: a <= b,
    "Greater": lambda a, b: a > b,
    "GreaterOrEqual": lambda a, b: a >= b,
    "Equal": lambda a, b: a == b,
    "Max": np.maximum,
    "Min": np.minimum,
    "BitwiseAnd": np.bitwise_and,
    "BitwiseXor": np.bitwise_xor,
}
BOOL_OUT = {"Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"}


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_unsigned_binary_ops_match_numpy(op, dtype):
    rng = np.random.default_rng(0)
    a = random_unsigned(dtype, rng)
    b = random_unsigned(dtype, rng, low=1 if op in ("Div", "Mod") else 0)
    b[4] = a[4]  # one equal pair
    model = binary_model(op, dtype, "bool" if op in BOOL_OUT else None)
    program = munet.onnx.load(model)
    with np.errstate(over="ignore"):
        expected = REFERENCE[op](a, b)
    (got,) = program.to_numpy(program(a, b))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_unsigned_bit_shifts_match_numpy(dtype, direction):
    rng = np.random.default_rng(1)
    bits = np.iinfo(dtype).bits
    a = random_unsigned(dtype, rng)
    shift = rng.integers(0, bits, size=64).astype(dtype)
    program = munet.onnx.load(binary_model("BitShift", dtype, direction=direction))
    (got,) = program.to_numpy(program(a, shift))
    expected = (a << shift) if direction == "LEFT" else (a >> shift)
    np.testing.assert_array_equal(got, expected)


def test_uint64_to_float_and_back_through_cast():
    a = np.array([0, 1, 2**63, 2**64 - 1, 2**53 + 1], dtype=np.uint64)
    x = helper.make_tensor_value_info("x", TP.UINT64, [5])
    f = helper.make_tensor_value_info("f", TP.DOUBLE, [5])
    u = helper.make_tensor_value_info("u", TP.UINT16, [5])
    nodes = [helper.make_node("Cast", ["x"], ["f"], to=TP.DOUBLE), helper.make_node("Cast", ["x"], ["u"], to=TP.UINT16)]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [f, u]), opset_imports=[helper.make_opsetid("", 18)])
    program = munet.onnx.load(model)
    got_f, got_u = program.to_numpy(program(a))
    np.testing.assert_array_equal(got_f, a.astype(np.float64))
    np.testing.assert_array_equal(got_u, a.astype(np.uint16))
    expected = run_ort(model, {"x": a})
    np.testing.assert_array_equal(got_f, expected[0])
    np.testing.assert_array_equal(got_u, expected[1])


def test_unsigned_values_are_held_signed_inside_the_program():
    a = np.array([65535, 1], dtype=np.uint16)
    program = munet.onnx.load(binary_model("Add", "uint16"))
    held = program(a, a)
    assert held.dtype is munet.int32  # MuNet has no uint16: the held form, in [0, 2**16)
    np.testing.assert_array_equal(held.numpy(), [65534, 2])
    (got,) = program.to_numpy(held)
    assert got.dtype == np.uint16
    with pytest.raises(TypeError, match="input 'x' must be uint16, got float32"):
        program(a.astype(np.float32), a)


def test_uint64_without_exact_form_is_refused_at_load():
    x = helper.make_tensor_value_info("x", TP.UINT64, [4])
    y = helper.make_tensor_value_info("y", TP.UINT64, [1])
    node = helper.make_node("ReduceSum", ["x"], ["y"], name="r")
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(
        UnsupportedError, match="node 'r': operator ReduceSum .*uint64 input 'x' \\(no exact int64 form\\)"
    ):
        munet.onnx.load(model)


def test_strings_outside_string_operators_are_refused_at_load():
    x = helper.make_tensor_value_info("x", TP.STRING, [2])
    y = helper.make_tensor_value_info("y", TP.STRING, [2])
    node = helper.make_node("Reshape", ["x", "s"], ["y"], name="r")
    shape = helper.make_tensor("s", TP.INT64, [1], [2])
    graph = helper.make_graph([node], "g", [x], [y], initializer=[shape])
    with pytest.raises(UnsupportedError, match="node 'r': operator Reshape .*string input 'x'"):
        munet.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
