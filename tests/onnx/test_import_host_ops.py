"""munet.onnx.import_host_ops: strings, sequences, optionals and NonMaxSuppression against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import munet
from tests.onnx.ort import onnx, run_ort

helper = onnx.helper
TP = onnx.TensorProto


def model_of(nodes, inputs, outputs, opset=20, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_string_concat_and_equal_match_onnxruntime():
    a = np.array([["ab", "c"], ["", "é"]], dtype=object)
    b = np.array(["b", "é"], dtype=object)
    x = helper.make_tensor_value_info("a", TP.STRING, [2, 2])
    y = helper.make_tensor_value_info("b", TP.STRING, [2])
    joined = helper.make_tensor_value_info("joined", TP.STRING, [2, 2])
    same = helper.make_tensor_value_info("same", TP.BOOL, [2, 2])
    nodes = [
        helper.make_node("StringConcat", ["a", "b"], ["joined"]),
        helper.make_node("Equal", ["joined", "a"], ["same"]),
    ]
    model = model_of(nodes, [x, y], [joined, same])
    program = munet.onnx.load(model)
    got = program.to_numpy(program(a, b))
    expected = run_ort(model, {"a": a, "b": b})
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


def test_sequences_split_insert_and_concat_match_onnxruntime():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [5, 3])
    out = helper.make_tensor_value_info("y", TP.FLOAT, [8, 3])
    count = helper.make_tensor_value_info("n", TP.INT64, [])
    sizes = helper.make_tensor("sizes", TP.INT64, [2], [2, 3])
    minus_one = helper.make_tensor("at", TP.INT64, [], [-1])
    nodes = [
        helper.make_node("SplitToSequence", ["x", "sizes"], ["seq"], axis=0),
        helper.make_node("SequenceAt", ["seq", "at"], ["last"]),
        helper.make_node("SequenceInsert", ["seq", "last"], ["longer"]),
        helper.make_node("SequenceLength", ["longer"], ["n"]),
        helper.make_node("ConcatFromSequence", ["longer"], ["y"], axis=0),
    ]
    model = model_of(nodes, [x], [out, count], initializers=[sizes, minus_one])
    data = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    program = munet.onnx.load(model)
    got = program.to_numpy(program(data))
    expected = run_ort(model, {"x": data})
    np.testing.assert_array_equal(got[0], expected[0])
    assert int(got[1]) == int(expected[1]) == 3


def test_sequence_input_and_output_round_trip_as_lists():
    elem = helper.make_tensor_type_proto(TP.FLOAT, ["d"])
    seq = helper.make_value_info("s", helper.make_sequence_type_proto(elem))
    out = helper.make_value_info("t", helper.make_sequence_type_proto(elem))
    model = model_of([helper.make_node("SequenceErase", ["s"], ["t"])], [seq], [out])
    program = munet.onnx.load(model)
    parts = [np.ones(2, np.float32), np.zeros(3, np.float32)]
    (got,) = program.to_numpy(program(parts))
    assert isinstance(got, list) and len(got) == 1
    np.testing.assert_array_equal(got[0], parts[0])
    with pytest.raises(TypeError, match="must be a sequence"):
        program(parts[0])


@pytest.mark.parametrize("center_point_box", [0, 1])
def test_non_max_suppression_matches_onnxruntime(center_point_box):
    rng = np.random.default_rng(center_point_box)
    boxes = rng.uniform(0, 10, (2, 30, 4)).astype(np.float32)
    if not center_point_box:
        boxes[..., 2:] = boxes[..., :2] + rng.uniform(0.5, 4, (2, 30, 2)).astype(np.float32)
    scores = rng.uniform(0, 1, (2, 3, 30)).astype(np.float32)
    scores[0, 0, 5] = scores[0, 0, 6]  # a tie: the lower index goes first
    inputs = [
        helper.make_tensor_value_info("boxes", TP.FLOAT, [2, 30, 4]),
        helper.make_tensor_value_info("scores", TP.FLOAT, [2, 3, 30]),
    ]
    limits = [
        helper.make_tensor("limit", TP.INT64, [1], [7]),
        helper.make_tensor("iou", TP.FLOAT, [1], [0.3]),
        helper.make_tensor("score", TP.FLOAT, [1], [0.2]),
    ]
    node = helper.make_node(
        "NonMaxSuppression", ["boxes", "scores", "limit", "iou", "score"], ["kept"], center_point_box=center_point_box
    )
    out = helper.make_tensor_value_info("kept", TP.INT64, ["k", 3])
    model = model_of([node], inputs, [out], opset=11, initializers=limits)
    program = munet.onnx.load(model)
    (got,) = program.to_numpy(program(boxes, scores))
    (expected,) = run_ort(model, {"boxes": boxes, "scores": scores})
    assert len(got) > 10
    np.testing.assert_array_equal(got, expected)
