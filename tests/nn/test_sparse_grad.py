"""``nn.Embedding(sparse=True)``, ``F.embedding(sparse=True)`` and ``nn.EmbeddingBag(sparse=True)``:
the weight's gradient is a sparse COO tensor equal to PyTorch's (uncoalesced indices and values,
coalesced form and dense form), accumulates over backward passes as PyTorch's does, and clips."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet
import munet.nn as nn
import munet.nn.functional as F
from tests.reference import assert_close, to_torch

IDX = np.array([[1, 2, 4, 5], [4, 3, 2, 9], [1, 1, 1, 0]], dtype=np.int64)  # repeats within the batch
FLAT = np.array([1, 2, 4, 5, 4, 3, 2, 9, 2, 0], dtype=np.int64)
OFFSETS = np.array([0, 4, 4, 7], dtype=np.int64)


def _tables(rows=10, dim=3, seed=0):
    table = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return munet.tensor(table, requires_grad=True), torch.tensor(table, requires_grad=True)


def assert_same_sparse_grad(m, t, what="grad", entries=True):
    """The same sparse gradient: the same uncoalesced entries in the same order (``entries``), and the
    same coalesced and dense forms."""
    assert m.is_sparse and t.is_sparse, what
    assert tuple(m.shape) == tuple(t.shape) and m.is_coalesced() == t.is_coalesced(), what
    if entries:
        assert_close(m._indices(), t._indices(), what=f"{what} indices")
        assert_close(m._values(), t._values(), what=f"{what} values")
    mc, tc = m.coalesce(), t.coalesce()
    assert_close(mc.indices(), tc.indices(), what=f"{what} coalesced indices")
    assert_close(mc.values(), tc.values(), what=f"{what} coalesced values")
    assert_close(m.to_dense(), t.to_dense(), what=f"{what} dense")


def _upstream(shape, seed=1):
    up = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return munet.tensor(up), torch.tensor(up)


@pytest.mark.parametrize("padding_idx", [None, 1, -1])
@pytest.mark.parametrize("idx", [IDX, FLAT], ids=["2d", "1d"])
def test_embedding_sparse_grad_matches_torch(padding_idx, idx):
    mw, tw = _tables()
    m_out = F.embedding(munet.tensor(idx), mw, padding_idx=padding_idx, sparse=True)
    t_out = torch.nn.functional.embedding(torch.tensor(idx), tw, padding_idx=padding_idx, sparse=True)
    assert_close(m_out, t_out)
    mu, tu = _upstream(tuple(t_out.shape))
    m_out.backward(mu)
    t_out.backward(tu)
    assert_same_sparse_grad(mw.grad, tw.grad)


def test_module_sparse_grad_accumulates_over_two_backwards_and_zero_grad():
    m, t = nn.Embedding(10, 4, sparse=True), torch.nn.Embedding(10, 4, sparse=True)
    with torch.no_grad():
        t.weight.copy_(to_torch(m.weight))
    assert repr(m) == repr(t)
    for seed, idx in ((1, IDX), (2, FLAT)):
        m_out, t_out = m(munet.tensor(idx)), t(torch.tensor(idx))
        mu, tu = _upstream(tuple(t_out.shape), seed)
        (m_out * mu).sum().backward()
        (t_out * tu).sum().backward()
        # a second gradient is concatenated; PyTorch's CPU sum merges runs of equal indices (same dense form)
        assert_same_sparse_grad(m.weight.grad, t.weight.grad, f"after backward {seed}", entries=seed == 1)
    m.zero_grad(set_to_none=False)
    t.zero_grad(set_to_none=False)
    assert m.weight.grad.is_sparse and m.weight.grad._nnz() == t.weight.grad._nnz() == 0
    m(munet.tensor(IDX)).sum().backward()
    t(torch.tensor(IDX)).sum().backward()
    assert_same_sparse_grad(m.weight.grad, t.weight.grad, "after zero_grad")


def test_sparse_and_dense_uses_of_one_weight_sum_to_a_dense_grad():
    mw, tw = _tables()
    for lib, w in ((munet, mw), (torch, tw)):
        idx = lib.tensor(IDX)
        tied = lib.nn.functional.embedding(idx, w, sparse=True).sum() + (w * w).sum()
        tied.backward()
        again = lib.nn.functional.embedding(idx, w, sparse=True).sum()
        again.backward()  # a sparse gradient into a dense .grad
    assert not mw.grad.is_sparse and not tw.grad.is_sparse
    assert_close(mw.grad, tw.grad)


def test_sparse_grad_refusals_match_torch():
    mw, tw = _tables()
    for lib, w in ((munet, mw), (torch, tw)):
        out = lib.nn.functional.embedding(lib.tensor(IDX), w, scale_grad_by_freq=True, sparse=True)
        with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse gradients"):
            out.sum().backward()
        with pytest.raises(ValueError, match="max mode does not support sparse weights"):
            lib.nn.functional.embedding_bag(lib.tensor(IDX), w, mode="max", sparse=True)
    with pytest.raises(RuntimeError, match="cannot be differentiated again"):
        out = F.embedding(munet.tensor(IDX), mw, sparse=True)
        munet.autograd.grad(out.sum(), mw, create_graph=True)


@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_sparse_grad_matches_torch(mode, padding_idx):
    for args in ((IDX,), (FLAT, OFFSETS)):
        m = nn.EmbeddingBag(10, 3, mode=mode, sparse=True, padding_idx=padding_idx)
        t = torch.nn.EmbeddingBag(10, 3, mode=mode, sparse=True, padding_idx=padding_idx)
        with torch.no_grad():
            t.weight.copy_(to_torch(m.weight))
        m_out = m(*[munet.tensor(a) for a in args])
        t_out = t(*[torch.tensor(a) for a in args])
        assert_close(m_out, t_out, rtol=1e-5, atol=1e-6)
        mu, tu = _upstream(tuple(t_out.shape))
        m_out.backward(mu)
        t_out.backward(tu)
        assert_close(m.weight.grad.to_dense(), t.weight.grad.to_dense(), rtol=1e-5, atol=1e-6, what="dense grad")
        mc, tc = m.weight.grad.coalesce(), t.weight.grad.coalesce()
        assert_close(mc.indices(), tc.indices(), what="coalesced indices")
        assert_close(mc.values(), tc.values(), rtol=1e-5, atol=1e-6, what="coalesced values")


def test_clipping_sparse_grads_raises_as_torch_and_scaling_works():
    m, t = nn.Embedding(10, 3, sparse=True), torch.nn.Embedding(10, 3, sparse=True)
    with torch.no_grad():
        t.weight.copy_(to_torch(m.weight))
    (m(munet.tensor(IDX)) * 3).sum().backward()
    (t(torch.tensor(IDX)) * 3).sum().backward()
    # PyTorch's norms refuse sparse tensors (NotImplementedError from linalg.vector_norm and clamp_)
    with pytest.raises(NotImplementedError):
        torch.nn.utils.clip_grad_norm_(t.parameters(), 1.0)
    with pytest.raises(NotImplementedError):
        torch.nn.utils.clip_grad_value_(t.parameters(), 1.0)
    with pytest.raises(RuntimeError, match="clip_grad_norm_: sparse gradients are not supported"):
        munet.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    with pytest.raises(RuntimeError, match="clamp.*not supported on a sparse COO tensor"):
        munet.nn.utils.clip_grad_value_(m.parameters(), 1.0)
    # what PyTorch users do instead: scale the gradient by a 0-d coefficient, as clip_grads_with_norm_ does
    total = m.weight.grad.coalesce()._values().norm()
    munet.nn.utils.clip_grads_with_norm_(m.parameters(), 1.0, total)
    t_total = t.weight.grad.coalesce()._values().norm()
    torch.nn.utils.clip_grads_with_norm_(t.parameters(), 1.0, t_total)
    assert_same_sparse_grad(m.weight.grad, t.weight.grad, "scaled")


def test_grad_scaler_unscales_and_checks_sparse_grads_as_torch():
    m, t = nn.Embedding(10, 3, sparse=True), torch.nn.Embedding(10, 3, sparse=True)
    with torch.no_grad():
        t.weight.copy_(to_torch(m.weight))
    runs = [
        (m, munet, munet.optim.SGD(m.parameters(), lr=0.1), munet.amp.GradScaler("cpu", init_scale=64.0)),
        (t, torch, torch.optim.SGD(t.parameters(), lr=0.1), torch.amp.GradScaler("cpu", init_scale=64.0)),
    ]
    for step, idx in enumerate((IDX, FLAT, IDX)):
        for layer, lib, opt, scaler in runs:
            opt.zero_grad()
            loss = layer(lib.tensor(idx)).sum() * (float("inf") if step == 1 else 1.0)  # step 1 is skipped
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        assert runs[0][3].get_scale() == runs[1][3].get_scale()
        assert_close(m.weight, t.weight.detach(), what=f"weight after step {step}")
