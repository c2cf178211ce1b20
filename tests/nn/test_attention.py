"""MultiheadAttention against PyTorch, with PyTorch's weights copied in."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import munet
from munet import nn
from tests.nn.test_rnn import _compare, _leaves
from tests.reference import randn, to_torch

E, HEADS, L, S, N = 8, 2, 4, 5, 3


def _pair(*args, dtype=torch.float32, **kwargs):
    torch.manual_seed(0)
    t_layer = torch.nn.MultiheadAttention(*args, **kwargs).to(dtype)
    m_layer = nn.MultiheadAttention(*args, **kwargs)
    if dtype == torch.float64:
        m_layer.double()
    m_layer.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in t_layer.state_dict().items()})
    return m_layer, t_layer


def _qkv(batch_first: bool, kdim: int = E, vdim: int = E, dtype: str = "float32", batched: bool = True):
    def shape(length, dim):
        if not batched:
            return (length, dim)
        return (N, length, dim) if batch_first else (length, N, dim)

    return [randn(*shape(L, E), seed=1, dtype=dtype), randn(*shape(S, kdim), seed=2, dtype=dtype),
            randn(*shape(S, vdim), seed=3, dtype=dtype)]  # fmt: skip


def _masks(kind: str):
    """(attn_mask, key_padding_mask) as NumPy arrays for a mask scenario; no row is fully masked."""
    r = np.random.default_rng(7)
    bool_2d = np.zeros((L, S), bool)
    bool_2d[:, 3:] = r.random((L, 2)) < 0.5
    kpm = np.zeros((N, S), bool)
    kpm[0, 4] = kpm[2, 2:] = True
    float_2d = r.standard_normal((L, S)).astype(np.float32)
    return {
        "none": (None, None),
        "bool_2d": (bool_2d, None),
        "float_2d": (float_2d, None),
        "bool_3d": (np.broadcast_to(bool_2d, (N * HEADS, L, S)).copy(), None),
        "float_3d": (r.standard_normal((N * HEADS, L, S)).astype(np.float32), None),
        "kpm_bool": (None, kpm),
        "kpm_float": (None, np.where(kpm, -1e4, 0.0).astype(np.float32)),
        "both_bool": (bool_2d, kpm),
        "both_float": (float_2d, np.where(kpm, -1e4, 0.0).astype(np.float32)),
    }[kind]


def _run(m_layer, t_layer, arrays, masks=(None, None), self_attention=False, **kwargs):
    m_in, t_in = _leaves(arrays[:1] if self_attention else arrays)
    m_args = m_in * 3 if self_attention else m_in
    t_args = t_in * 3 if self_attention else t_in
    attn_mask, kpm = masks
    m_kw = dict(kwargs, attn_mask=None if attn_mask is None else munet.tensor(attn_mask))
    t_kw = dict(kwargs, attn_mask=None if attn_mask is None else to_torch(attn_mask))
    m_kw["key_padding_mask"] = None if kpm is None else munet.tensor(kpm)
    t_kw["key_padding_mask"] = None if kpm is None else to_torch(kpm)
    m_out, t_out = m_layer(*m_args, **m_kw), t_layer(*t_args, **t_kw)
    if t_out[1] is None:
        assert m_out[1] is None
        m_out, t_out = m_out[0], t_out[0]
    _compare(m_layer, t_layer, m_out, t_out, m_in, t_in)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("average", [True, False])
def test_forward_and_gradients(batch_first, need_weights, average):
    m_layer, t_layer = _pair(E, HEADS, batch_first=batch_first)
    _run(m_layer, t_layer, _qkv(batch_first), need_weights=need_weights, average_attn_weights=average)


@pytest.mark.parametrize(
    "kind", ["bool_2d", "float_2d", "bool_3d", "float_3d", "kpm_bool", "kpm_float", "both_bool", "both_float"]
)
@pytest.mark.parametrize("need_weights", [True, False])
def test_masks(kind, need_weights):
    m_layer, t_layer = _pair(E, HEADS, batch_first=True)
    _run(m_layer, t_layer, _qkv(True), _masks(kind), need_weights=need_weights)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("with_kpm", [True, False])
def test_causal_self_attention(need_weights, with_kpm):
    m_layer, t_layer = _pair(E, HEADS, batch_first=True)
    causal = np.triu(np.ones((L, L), bool), 1)
    kpm = np.zeros((N, L), bool)
    kpm[1, 3] = True
    masks = (causal, kpm if with_kpm else None)
    _run(m_layer, t_layer, _qkv(True), masks, self_attention=True, need_weights=need_weights, is_causal=True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bias": False},
        {"add_bias_kv": True},
        {"add_zero_attn": True},
        {"add_bias_kv": True, "add_zero_attn": True},
        {"kdim": 6, "vdim": 3},
        {"kdim": 6, "vdim": 3, "bias": False},
    ],
    ids=str,
)
@pytest.mark.parametrize("masked", [False, True])
def test_options(kwargs, masked):
    m_layer, t_layer = _pair(E, HEADS, **kwargs)
    arrays = _qkv(False, kwargs.get("kdim", E), kwargs.get("vdim", E))
    _run(m_layer, t_layer, arrays, _masks("both_bool") if masked else (None, None))
    _run(*_pair(E, HEADS, **kwargs), arrays, need_weights=False)


def test_self_attention_same_tensor():
    m_layer, t_layer = _pair(E, HEADS)
    _run(m_layer, t_layer, _qkv(False), self_attention=True)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("average", [True, False])
def test_unbatched(need_weights, average):
    m_layer, t_layer = _pair(E, HEADS, batch_first=True)
    kpm = np.zeros(S, np.float32)
    kpm[4] = -math.inf
    mask3d = np.random.default_rng(0).standard_normal((HEADS, L, S)).astype(np.float32)
    arrays = _qkv(True, batched=False)
    _run(m_layer, t_layer, arrays, (mask3d, kpm), need_weights=need_weights, average_attn_weights=average)


def test_float64():
    m_layer, t_layer = _pair(E, HEADS, dtype=torch.float64)
    _run(m_layer, t_layer, _qkv(False, dtype="float64"), _masks("kpm_bool"))


@pytest.mark.parametrize("need_weights", [True, False])
def test_eval_mode_turns_off_dropout(need_weights):
    m_layer, t_layer = _pair(E, HEADS, dropout=0.5)
    m_layer.eval()
    t_layer.eval()
    _run(m_layer, t_layer, _qkv(False), need_weights=need_weights)


def test_train_mode_dropout_on_weights():
    layer = nn.MultiheadAttention(E, HEADS, dropout=0.5)
    q, k, v = (munet.tensor(a) for a in _qkv(False))
    layer.eval()
    expected, _ = layer(q, k, v)
    layer.train()
    munet.manual_seed(0)
    noisy, weights = layer(q, k, v, average_attn_weights=False)
    assert not np.allclose(noisy.detach().numpy(), expected.detach().numpy())
    w = weights.detach().numpy()
    assert np.any(w == 0) and w.max() > 1 / S  # dropped entries and survivors scaled by 2


@pytest.mark.parametrize(
    "kwargs", [{}, {"bias": False}, {"add_bias_kv": True}, {"kdim": 6, "vdim": 3}, {"batch_first": True}], ids=str
)
def test_state_dict_repr_and_init(kwargs):
    torch_layer = torch.nn.MultiheadAttention(E, HEADS, **kwargs)
    layer = nn.MultiheadAttention(E, HEADS, **kwargs)
    assert [(k, tuple(v.shape)) for k, v in layer.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in torch_layer.state_dict().items()
    ]
    assert [n for n, _ in layer.named_parameters()] == [n for n, _ in torch_layer.named_parameters()]
    assert repr(layer) == repr(torch_layer)
    state = {k: v.numpy() for k, v in layer.state_dict().items()}
    if "in_proj_weight" in state:
        bound = math.sqrt(6 / (E + 3 * E))
        assert np.abs(state["in_proj_weight"]).max() <= bound and state["in_proj_weight"].std() > bound / 4
    else:
        assert np.abs(state["k_proj_weight"]).max() <= math.sqrt(6 / (E + 6))
    if "in_proj_bias" in state:
        assert not state["in_proj_bias"].any() and not state["out_proj.bias"].any()
    assert np.abs(state["out_proj.weight"]).max() <= 1 / math.sqrt(E)
    assert layer.head_dim == E // HEADS and layer.batch_first == kwargs.get("batch_first", False)


def test_errors():
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="must be greater than 0"):
        nn.MultiheadAttention(0, 1)
    layer = nn.MultiheadAttention(E, HEADS)
    q = munet.zeros(L, N, E)
    with pytest.raises(ValueError, match="expected `key` and `value` to be 3-D but found 2-D"):
        layer(q, munet.zeros(S, E), munet.zeros(S, E))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        layer(q, q, q, is_causal=True)
    with pytest.raises(RuntimeError, match="The shape of the 2D attn_mask is \\[4, 4\\], but should be \\(4, 5\\)"):
        layer(q, munet.zeros(S, N, E), munet.zeros(S, N, E), attn_mask=munet.zeros(L, L))
    with pytest.raises(TypeError, match="only bool and floating types of attn_mask are supported"):
        layer(q, q, q, attn_mask=munet.zeros(L, L, dtype=munet.int64))
    with pytest.raises(RuntimeError, match="expected key_padding_mask of shape \\(3, 4\\)"):
        layer(q, q, q, key_padding_mask=munet.zeros(N, 2, dtype=munet.bool))
    with pytest.raises(RuntimeError, match="was expecting embedding dimension of 8, but got 5"):
        layer(munet.zeros(L, N, 5), q, q)
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask is deprecated"):
        layer(q, q, q, key_padding_mask=munet.zeros(N, L, dtype=munet.bool), attn_mask=munet.zeros(L, L))
