"""Embedding and EmbeddingBag against torch.nn: init, padding_idx, max_norm, from_pretrained,
every EmbeddingBag mode/layout, outputs and weight / per_sample_weights gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet
import munet.nn as nn
from tests.nn.layer_check import assert_same_structure, copy_state, make_pair
from tests.reference import assert_close, to_torch

IDX = np.array([[1, 2, 4, 5], [4, 3, 2, 9]], dtype=np.int64)


def _run(m, t, *args, **kwargs):
    """Forward both with the same integer/float arguments; backward a random upstream; compare."""
    m_args = [munet.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    t_args = [to_torch(a) if isinstance(a, np.ndarray) else a for a in args]
    m_kw = {k: munet.tensor(v, requires_grad=True) for k, v in kwargs.items() if v is not None}
    t_kw = {k: to_torch(v).requires_grad_(True) for k, v in kwargs.items() if v is not None}
    t_out = t(*t_args, **t_kw)
    m_out = m(*m_args, **m_kw)
    assert_close(m_out, t_out, rtol=1e-5, atol=1e-6)
    up = np.random.default_rng(1).standard_normal(tuple(t_out.shape)).astype(np.float32)
    t_out.backward(to_torch(up))
    m_out.backward(munet.tensor(up))
    if t.weight.requires_grad:
        assert_close(m.weight.grad, t.weight.grad, rtol=1e-5, atol=1e-6, what="weight grad")
    for k in t_kw:
        assert_close(m_kw[k].grad, t_kw[k].grad, rtol=1e-5, atol=1e-6, what=f"{k} grad")
    assert_close(m.weight.detach(), t.weight.detach(), what="weight after forward")
    return m_out


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"padding_idx": 2},
        {"padding_idx": -1},
        {"scale_grad_by_freq": True},
        {"max_norm": 1.0},
        {"max_norm": 0.5, "norm_type": 1.0},
    ],  # fmt: skip
    ids=str,
)
def test_embedding_matches_torch(kwargs):
    m, t = make_pair("Embedding", (10, 3), kwargs)
    assert_same_structure(m, t)
    _run(m, t, IDX)
    m, t = make_pair("Embedding", (10, 3), kwargs)
    _run(m, t, np.array([7, 7, 0, 2], dtype=np.int64))


def test_embedding_init_and_padding_row():
    layer = nn.Embedding(1000, 50, padding_idx=3)
    w = layer.weight.detach().numpy()
    assert not np.any(w[3])
    others = np.delete(w, 3, axis=0)
    assert abs(others.mean()) < 0.02 and abs(others.std() - 1) < 0.02  # N(0, 1)
    assert layer.padding_idx == 3 and nn.Embedding(10, 2, padding_idx=-2).padding_idx == 8
    with pytest.raises(ValueError, match="padding_idx must be within num_embeddings"):
        nn.Embedding(10, 2, padding_idx=10)


def test_embedding_from_pretrained():
    table = munet.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    frozen = nn.Embedding.from_pretrained(table)
    assert not frozen.weight.requires_grad
    assert frozen(munet.tensor([2])).tolist() == [[6.0, 7.0, 8.0]]
    trainable = nn.Embedding.from_pretrained(table, freeze=False, padding_idx=1)
    assert trainable.weight.requires_grad and trainable.padding_idx == 1
    assert repr(trainable) == repr(torch.nn.Embedding.from_pretrained(torch.zeros(4, 3), padding_idx=1))
    with pytest.raises(ValueError, match="2-dimensional"):
        nn.Embedding.from_pretrained(munet.zeros(3))


def test_embedding_index_errors():
    with pytest.raises(IndexError, match="out of range"):
        nn.Embedding(5, 2)(munet.tensor([5]))


FLAT = np.array([1, 2, 4, 5, 4, 3, 2, 9, 2, 0], dtype=np.int64)
OFFSETS = np.array([0, 4, 4, 7], dtype=np.int64)  # bag 1 is empty


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_2d_and_offsets_match_torch(mode, padding_idx):
    kwargs = {"mode": mode, "padding_idx": padding_idx}
    m, t = make_pair("EmbeddingBag", (10, 3), kwargs)
    assert_same_structure(m, t)
    _run(m, t, IDX)
    m, t = make_pair("EmbeddingBag", (10, 3), kwargs)
    _run(m, t, FLAT, OFFSETS)
    m, t = make_pair("EmbeddingBag", (10, 3), {**kwargs, "include_last_offset": True})
    _run(m, t, FLAT, np.array([0, 3, 3, 8, 10], dtype=np.int64))


@pytest.mark.parametrize("padding_idx", [None, 4])
def test_embedding_bag_per_sample_weights_match_torch(padding_idx):
    m, t = make_pair("EmbeddingBag", (10, 3), {"mode": "sum", "padding_idx": padding_idx})
    weights = np.random.default_rng(0).standard_normal(FLAT.shape).astype(np.float32)
    _run(m, t, FLAT, OFFSETS, per_sample_weights=weights)
    m, t = make_pair("EmbeddingBag", (10, 3), {"mode": "sum"})
    _run(m, t, IDX, per_sample_weights=np.ones(IDX.shape, dtype=np.float32) * 0.5)


def test_embedding_bag_max_norm_matches_torch():
    m, t = make_pair("EmbeddingBag", (10, 3), {"max_norm": 1.0})
    _run(m, t, FLAT, OFFSETS)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq_divides_by_index_count(mode):
    # PyTorch 2.13's CPU embedding_bag backward divides by the wrong count (pytorch/pytorch#190063,
    # fixed upstream by #190264); its CUDA kernel and the documented meaning divide each row's
    # gradient by the index's frequency in the batch, which is what torch's F.embedding does.
    # So the reference here is torch's embedding followed by the bag reduction.
    table = np.random.default_rng(2).standard_normal((10, 3)).astype(np.float32)
    bag = nn.EmbeddingBag.from_pretrained(munet.tensor(table), freeze=False, mode=mode, scale_grad_by_freq=True)
    out = bag(munet.tensor(FLAT), munet.tensor(OFFSETS))
    t_weight = to_torch(table).requires_grad_(True)
    rows = torch.nn.functional.embedding(to_torch(FLAT), t_weight, scale_grad_by_freq=True)
    bounds = list(OFFSETS) + [len(FLAT)]
    reduce = torch.sum if mode == "sum" else torch.mean
    bags = [reduce(rows[a:b], 0) if b > a else torch.zeros(3) for a, b in zip(bounds[:-1], bounds[1:])]
    expected = torch.stack(bags)
    assert_close(out, expected.detach(), rtol=1e-5, atol=1e-6)
    up = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    expected.backward(to_torch(up))
    out.backward(munet.tensor(up))
    assert_close(bag.weight.grad, t_weight.grad, rtol=1e-5, atol=1e-6, what="weight grad")


def test_embedding_bag_errors():
    bag = nn.EmbeddingBag(10, 3)
    with pytest.raises(ValueError, match="offsets has to be None"):
        bag(munet.tensor(IDX), munet.tensor([0, 1]))
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor"):
        bag(munet.tensor(FLAT))
    with pytest.raises(ValueError, match=r"offsets\[0\] has to be 0"):
        bag(munet.tensor(FLAT), munet.tensor([1, 3]))
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        bag(munet.tensor(IDX), per_sample_weights=munet.ones(2, 4))
    with pytest.raises(ValueError, match="same shape as the input"):
        nn.EmbeddingBag(10, 3, mode="sum")(munet.tensor(IDX), per_sample_weights=munet.ones(3))
    with pytest.raises(ValueError, match="mode has to be one of"):
        nn.EmbeddingBag(10, 3, mode="median")(munet.tensor(IDX))
    with pytest.raises(ValueError, match="max mode does not support"):
        nn.EmbeddingBag(10, 3, mode="max", scale_grad_by_freq=True)(munet.tensor(IDX))


def test_embedding_bag_from_pretrained_and_repr():
    table = munet.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    bag = nn.EmbeddingBag.from_pretrained(table, mode="sum")
    assert not bag.weight.requires_grad
    assert bag(munet.tensor([[0, 1]])).tolist() == [[3.0, 5.0, 7.0]]
    t_bag = torch.nn.EmbeddingBag(4, 3, mode="max", padding_idx=1, max_norm=2.0)
    m_bag = nn.EmbeddingBag(4, 3, mode="max", padding_idx=1, max_norm=2.0)
    copy_state(m_bag, t_bag)
    assert_same_structure(m_bag, t_bag)
