"""munet.onnx.import_quantized: integer results equal onnxruntime's bit for bit on random inputs (the
integer sums are exact; requantization rounds half to even as both define it)."""

from __future__ import annotations

import numpy as np
import pytest

import munet
from tests.onnx.ort import onnx, run_ort

helper = onnx.helper
TP = onnx.TensorProto
NP = {TP.UINT8: np.uint8, TP.INT8: np.int8}


def run_both(nodes, inputs: dict, outputs: list, opset: int = 21):
    infos = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()
    ]
    graph = helper.make_graph(nodes, "g", infos, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    program = munet.onnx.load(model)
    return program.to_numpy(program(inputs)), run_ort(model, inputs)


def quantized(rng, shape, code):
    info = np.iinfo(NP[code])
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(NP[code])


@pytest.mark.parametrize("code", [TP.UINT8, TP.INT8])
def test_matmul_integer_and_qlinear_matmul(code):
    rng = np.random.default_rng(code)
    a, b = quantized(rng, (2, 5, 16), code), quantized(rng, (16, 7), code)
    feeds = {
        "a": a,
        "b": b,
        "a_zp": quantized(rng, (), code),
        "b_zp": quantized(rng, (), code),
        "a_scale": np.float32(0.02),
        "b_scale": np.float32(0.03),
        "y_scale": np.float32(0.7),
        "y_zp": quantized(rng, (), code),
    }
    nodes = [
        helper.make_node("MatMulInteger", ["a", "b", "a_zp", "b_zp"], ["sums"]),
        helper.make_node("QLinearMatMul", ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"], ["q"]),
    ]
    outputs = [
        helper.make_tensor_value_info("sums", TP.INT32, [2, 5, 7]),
        helper.make_tensor_value_info("q", code, [2, 5, 7]),
    ]
    feeds = {k: np.asarray(v) for k, v in feeds.items()}
    got, expected = run_both(nodes, feeds, outputs)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


def test_conv_integer_and_qlinear_conv():
    rng = np.random.default_rng(3)
    x, w = quantized(rng, (1, 3, 7, 6), TP.UINT8), quantized(rng, (4, 3, 3, 3), TP.UINT8)
    feeds = {
        "x": x,
        "w": w,
        "x_zp": np.asarray(np.uint8(120)),
        "w_zp": np.asarray(np.uint8(130)),
        "x_scale": np.asarray(np.float32(0.05)),
        "w_scale": np.asarray(np.float32(0.01)),
        "y_scale": np.asarray(np.float32(0.9)),
        "y_zp": np.asarray(np.uint8(100)),
        "bias": rng.integers(-500, 500, 4).astype(np.int32),
    }
    attrs = {"pads": [1, 0, 1, 2], "strides": [2, 1]}
    nodes = [
        helper.make_node("ConvInteger", ["x", "w", "x_zp", "w_zp"], ["sums"], **attrs),
        helper.make_node(
            "QLinearConv", ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp", "bias"], ["q"], **attrs
        ),
    ]
    outputs = [
        helper.make_tensor_value_info("sums", TP.INT32, [1, 4, 4, 6]),
        helper.make_tensor_value_info("q", TP.UINT8, [1, 4, 4, 6]),
    ]
    got, expected = run_both(nodes, feeds, outputs, opset=10)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("code", [TP.UINT8, TP.INT8])
def test_quantize_dequantize_per_axis(code):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 4)) * 3).astype(np.float32)
    x[0, 0, :2] = [0.25, 0.75]  # halves: rounded to even
    feeds = {
        "x": x,
        "scale": np.array([0.5, 0.1, 0.02], np.float32),
        "zp": quantized(rng, (3,), code),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"], axis=1),
        helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["d"], axis=1),
    ]
    outputs = [
        helper.make_tensor_value_info("q", code, [2, 3, 4]),
        helper.make_tensor_value_info("d", TP.FLOAT, [2, 3, 4]),
    ]
    got, expected = run_both(nodes, feeds, outputs, opset=13)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
