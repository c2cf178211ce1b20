"""Real models exported by ``torch.onnx.export`` at opset 18: MuNet's import matches onnxruntime
(within 1e-4, issue 14) on cpu and vulkan, plain and through ``munet.compile``."""

from __future__ import annotations

import numpy as np
import pytest

import munet
from tests.onnx.ort import onnx, run_ort

torch = pytest.importorskip("torch")
real_models = pytest.importorskip("tests.onnx.real_models")

TOL = 1e-4  # issue 14's bound for imported real models against onnxruntime

_MODELS = real_models.models()


@pytest.fixture(scope="module")
def exported() -> dict:
    """name -> (ModelProto, NumPy inputs), each model exported once for the module."""
    cases = {}
    for name, (model, inputs) in _MODELS.items():
        proto = onnx.load_from_string(real_models.export(model, inputs))
        onnx.checker.check_model(proto, full_check=True)
        cases[name] = (proto, [x.numpy() for x in inputs])
    return cases


def _assert_close(got, expected) -> None:
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g = g.detach().cpu().numpy()
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("name", list(_MODELS))
def test_matches_onnxruntime_on_cpu(exported, name):
    proto, inputs = exported[name]
    expected = run_ort(proto, {i.name: a for i, a in zip(proto.graph.input, inputs)})
    program = munet.onnx.load(proto)
    with munet.no_grad():
        _assert_close(program(*inputs), expected)
        _assert_close(munet.compile(program)(*[munet.from_numpy(a) for a in inputs]), expected)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_style", "vision_transformer", "bidirectional_gru"])
def test_matches_onnxruntime_on_vulkan(exported, name, vulkan):
    proto, inputs = exported[name]
    expected = run_ort(proto, {i.name: a for i, a in zip(proto.graph.input, inputs)})
    program = munet.onnx.load(proto, device=vulkan)
    with munet.no_grad():
        _assert_close(program(*[munet.from_numpy(a).to(vulkan) for a in inputs]), expected)


def test_resnet18_batch_norms_fold_into_their_convolutions():
    """Exported without the exporter's own folding, each BatchNormalization folds at import, and the
    folded program still matches onnxruntime on the unfolded graph."""
    model, inputs = _MODELS["resnet18"]
    proto = onnx.load_from_string(real_models.export(model, inputs, do_constant_folding=False))
    batch_norms = [node.name for node in proto.graph.node if node.op_type == "BatchNormalization"]
    assert len(batch_norms) == 20
    program = munet.onnx.load(proto)
    folded = [line for line in program.optimizations if line.startswith("BatchNormalization")]
    assert len(folded) == len(batch_norms) and all(repr(name) in " ".join(folded) for name in batch_norms)
    arrays = [x.numpy() for x in inputs]
    with munet.no_grad():
        _assert_close(program(*arrays), run_ort(proto, {proto.graph.input[0].name: arrays[0]}))
