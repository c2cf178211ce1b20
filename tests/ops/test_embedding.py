"""Embedding and one_hot (munet/ops/embedding.py) against PyTorch."""

import numpy as np
import pytest
import torch.nn.functional as TF

import munet
import munet.nn.functional as F
from tests.reference import assert_close, check, noncontiguous, randn, to_torch

IDX = np.array([[0, 2, 4], [4, 3, 2]], dtype=np.int64)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("idx", [IDX, IDX[0], np.array(3), np.zeros((0, 2), dtype=np.int64), IDX.astype(np.int32)])
def test_embedding_forward_and_grad(idx, dtype):
    w = randn(6, 4, dtype=dtype)
    check(lambda i, w: F.embedding(i, w), lambda i, w: TF.embedding(i, w), idx, w)
    check(lambda i, w: F.embedding(i, w), lambda i, w: TF.embedding(i, w), idx, noncontiguous(w))


@pytest.mark.parametrize("padding_idx", [2, -2, 0])
def test_embedding_padding_idx_gets_no_gradient(padding_idx):
    w = randn(6, 4, dtype="float64")
    check(lambda i, w: F.embedding(i, w, padding_idx), lambda i, w: TF.embedding(i, w, padding_idx), IDX, w)
    m_w = munet.tensor(w, requires_grad=True)
    F.embedding(munet.tensor(IDX), m_w, padding_idx).sum().backward()
    assert not np.any(m_w.grad.numpy()[padding_idx % 6])


def test_embedding_scale_grad_by_freq():
    w = randn(6, 4, dtype="float64")
    check(
        lambda i, w: F.embedding(i, w, scale_grad_by_freq=True),
        lambda i, w: TF.embedding(i, w, scale_grad_by_freq=True),
        IDX,
        w,
    )
    check(
        lambda i, w: F.embedding(i, w, 4, scale_grad_by_freq=True),
        lambda i, w: TF.embedding(i, w, 4, scale_grad_by_freq=True),
        IDX,
        w,
    )


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_renormalizes_weight_in_place(norm_type):
    w = randn(6, 4, dtype="float64") * 3
    m_w, t_w = munet.tensor(w, requires_grad=True), to_torch(w).requires_grad_(True)
    m_out = F.embedding(munet.tensor(IDX), m_w, max_norm=1.5, norm_type=norm_type)
    t_out = TF.embedding(to_torch(IDX), t_w, max_norm=1.5, norm_type=norm_type)
    assert_close(m_out, t_out)
    assert_close(m_w, t_w.detach(), what="renormalized weight")
    np.testing.assert_array_equal(m_w.detach().numpy()[1], w[1])  # rows not looked up are untouched
    assert not np.allclose(m_w.detach().numpy()[4], w[4])
    g = randn(*m_out.shape, dtype="float64", seed=4)
    m_out.backward(munet.tensor(g))
    t_out.backward(to_torch(g))
    assert_close(m_w.grad, t_w.grad)


def test_embedding_double_backward():
    w = munet.tensor(randn(5, 3, dtype="float64"), requires_grad=True)
    i = munet.tensor(np.array([0, 1, 1, 3]))
    up = munet.tensor(randn(4, 3, dtype="float64", seed=2), requires_grad=True)
    (gw,) = munet.autograd.grad(F.embedding(i, w, padding_idx=1), w, up, create_graph=True)
    v = munet.tensor(randn(5, 3, dtype="float64", seed=3))
    (gup,) = munet.autograd.grad((gw * v).sum(), up)
    expected = v.numpy()[[0, 1, 1, 3]] * np.array([1, 0, 0, 1.0])[:, None]
    np.testing.assert_allclose(gup.numpy(), expected)


def test_embedding_errors():
    w = munet.zeros(5, 3)
    with pytest.raises(RuntimeError, match="embedding: expected indices of dtype int64 or int32, got float32"):
        F.embedding(munet.zeros(2), w)
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(munet.tensor([0, 5]), w)
    with pytest.raises(ValueError, match=r"embedding: padding_idx must be within num_embeddings \(5\), got 7"):
        F.embedding(munet.tensor([0]), w, padding_idx=7)


# one_hot ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [[0, 3, 1], [[1, 0], [2, 2]], 2])
@pytest.mark.parametrize("num_classes", [-1, 5])
def test_one_hot(values, num_classes):
    t = np.array(values, dtype=np.int64)
    check(lambda t: F.one_hot(t, num_classes), lambda t: TF.one_hot(t, num_classes), t, grad=False)


def test_one_hot_empty_and_errors():
    check(lambda t: F.one_hot(t, 3), lambda t: TF.one_hot(t, 3), np.zeros((0,), dtype=np.int64), grad=False)
    with pytest.raises(RuntimeError, match="can not infer total number of classes from empty tensor"):
        F.one_hot(munet.zeros(0, dtype=munet.int64))
    with pytest.raises(RuntimeError, match="class values must be non-negative"):
        F.one_hot(munet.tensor([-1, 2]))
    with pytest.raises(RuntimeError, match=r"class values must be smaller than num_classes \(2\)"):
        F.one_hot(munet.tensor([0, 2]), 2)
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor of type LongTensor"):
        F.one_hot(munet.tensor([0, 2], dtype=munet.int32))
    out = F.one_hot(munet.tensor([1, 0]))
    assert out.dtype is munet.int64 and not out.requires_grad


def test_functional_embedding_bag_matches_pytorch():
    import numpy as np
    import torch

    import munet
    import munet.nn.functional as F
    from tests.reference import assert_close

    rng = np.random.default_rng(0)
    w = rng.standard_normal((10, 4)).astype(np.float32)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = np.array([0, 3, 3, 6])
    for mode in ("sum", "mean", "max"):
        mw, tw = munet.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
        m = F.embedding_bag(munet.tensor(idx), mw, munet.tensor(offsets), mode=mode)
        t = torch.nn.functional.embedding_bag(torch.tensor(idx), tw, torch.tensor(offsets), mode=mode)
        assert_close(m, t)
        m.sum().backward()
        t.sum().backward()
        assert_close(mw.grad, tw.grad)
