"""``munet.onnx.from_torch`` and native layers loading PyTorch state dicts directly."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import munet
import munet.nn as mnn

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")


def _close(actual, expected, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(actual.detach().numpy()), expected.detach().numpy(), rtol=rtol, atol=atol)


def test_from_torch_runs_the_module():
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 5 * 5, 6),
    )
    net[1].running_mean.uniform_(-1, 1)
    net[1].running_var.uniform_(0.5, 2)
    net.train()
    x = torch.randn(2, 3, 5, 5)
    program = munet.onnx.from_torch(net, (x,))
    assert net.training  # restored after the export
    net.eval()
    _close(program(x.numpy()), net(x))
    _close(program(input_0=munet.from_numpy(x.numpy())), net(x))


def test_from_torch_several_inputs_and_outputs():
    class Two(torch.nn.Module):
        def forward(self, a, b):
            return a @ b, (a + 1).sum(1)

    a, b = torch.randn(3, 4), torch.randn(4, 2)
    product, total = munet.onnx.from_torch(Two(), (a, b))(a.numpy(), b.numpy())
    _close(product, a @ b)
    _close(total, (a + 1).sum(1))


def test_from_torch_refuses_non_torch_args():
    with pytest.raises(TypeError, match="example_args must be torch tensors"):
        munet.onnx.from_torch(torch.nn.ReLU(), (np.ones(3, np.float32),))


def test_from_torch_without_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(ImportError, match=r"munet\[onnx-torch\]"):
        munet.onnx.from_torch(object(), ())


# (torch layer, munet layer, input shape): the same constructor arguments on both sides
LAYERS = [
    (lambda m: m.Linear(5, 3), (4, 5)),
    (lambda m: m.Conv2d(3, 4, 3, stride=2, padding=1, groups=1), (2, 3, 7, 7)),
    (lambda m: m.ConvTranspose2d(4, 2, 3, stride=2), (1, 4, 5, 5)),
    (lambda m: m.Conv1d(2, 4, 3, groups=2), (2, 2, 9)),
    (lambda m: m.BatchNorm2d(3), (2, 3, 4, 4)),
    (lambda m: m.LayerNorm(6), (2, 6)),
    (lambda m: m.GroupNorm(2, 4), (2, 4, 3)),
    (lambda m: m.Embedding(10, 4), None),
    (lambda m: m.LSTM(4, 5, num_layers=2, batch_first=True), (2, 3, 4)),
    (lambda m: m.GRU(4, 3, bidirectional=True), (3, 2, 4)),
    (lambda m: m.MultiheadAttention(8, 2, batch_first=True), (2, 3, 8)),
    (lambda m: m.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True), (2, 3, 8)),
]


@pytest.mark.parametrize("make, shape", LAYERS, ids=lambda v: "" if callable(v) or v is None else str(v))
def test_native_layers_load_torch_state_dicts(make, shape):
    torch.manual_seed(0)
    reference = make(torch.nn).eval()
    for buffer in reference.buffers():
        if buffer.is_floating_point():
            buffer.uniform_(0.5, 1.5)  # non-trivial batch-norm statistics
    layer = make(mnn).eval()
    result = layer.load_state_dict(reference.state_dict())  # torch tensors, no conversion by the caller
    assert not result.missing_keys and not result.unexpected_keys
    for key, value in reference.state_dict().items():
        assert np.array_equal(layer.state_dict()[key].numpy(), value.numpy()), key
    if shape is None:
        x = torch.tensor([[1, 4, 9], [0, 2, 2]])
        ours = layer(munet.from_numpy(x.numpy()))
    else:
        x = torch.randn(*shape)
        ours = layer(
            *([munet.from_numpy(x.numpy())] * (3 if isinstance(reference, torch.nn.MultiheadAttention) else 1))
        )
    with torch.no_grad():
        theirs = reference(*([x] * (3 if isinstance(reference, torch.nn.MultiheadAttention) else 1)))
    ours, theirs = (ours[0], theirs[0]) if isinstance(theirs, tuple) else (ours, theirs)
    _close(ours, theirs)


def test_torch_state_dict_errors_still_name_the_key():
    layer = mnn.Linear(5, 3)
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        layer.load_state_dict(torch.nn.Linear(4, 3).state_dict())


def test_torch_bfloat16_and_grad_tensors_convert():
    layer = mnn.Linear(2, 2).to(munet.bfloat16)
    reference = torch.nn.Linear(2, 2).to(torch.bfloat16)
    layer.load_state_dict(dict(reference.named_parameters()))  # Parameters that require grad
    assert layer.weight.dtype is munet.bfloat16
    assert np.array_equal(layer.weight.detach().float().numpy(), reference.weight.float().detach().numpy())
