"""Imported real models on a real cuda device (issue 14 item 2): the check of
``test_real_models_cuda_emulated.py`` for all six models, ResNet-18 included. Needs a GPU
(``cuda`` marker; run by ``scripts/gpu_check.sh``)."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("tests.onnx.real_models")
from tests.onnx.test_real_models_cuda_emulated import check_on_cuda  # noqa: E402 (after the skips)


@pytest.mark.cuda
@pytest.mark.parametrize(
    "name",
    ["resnet18", "mobilenet_style", "transformer_encoder", "vision_transformer", "stacked_lstm", "bidirectional_gru"],
)
def test_imported_model_on_a_gpu_matches_onnxruntime(name):
    check_on_cuda(name)
