"""munet.onnx.import_ml_ops: the ai.onnx.ml operators MuNet runs, against onnxruntime; the others are
refused naming the operator and its domain."""

from __future__ import annotations

import numpy as np
import pytest

import munet
from munet.onnx import UnsupportedError
from tests.onnx.ort import onnx, run_ort

helper = onnx.helper
TP = onnx.TensorProto
OPSETS = [helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 4)]


def test_binarizer_feature_extractor_and_label_encoder_match_onnxruntime():
    nodes = [
        helper.make_node("Binarizer", ["x"], ["b"], domain="ai.onnx.ml", threshold=0.25),
        helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["f"], domain="ai.onnx.ml"),
        helper.make_node(
            "LabelEncoder",
            ["s"],
            ["code"],
            domain="ai.onnx.ml",
            keys_strings=["cat", "dog", ""],
            values_floats=[1.5, -2.0, 7.0],
            default_float=0.5,
        ),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TP.FLOAT, [3, 5]),
        helper.make_tensor_value_info("i", TP.INT64, [2]),
        helper.make_tensor_value_info("s", TP.STRING, [4]),
    ]
    outputs = [
        helper.make_tensor_value_info("b", TP.FLOAT, [3, 5]),
        helper.make_tensor_value_info("f", TP.FLOAT, [3, 2]),
        helper.make_tensor_value_info("code", TP.FLOAT, [4]),
    ]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs), opset_imports=OPSETS)
    feeds = {
        "x": np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32),
        "i": np.array([4, 1]),
        "s": np.array(["dog", "bird", "", "cat"], dtype=object),
    }
    program = munet.onnx.load(model)
    got = program.to_numpy(program(feeds))
    for g, e in zip(got, run_ort(model, feeds)):
        np.testing.assert_array_equal(g, e)


def test_unsupported_ml_operator_is_named():
    node = helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", name="n", norm="L2")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
    )
    with pytest.raises(
        UnsupportedError, match="node 'n': operator Normalizer \\(domain 'ai.onnx.ml', opset 4\\) is not supported"
    ):
        munet.onnx.load(helper.make_model(graph, opset_imports=OPSETS))
