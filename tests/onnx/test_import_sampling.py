"""munet.onnx.import_sampling: GridSample's tap sum (cubic, 3-d) against onnx's reference and onnxruntime,
and against F.grid_sample where both apply; DeformConv and Resize's antialiased taps against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import munet
import munet.nn.functional as F
from munet.onnx.import_sampling import sample_grid
from tests.onnx.ort import onnx, run_ort

helper = onnx.helper
TP = onnx.TensorProto
RTOL, ATOL = 1e-5, 1e-5  # different summation orders of a few float32 products


def run_both(node, inputs: dict, out_shape, opset: int = 22, initializers=()):
    infos = [helper.make_tensor_value_info(n, TP.FLOAT, a.shape) for n, a in inputs.items()]
    out = helper.make_tensor_value_info("y", TP.FLOAT, out_shape)
    graph = helper.make_graph([node], "g", infos, [out], initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    program = munet.onnx.load(model)
    return program(inputs).numpy(), run_ort(model, inputs)[0]


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_tap_sum_matches_grid_sample(mode, padding, align_corners):
    rng = np.random.default_rng(0)
    x = munet.from_numpy(rng.standard_normal((2, 3, 5, 6)).astype(np.float32))
    grid = munet.from_numpy(rng.uniform(-1.6, 1.6, (2, 4, 7, 2)).astype(np.float32))
    expected = F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align_corners)
    got = sample_grid(x, grid, mode, padding, align_corners)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize(("mode", "spatial"), [("cubic", 2), ("linear", 3), ("nearest", 3)])
def test_grid_sample_cubic_and_volumetric_match_onnxruntime(mode, spatial, padding):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, *[5] * spatial)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (1, *[3] * spatial, spatial)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding, align_corners=0)
    got, expected = run_both(node, {"x": x, "grid": grid}, [1, 2, *[3] * spatial])
    from onnx.reference import ReferenceEvaluator

    reference = ReferenceEvaluator(node).run(None, {"x": x, "grid": grid})[0]
    np.testing.assert_allclose(got, reference, rtol=RTOL, atol=ATOL)
    if (mode, padding) != ("cubic", "border"):  # onnxruntime 1.32 clamps every cubic position, not the reference's
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def test_deform_conv_matches_onnxruntime():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 6, 5)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    offset = (rng.standard_normal((2, 2 * 2 * 9, 3, 5)) * 1.5).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    mask = rng.uniform(0, 1, (2, 2 * 9, 3, 5)).astype(np.float32)
    node = helper.make_node(
        "DeformConv",
        ["x", "w", "offset", "b", "mask"],
        ["y"],
        group=2,
        offset_group=2,
        pads=[1, 1, 1, 1],
        strides=[2, 1],
        kernel_shape=[3, 3],
    )
    feeds = {"x": x, "w": w, "offset": offset, "b": bias, "mask": mask}
    got, expected = run_both(node, feeds, [2, 6, 3, 5])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scale", [0.3, 0.6, 1.5])
def test_resize_antialias_matches_onnxruntime(mode, scale):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 13, 11)).astype(np.float32)
    scales = helper.make_tensor("scales", TP.FLOAT, [4], [1, 1, scale, scale])
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, antialias=1)
    shape = [1, 2, int(13 * scale), int(11 * scale)]
    got, expected = run_both(node, {"x": x}, shape, opset=18, initializers=[scales])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
