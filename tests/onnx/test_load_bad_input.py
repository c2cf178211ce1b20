"""munet.onnx.load on bad input: external data (read beside the model, refused when missing, outside
the model's directory, or without a directory), sparse initializers, training metadata, absurd
declared shapes, and a bounded fuzz of the loader: every failure is a ValueError or UnsupportedError
naming the file, and nothing else escapes."""

from __future__ import annotations

import numpy as np
import pytest

import munet
from munet.onnx import UnsupportedError
from tests.onnx.ort import onnx, run_ort

helper = onnx.helper
TP = onnx.TensorProto


def small_model():
    rng = np.random.default_rng(0)
    w = onnx.numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w")
    b = onnx.numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Add", ["h", "b"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TP.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
        initializer=[w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def save_external(model, directory, location="weights.bin"):
    path = directory / "model.onnx"
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # save_model moves the data out of the proto it saves
    onnx.save_model(
        copy, path, save_as_external_data=True, all_tensors_to_one_file=True, location=location, size_threshold=0
    )
    return path


def test_external_data_beside_the_model_is_read(tmp_path):
    model = small_model()
    path = save_external(model, tmp_path)
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    got = munet.onnx.load(path)(x).detach().numpy()
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-6, atol=1e-6)


def test_missing_external_data_is_refused(tmp_path):
    path = save_external(small_model(), tmp_path)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(ValueError, match="model.onnx: tensor 'w': external data file 'weights.bin' is missing beside"):
        munet.onnx.load(path)


def test_external_data_outside_the_model_directory_is_refused(tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    path = save_external(small_model(), inner)
    (inner / "weights.bin").rename(tmp_path / "weights.bin")
    model = onnx.load(path, load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../weights.bin"
    onnx.save_model(model, path)
    with pytest.raises(ValueError, match="model.onnx.*'\\.\\./weights.bin'.*outside the model's directory"):
        munet.onnx.load(path)


def test_external_data_without_a_directory_is_refused(tmp_path):
    path = save_external(small_model(), tmp_path)
    data = path.read_bytes()
    with pytest.raises(ValueError, match="external file 'weights.bin': load the model from its path"):
        munet.onnx.load(data)


def test_sparse_initializers_and_training_metadata_are_refused():
    model = small_model()
    values = helper.make_tensor("s", TP.FLOAT, [1], [1.0])
    indices = helper.make_tensor("s_indices", TP.INT64, [1], [0])
    sparse = onnx.helper.make_sparse_tensor(values, indices, [3])
    sparse_model = onnx.ModelProto()
    sparse_model.CopyFrom(model)
    sparse_model.graph.sparse_initializer.extend([sparse])
    with pytest.raises(UnsupportedError, match="sparse initializers \\(\\['s'\\]\\) are not supported"):
        munet.onnx.load(sparse_model)
    trained = onnx.ModelProto()
    trained.CopyFrom(model)
    trained.training_info.add()
    with pytest.raises(UnsupportedError, match="training metadata"):
        munet.onnx.load(trained)


def test_absurd_declared_shapes_are_refused():
    model = small_model()
    huge = model.graph.initializer[1]
    del huge.dims[:]
    huge.dims.extend([2**31, 2**31])
    with pytest.raises(ValueError, match="<model> fails onnx's checker: .*tensor name: b.* too large"):
        munet.onnx.load(model)  # the checker finds it first
    attribute = small_model()
    constant = onnx.numpy_helper.from_array(np.zeros(2, np.float32), "c")
    constant.dims[:] = [2**31, 2**31]
    attribute.graph.node.append(helper.make_node("Constant", [], ["unused"], value=constant, name="k"))
    with pytest.raises(ValueError, match="(?s)tensor name: c.* too large.*node. Name: k"):
        munet.onnx.load(attribute)


def test_loader_fuzz():
    """Random byte flips, truncations and insertions of a valid model: load either succeeds or raises
    ValueError/UnsupportedError (bounded: 300 mutations of a small model, seeded)."""
    data = bytearray(small_model().SerializeToString())
    rng = np.random.default_rng(2026)
    outcomes = {"loaded": 0, "refused": 0}
    for _ in range(300):
        mutated = bytearray(data)
        kind = rng.integers(3)
        if kind == 0:
            for _ in range(rng.integers(1, 4)):
                mutated[rng.integers(len(mutated))] = rng.integers(256)
        elif kind == 1:
            mutated = mutated[: rng.integers(len(mutated))]
        else:
            at = rng.integers(len(mutated))
            mutated[at:at] = bytes(rng.integers(0, 256, rng.integers(1, 8)).tolist())
        try:
            munet.onnx.load(bytes(mutated))
            outcomes["loaded"] += 1
        except (ValueError, UnsupportedError) as exc:
            assert "munet.onnx" in str(exc)
            outcomes["refused"] += 1
    assert outcomes["loaded"] and outcomes["refused"]
