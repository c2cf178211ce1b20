"""nn.utils.rnn (padding, packing) and packed sequences through RNN/LSTM/GRU, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.utils import rnn as trnn

import munet
from munet import nn
from munet.nn.utils import rnn as mrnn
from tests.reference import assert_close, noncontiguous, randn

LENGTHS = [4, 6, 1, 6, 3]  # unsorted, with a tie


def _sequences(lengths, features=3, seed=0, contiguous=True):
    arrays = [randn(n, features, seed=seed + i) for i, n in enumerate(lengths)]
    if not contiguous:
        arrays = [noncontiguous(a) for a in arrays]
    m = [munet.tensor(a, requires_grad=True) for a in arrays]
    t = [torch.tensor(np.ascontiguousarray(a), requires_grad=True) for a in arrays]
    return m, t


def _backward_both(m_out, t_out, seed=7):
    weights = np.random.default_rng(seed).standard_normal(tuple(t_out.shape)).astype(np.float32)
    (m_out * munet.tensor(weights)).sum().backward()
    (t_out * torch.tensor(weights)).sum().backward()


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("contiguous", [True, False])
def test_pad_sequence(batch_first, padding_side, contiguous):
    m, t = _sequences(LENGTHS, contiguous=contiguous)
    kwargs = dict(batch_first=batch_first, padding_value=-2.5, padding_side=padding_side)
    m_out, t_out = mrnn.pad_sequence(m, **kwargs), trnn.pad_sequence(t, **kwargs)
    assert_close(m_out, t_out)
    _backward_both(m_out, t_out)
    for a, b in zip(m, t):
        assert_close(a.grad, b.grad, what="grad")


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths", [LENGTHS, [5, 3, 3, 1], [2]], ids=str)
def test_pack_then_pad_round_trip(batch_first, lengths):
    m, t = _sequences(lengths)
    enforce_sorted = lengths == sorted(lengths, reverse=True)
    m_pad = mrnn.pad_sequence(m, batch_first=batch_first)
    t_pad = trnn.pad_sequence(t, batch_first=batch_first)
    m_pack = mrnn.pack_padded_sequence(m_pad, munet.tensor(lengths), batch_first, enforce_sorted)
    t_pack = trnn.pack_padded_sequence(t_pad, torch.tensor(lengths), batch_first, enforce_sorted)
    assert m_pack.batch_sizes.tolist() == t_pack.batch_sizes.tolist()
    assert m_pack.batch_sizes.dtype == munet.int64
    assert (m_pack.sorted_indices is None) == (t_pack.sorted_indices is None)
    if len(set(lengths)) == len(lengths):  # PyTorch orders ties as its unstable sort leaves them
        assert_close(m_pack.data, t_pack.data)
    if not enforce_sorted and len(set(lengths)) == len(lengths):
        assert m_pack.sorted_indices.tolist() == t_pack.sorted_indices.tolist()
        assert m_pack.unsorted_indices.tolist() == t_pack.unsorted_indices.tolist()
    kwargs = dict(batch_first=batch_first, padding_value=0.5, total_length=max(lengths) + 1)
    (m_out, m_len), (t_out, t_len) = (
        mrnn.pad_packed_sequence(m_pack, **kwargs),
        trnn.pad_packed_sequence(t_pack, **kwargs),
    )
    assert_close(m_out, t_out)
    assert m_len.tolist() == t_len.tolist()
    _backward_both(m_out, t_out)
    for a, b in zip(m, t):
        assert_close(a.grad, b.grad, what="grad")


def test_pack_sequence_and_unpack():
    m, t = _sequences(LENGTHS)
    m_pack, t_pack = mrnn.pack_sequence(m, enforce_sorted=False), trnn.pack_sequence(t, enforce_sorted=False)
    assert m_pack.batch_sizes.tolist() == t_pack.batch_sizes.tolist()
    for a, b in zip(mrnn.unpack_sequence(m_pack), trnn.unpack_sequence(t_pack)):
        assert_close(a, b)
    padded = mrnn.pad_sequence(m, batch_first=True)
    for a, b in zip(mrnn.unpad_sequence(padded, LENGTHS, batch_first=True), m):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_errors_match_pytorch():
    m, _ = _sequences(LENGTHS)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        mrnn.pack_sequence(m)
    with pytest.raises(RuntimeError, match="has to be greater than 0"):
        mrnn.pack_padded_sequence(munet.zeros(3, 2, 1), [3, 0])
    pack = mrnn.pack_sequence(m, enforce_sorted=False)
    with pytest.raises(ValueError, match="total_length to be at least"):
        mrnn.pad_packed_sequence(pack, total_length=2)
    with pytest.raises(ValueError, match="padding_side"):
        mrnn.pad_sequence(m, padding_side="middle")


def test_packed_sequence_fields_and_to():
    m, _ = _sequences([3, 2])
    pack = mrnn.pack_sequence(m)
    data, batch_sizes, sorted_indices, unsorted_indices = pack
    assert pack.data is data and sorted_indices is None and unsorted_indices is None
    double = pack.to(munet.float64)
    assert double.data.dtype == munet.float64 and double.batch_sizes is batch_sizes
    assert pack.to(munet.float32) is pack
    assert mrnn.PackedSequence((data, batch_sizes, None, None)).data is data
    assert mrnn.PackedSequence(data, batch_sizes, munet.tensor([1, 0])).unsorted_indices.tolist() == [1, 0]


def _pair(name, *args, **kwargs):
    torch.manual_seed(0)
    t_layer = getattr(torch.nn, name)(*args, **kwargs)
    m_layer = getattr(nn, name)(*args, **kwargs)
    m_layer.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in t_layer.state_dict().items()})
    return m_layer, t_layer


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [x for item in out for x in _flat(item)]
    return [out]


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize(
    "config",
    [{}, {"num_layers": 2, "bidirectional": True}, {"proj_size": 2}, {"batch_first": True, "bidirectional": True}],
    ids=str,
)
@pytest.mark.parametrize("lengths", [LENGTHS, [5, 3, 3, 1], [1]], ids=str)
@pytest.mark.parametrize("with_h0", [False, True])
def test_packed_sequence_through_recurrent_layers(name, config, lengths, with_h0):
    if "proj_size" in config and name != "LSTM":
        pytest.skip("proj_size is LSTM's")
    m_layer, t_layer = _pair(name, 3, 5, **config)
    m, t = _sequences(lengths)
    enforce_sorted = lengths == sorted(lengths, reverse=True)
    m_pack, t_pack = mrnn.pack_sequence(m, enforce_sorted), trnn.pack_sequence(t, enforce_sorted)
    layers = config.get("num_layers", 1) * (2 if config.get("bidirectional") else 1)
    m_hx = t_hx = None
    if with_h0:
        sizes = [config.get("proj_size", 0) or 5] + ([5] if name == "LSTM" else [])
        arrays = [randn(layers, len(lengths), size, seed=20 + i) for i, size in enumerate(sizes)]
        m_h = [munet.tensor(a, requires_grad=True) for a in arrays]
        t_h = [torch.tensor(a, requires_grad=True) for a in arrays]
        m_hx, t_hx = (tuple(m_h), tuple(t_h)) if name == "LSTM" else (m_h[0], t_h[0])
        m.extend(m_h)
        t.extend(t_h)
    m_out, m_hidden = m_layer(m_pack, m_hx)
    t_out, t_hidden = t_layer(t_pack, t_hx)
    assert isinstance(m_out, mrnn.PackedSequence)
    assert m_out.batch_sizes.tolist() == t_out.batch_sizes.tolist()
    m_padded, m_len = mrnn.pad_packed_sequence(m_out, batch_first=config.get("batch_first", False))
    t_padded, t_len = trnn.pad_packed_sequence(t_out, batch_first=config.get("batch_first", False))
    assert m_len.tolist() == t_len.tolist()
    m_results, t_results = [m_padded, *_flat(m_hidden)], [t_padded, *_flat(t_hidden)]
    for a, b in zip(m_results, t_results):
        assert_close(a, b, rtol=1e-5, atol=1e-6)
    rng = np.random.default_rng(3)
    weights = [rng.standard_normal(tuple(b.shape)).astype(np.float32) for b in t_results]
    sum((a * munet.tensor(w)).sum() for a, w in zip(m_results, weights)).backward()
    sum((b * torch.tensor(w)).sum() for b, w in zip(t_results, weights)).backward()
    for a, b in zip(m, t):
        assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6, what="input grad")
    t_params = dict(t_layer.named_parameters())
    for key, p in m_layer.named_parameters():
        assert_close(p.grad, t_params[key].grad, rtol=1e-5, atol=1e-6, what=f"grad of {key}")
