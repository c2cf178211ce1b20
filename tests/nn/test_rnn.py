"""RNN, LSTM, GRU and their cells against PyTorch, with PyTorch's weights copied in."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import munet
from munet import nn
from tests.reference import assert_close, assert_close_to_reference, float64_copy, randn, to_torch


def _pair(name: str, *args, dtype=torch.float32, **kwargs):
    """The same layer in both frameworks, munet's loaded from torch's state dict."""
    torch.manual_seed(0)
    t_layer = getattr(torch.nn, name)(*args, **kwargs).to(dtype)
    m_layer = getattr(nn, name)(*args, **kwargs)
    if dtype == torch.float64:
        m_layer.double()
    m_layer.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in t_layer.state_dict().items()})
    return m_layer, t_layer


def _leaves(arrays: list[np.ndarray]):
    m = [munet.tensor(a, requires_grad=True) for a in arrays]
    t = [to_torch(a).requires_grad_(True) for a in arrays]
    return m, t


def _flatten(out) -> list:
    if isinstance(out, (tuple, list)):
        return [x for item in out for x in _flatten(item)]
    return [out]


def _float64_twin(t_layer, t_in):
    """A float64 copy of torch's layer and of its leaf inputs, to run as ``_compare``'s ``reference``."""
    return float64_copy(t_layer), [t.detach().double().requires_grad_(True) for t in t_in]


def _compare(m_layer, t_layer, m_out, t_out, m_in, t_in, rtol=None, atol=None, reference=None) -> None:
    """Outputs equal; then the gradients of a random weighting of all outputs, for inputs and parameters.

    ``reference=(layer, out, inputs)``, torch's float64 run (see ``_float64_twin``), replaces the
    fixed tolerances by ``assert_close_to_reference``: for stacks deep enough that float32 rounding
    depends on the CPU's kernels.
    """
    runs = [(m_layer, m_out, m_in), (t_layer, t_out, t_in)] + ([reference] if reference else [])
    r = np.random.default_rng(5)
    ups = [r.standard_normal(tuple(t.shape)) for t in _flatten(t_out)]
    for _, out, _ in runs:
        sum((o * _like(o, u)).sum() for o, u in zip(_flatten(out), ups, strict=True)).backward()
    for what, values in _results(runs):
        if reference:
            assert_close_to_reference(*values, what=what)
        else:
            assert_close(*values, rtol, atol, what=what)


def _results(runs):
    """``(what, [its value in each run])`` for every output, input gradient and parameter gradient."""
    for i, outs in enumerate(zip(*(_flatten(out) for _, out, _ in runs), strict=True)):
        yield f"output[{i}]", outs
    for i, leaves in enumerate(zip(*(ins for _, _, ins in runs), strict=True)):
        yield f"grad of input {i}", [x.grad for x in leaves]
    params = [dict(layer.named_parameters()) for layer, _, _ in runs]
    for name in params[0]:
        yield f"grad of {name}", [p[name].grad for p in params]


def _like(out, values: np.ndarray):
    """``values`` as a tensor of ``out``'s framework and dtype."""
    if isinstance(out, torch.Tensor):
        return torch.tensor(values, dtype=out.dtype)
    return munet.tensor(values).to(out.dtype)


CONFIGS = [
    {},
    {"num_layers": 2, "bidirectional": True, "batch_first": True},
    {"num_layers": 2, "bias": False},
    {"bidirectional": True},
]
LAYERS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {})]


@pytest.mark.parametrize("name,extra", LAYERS, ids=lambda v: str(v))
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("with_h0", [False, True])
def test_sequence_layers_match_torch(name, extra, config, with_h0):
    m_layer, t_layer = _pair(name, 3, 5, **extra, **config)
    batch, steps = 2, 4
    shape = (batch, steps, 3) if config.get("batch_first") else (steps, batch, 3)
    arrays = [randn(*shape, seed=1)]
    directions = 2 if config.get("bidirectional") else 1
    h_shape = (config.get("num_layers", 1) * directions, batch, 5)
    if with_h0:
        arrays.append(randn(*h_shape, seed=2))
        if name == "LSTM":
            arrays.append(randn(*h_shape, seed=3))
    m_in, t_in = _leaves(arrays)

    def call(layer, inputs):
        if not with_h0:
            return layer(inputs[0])
        hx = (inputs[1], inputs[2]) if name == "LSTM" else inputs[1]
        return layer(inputs[0], hx)

    _compare(m_layer, t_layer, call(m_layer, m_in), call(t_layer, t_in), m_in, t_in)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_float64(name):
    m_layer, t_layer = _pair(name, 4, 6, num_layers=2, bidirectional=True, dtype=torch.float64)
    m_in, t_in = _leaves([randn(5, 3, 4, dtype="float64", seed=4)])
    _compare(m_layer, t_layer, m_layer(m_in[0]), t_layer(t_in[0]), m_in, t_in)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_unbatched_input(name):
    m_layer, t_layer = _pair(name, 3, 4, num_layers=2)
    arrays = [randn(6, 3, seed=1), randn(2, 4, seed=2)]
    if name == "LSTM":
        arrays.append(randn(2, 4, seed=3))
    m_in, t_in = _leaves(arrays)
    m_hx = (m_in[1], m_in[2]) if name == "LSTM" else m_in[1]
    t_hx = (t_in[1], t_in[2]) if name == "LSTM" else t_in[1]
    _compare(m_layer, t_layer, m_layer(m_in[0], m_hx), t_layer(t_in[0], t_hx), m_in, t_in)


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported")
def test_lstm_proj_size():
    m_layer, t_layer = _pair("LSTM", 3, 6, num_layers=2, bidirectional=True, proj_size=4, batch_first=True)
    assert [(k, tuple(v.shape)) for k, v in m_layer.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in t_layer.state_dict().items()
    ]
    m_in, t_in = _leaves([randn(2, 5, 3, seed=1), randn(4, 2, 4, seed=2), randn(4, 2, 6, seed=3)])
    m_out = m_layer(m_in[0], (m_in[1], m_in[2]))
    t_out = t_layer(t_in[0], (t_in[1], t_in[2]))
    _compare(m_layer, t_layer, m_out, t_out, m_in, t_in)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_eval_mode_turns_off_dropout(name):
    m_layer, t_layer = _pair(name, 3, 4, num_layers=3, dropout=0.5)
    m_layer.eval()
    t_layer.eval()
    m_in, t_in = _leaves([randn(5, 2, 3, seed=1)])
    _compare(m_layer, t_layer, m_layer(m_in[0]), t_layer(t_in[0]), m_in, t_in)


def test_train_mode_applies_dropout_between_layers_only():
    layer = nn.GRU(3, 8, num_layers=2, dropout=0.9)
    x = munet.tensor(randn(5, 2, 3, seed=1))
    layer.eval()
    expected, _ = layer(x)
    layer.train()
    munet.manual_seed(0)
    noisy, _ = layer(x)
    assert not np.allclose(noisy.detach().numpy(), expected.detach().numpy())
    single = nn.GRU(3, 8, num_layers=1)
    single.train()
    a, _ = single(x)
    single.eval()
    b, _ = single(x)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("RNN", {}),
        ("RNN", {"nonlinearity": "relu", "num_layers": 2, "bias": False}),
        ("LSTM", {"num_layers": 2, "bidirectional": True, "batch_first": True, "dropout": 0.25}),
        ("LSTM", {"proj_size": 2}),
        ("GRU", {"bidirectional": True}),
        ("RNNCell", {}),
        ("RNNCell", {"nonlinearity": "relu", "bias": False}),
        ("LSTMCell", {}),
        ("GRUCell", {"bias": False}),
    ],
    ids=str,
)
def test_state_dict_repr_and_init(name, kwargs):
    t_layer = getattr(torch.nn, name)(3, 5, **kwargs)
    m_layer = getattr(nn, name)(3, 5, **kwargs)
    assert [(k, tuple(v.shape)) for k, v in m_layer.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in t_layer.state_dict().items()
    ]
    assert repr(m_layer) == repr(t_layer)
    bound = 1 / math.sqrt(5)
    for p in m_layer.parameters():
        values = p.detach().numpy()
        assert p.requires_grad and p.dtype == munet.float32
        assert values.min() >= -bound and values.max() <= bound
        assert values.max() - values.min() > bound  # spread out, not constant


def test_all_weights_and_module_conversion():
    layer = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    assert [len(w) for w in layer.all_weights] == [4, 4, 4, 4]
    assert layer.all_weights[1][0] is layer.weight_ih_l0_reverse
    layer.double()
    out, (h, c) = layer(munet.tensor(randn(2, 1, 3, dtype="float64")))
    assert out.dtype == h.dtype == c.dtype == munet.float64


@pytest.mark.parametrize("name,extra", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("GRUCell", {})])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_h", [True, False])
def test_single_state_cells(name, extra, batched, with_h):
    m_layer, t_layer = _pair(name, 3, 5, **extra)
    arrays = [randn(4, 3, seed=1) if batched else randn(3, seed=1)]
    if with_h:
        arrays.append(randn(4, 5, seed=2) if batched else randn(5, seed=2))
    m_in, t_in = _leaves(arrays)
    _compare(m_layer, t_layer, m_layer(*m_in), t_layer(*t_in), m_in, t_in)


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_h", [True, False])
def test_lstm_cell(batched, with_h):
    m_layer, t_layer = _pair("LSTMCell", 3, 5)
    shape = (4,) if batched else ()
    arrays = [randn(*shape, 3, seed=1)]
    if with_h:
        arrays += [randn(*shape, 5, seed=2), randn(*shape, 5, seed=3)]
    m_in, t_in = _leaves(arrays)
    m_out = m_layer(m_in[0], (m_in[1], m_in[2])) if with_h else m_layer(m_in[0])
    t_out = t_layer(t_in[0], (t_in[1], t_in[2])) if with_h else t_layer(t_in[0])
    _compare(m_layer, t_layer, m_out, t_out, m_in, t_in)


def test_errors():
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sigmoid'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.LSTM(3, 4, dropout=1.5)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.2)
    layer = nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 3, got 5"):
        layer(munet.zeros(2, 1, 5))
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D, got 4D"):
        layer(munet.zeros(2, 1, 1, 3))
    with pytest.raises(RuntimeError, match="Expected hidden\\[0\\] size \\(1, 1, 4\\), got \\[1, 2, 4\\]"):
        layer(munet.zeros(2, 1, 3), (munet.zeros(1, 2, 4), munet.zeros(1, 1, 4)))
    with pytest.raises(RuntimeError, match="For batched 3-D input, hx should also be 3-D"):
        nn.GRU(3, 4)(munet.zeros(2, 1, 3), munet.zeros(1, 4))
    with pytest.raises(ValueError, match="input dtype \\(float64\\) does not match weight dtype \\(float32\\)"):
        nn.RNN(3, 4)(munet.zeros(2, 1, 3, dtype=munet.float64))
    with pytest.raises(ValueError, match="GRUCell: Expected input to be 1D or 2D, got 3D"):
        nn.GRUCell(3, 4)(munet.zeros(1, 1, 3))
    with pytest.raises(RuntimeError, match="LSTMCell: Expected hx\\[1\\] of shape \\(2, 4\\), got \\[2, 5\\]"):
        nn.LSTMCell(3, 4)(munet.zeros(2, 3), (munet.zeros(2, 4), munet.zeros(2, 5)))
