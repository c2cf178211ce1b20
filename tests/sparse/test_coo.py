"""Sparse COO tensors (munet/sparse/coo.py) against torch.sparse_coo: construction, coalescing with
duplicate indices, dense round trips, the supported arithmetic, and the errors of everything else."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close

# 2 sparse dims over a (4, 5) grid with repeats: (1, 2) three times, (0, 4) twice
INDICES = np.array([[1, 0, 1, 3, 0, 1], [2, 4, 2, 0, 4, 2]], dtype=np.int64)


def _pair(dense_shape=(), size=(4, 5), indices=INDICES, seed=0):
    values = np.random.default_rng(seed).standard_normal((indices.shape[1], *dense_shape)).astype(np.float32)
    full = (*size, *dense_shape)
    m = munet.sparse_coo_tensor(munet.tensor(indices), munet.tensor(values), full)
    t = torch.sparse_coo_tensor(torch.tensor(indices), torch.tensor(values), full)
    return m, t


def _assert_same_sum(m, t, what="sum"):
    """The same sparse tensor up to its uncoalesced entries: MuNet's sum of uncoalesced tensors
    concatenates them, PyTorch's CPU kernel merges runs of equal indices when the values are
    contiguous (so its nnz can be smaller); the flag, coalesced form and dense form are the same."""
    assert m.is_coalesced() == t.is_coalesced(), what
    _assert_same_sparse(m.coalesce(), t.coalesce(), what)
    assert_close(m.to_dense(), t.to_dense(), what=f"{what} dense")


def _assert_same_sparse(m, t, what="sparse"):
    assert m.is_sparse and m.layout is munet.sparse_coo
    assert tuple(m.shape) == tuple(t.shape), what
    assert (m.sparse_dim(), m.dense_dim(), m._nnz()) == (t.sparse_dim(), t.dense_dim(), t._nnz()), what
    assert m.is_coalesced() == t.is_coalesced(), what
    assert_close(m._indices(), t._indices(), what=f"{what} indices")
    assert_close(m._values(), t._values(), what=f"{what} values")


@pytest.mark.parametrize("dense_shape", [(), (3,), (2, 3)])
def test_construction_coalesce_and_dense_match_torch(dense_shape):
    m, t = _pair(dense_shape)
    _assert_same_sparse(m, t, "constructed")
    assert not m.is_coalesced()
    mc, tc = m.coalesce(), t.coalesce()
    _assert_same_sparse(mc, tc, "coalesced")  # sorted, unique, duplicates' values summed
    assert_close(mc.indices(), tc.indices())
    assert_close(mc.values(), tc.values())
    assert mc.coalesce() is mc
    assert_close(m.to_dense(), t.to_dense())
    assert_close(mc.to_dense(), t.to_dense())


def test_inferred_size_defaults_and_dtype_device():
    m = munet.sparse_coo_tensor(INDICES.tolist(), [1, 2, 3, 4, 5, 6])
    t = torch.sparse_coo_tensor(INDICES.tolist(), [1, 2, 3, 4, 5, 6])
    _assert_same_sparse(m, t)
    m = munet.sparse_coo_tensor(INDICES, np.ones(6), (4, 5), dtype=munet.float32, device="cpu")
    assert m.dtype is munet.float32 and m.device == munet.device("cpu")
    # a single entry (or none) is coalesced from the start, as in PyTorch
    for nnz in (0, 1):
        m = munet.sparse_coo_tensor(munet.zeros((1, nnz), dtype=munet.int64), munet.ones(nnz), (3,))
        t = torch.sparse_coo_tensor(torch.zeros((1, nnz), dtype=torch.int64), torch.ones(nnz), (3,))
        _assert_same_sparse(m, t, f"nnz={nnz}")


@pytest.mark.parametrize("shape, sparse_dim", [((4, 5), None), ((4, 5), 1), ((3, 4, 2), 2), ((6,), None)])
def test_dense_to_sparse_roundtrip(shape, sparse_dim):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(shape) * (rng.random(shape) < 0.4)).astype(np.float32)
    if len(shape) > 1:
        a[0] = 0  # an all-zero row: left out with sparse_dim=1 too
    m = munet.tensor(a).to_sparse() if sparse_dim is None else munet.tensor(a).to_sparse(sparse_dim)
    t = torch.tensor(a).to_sparse() if sparse_dim is None else torch.tensor(a).to_sparse(sparse_dim)
    _assert_same_sparse(m, t)
    assert_close(m.to_dense(), torch.tensor(a))
    _assert_same_sparse(munet.tensor(a).to_sparse_coo(), torch.tensor(a).to_sparse_coo())
    dense = munet.tensor(a)
    assert dense.to_dense() is dense


def test_addition_accumulates_as_torch():
    m1, t1 = _pair((3,), seed=1)
    m2, t2 = _pair((3,), indices=np.array([[2, 1], [1, 2]]), seed=2)
    _assert_same_sum(m1 + m2, t1 + t2, "uncoalesced sum")
    _assert_same_sparse(m1.coalesce() + m2.coalesce(), t1.coalesce() + t2.coalesce(), "coalesced sum")
    _assert_same_sum(m1.add(m2, alpha=0.5), t1.add(t2, alpha=0.5), "alpha")
    assert_close((m1 - m2).to_dense(), (t1 - t2).to_dense())
    dense = np.random.default_rng(4).standard_normal((4, 5, 3)).astype(np.float32)
    md, td = munet.tensor(dense), torch.tensor(dense)
    assert_close(md + m1, td + t1)
    assert_close(munet.add(md, m1, alpha=2.0), torch.add(td, t1, alpha=2.0))
    assert_close(md - m1, td - t1)
    md.add_(m1, alpha=-0.5)
    td.add_(t1, alpha=-0.5)
    assert_close(md, td)
    md += m2
    td += t2
    assert_close(md, td)
    md.sub_(m2)
    td.sub_(t2)
    assert_close(md, td)
    acc_m, acc_t = m1.clone(), t1.clone()
    acc_m.add_(m2)
    acc_t.add_(t2)
    _assert_same_sum(acc_m, acc_t, "add_")
    _assert_same_sparse(m1, t1, "add_ leaves the original")
    for a, b in ((m1, md), (t1, td)):
        with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
            a + b
        with pytest.raises(RuntimeError, match="same size"):
            b[:2] + a


def test_scalar_multiplication_zero_clone_detach():
    m, t = _pair((2,))
    _assert_same_sparse(m * 3.0, t * 3.0)
    _assert_same_sparse(2 * m, 2 * t)
    _assert_same_sparse(m / 4.0, t / 4.0)
    _assert_same_sparse(-m, -t)
    _assert_same_sparse(m * munet.tensor(0.5), t * torch.tensor(0.5))
    c_m, c_t = m.clone(), t.clone()
    c_m.mul_(munet.tensor(-2.0))
    c_t.mul_(torch.tensor(-2.0))
    _assert_same_sparse(c_m, c_t, "mul_")
    _assert_same_sparse(m, t, "clone is a copy")
    version = c_m._version
    c_m.div_(2.0)
    assert c_m._version == version + 1  # in-place writes bump the version, as a dense tensor's
    d = m.detach()
    assert d._values() is m._values()
    z_m, z_t = m.clone().zero_(), t.clone().zero_()
    _assert_same_sparse(z_m, z_t, "zero_")
    assert_close(z_m.to_dense(), z_t.to_dense())
    _assert_same_sparse(copy.deepcopy(m), t)
    _assert_same_sparse(pickle.loads(pickle.dumps(m)), t)
    with pytest.raises(RuntimeError, match="number or a 0-d"):
        m * munet.ones(2)


def test_values_of_uncoalesced_raise_and_dense_queries_raise_as_torch():
    m, t = _pair()
    for lib_tensor in (m, t):
        with pytest.raises(RuntimeError, match="uncoalesced tensor, please call .coalesce"):
            lib_tensor.values()
        with pytest.raises(RuntimeError, match="uncoalesced tensor, please call .coalesce"):
            lib_tensor.indices()
    dense_m, dense_t = munet.ones(2, 3), torch.ones(2, 3)
    for name in ("indices", "values", "coalesce", "is_coalesced"):
        for d in (dense_m, dense_t):
            with pytest.raises(
                RuntimeError, match=f"{name} expected sparse (coordinate )?tensor layout but got Strided"
            ):
                getattr(d, name)()
    for name in ("_indices", "_values", "_nnz"):  # PyTorch: NotImplementedError from its dispatcher
        with pytest.raises(RuntimeError, match="expected sparse coordinate tensor layout but got Strided"):
            getattr(dense_m, name)()
    assert (dense_m.sparse_dim(), dense_m.dense_dim()) == (dense_t.sparse_dim(), dense_t.dense_dim())
    assert not dense_m.is_sparse and dense_m.layout is munet.strided


def test_dense_ops_on_a_sparse_tensor_raise_naming_the_op():
    m, t = _pair((3,))
    for fn, name in [
        (lambda: munet.exp(m), "exp"),
        (lambda: m.reshape(-1), None),
        (lambda: munet.ones(4, 5, 3).mul_(m), "mul"),
        (lambda: munet.where(munet.ones(4, 5, 3) > 0, m, 0.0), "where"),
        (lambda: munet.matmul(m, munet.ones(3, 2)), None),
        (lambda: m[0], None),
    ]:
        with pytest.raises(RuntimeError, match="not supported on a sparse COO tensor") as info:
            fn()
        if name is not None:
            assert str(info.value).startswith(f"{name}: not supported on a sparse COO tensor"), str(info.value)
    with pytest.raises(RuntimeError, match="number or a 0-d dense tensor"):
        munet.ones(4, 5, 3) * m
    with pytest.raises(RuntimeError, match="keepdim=True is not supported"):
        m.sum(1, keepdim=True)
    with pytest.raises(RuntimeError, match="not supported on a sparse COO tensor"):
        m.numpy()
    assert m.stride() == t.stride() and m.is_contiguous() == t.is_contiguous()  # PyTorch's answers
    with pytest.raises(RuntimeError, match="carry no autograd history"):
        m.requires_grad_()
    with pytest.raises(RuntimeError, match="carry no autograd history"):
        munet.sparse_coo_tensor(INDICES, munet.ones(6), (4, 5), requires_grad=True)


def test_construction_errors_match_torch():
    cases = [
        ((INDICES, np.ones(5, np.float32), (4, 5)), "indices and values must have same nnz"),
        ((INDICES, np.ones((6, 2), np.float32), (4, 5)), "'len.size. == sparse_dim \\+ dense_dim' is not satisfied"),
        ((INDICES, np.ones((6, 2), np.float32), (4, 5, 3)), "values has incorrect size"),
    ]
    for (i, v, size), message in cases:
        for lib in (munet, torch):
            with pytest.raises(RuntimeError, match=message):
                lib.sparse_coo_tensor(lib.tensor(i), lib.tensor(v), size)
    with pytest.raises(RuntimeError, match="indices must be sparse_dim x nnz"):  # PyTorch reads 1-d indices otherwise
        munet.sparse_coo_tensor(munet.tensor(INDICES[0]), munet.ones(6), (4, 5))
    for lib in (munet, torch):
        with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
            lib.sparse_coo_tensor(lib.tensor(INDICES), lib.ones(6), (2, 5), check_invariants=True)
        with pytest.raises(RuntimeError, match="found negative index"):
            lib.sparse_coo_tensor(lib.tensor([[0, -1]]), lib.ones(2), (3,), check_invariants=True)


def test_sparse_mask_mm_and_sum_match_torch():
    m, t = _pair((3,))
    dense = np.random.default_rng(5).standard_normal((4, 5, 3)).astype(np.float32)
    _assert_same_sparse(munet.tensor(dense).sparse_mask(m.coalesce()), torch.tensor(dense).sparse_mask(t.coalesce()))
    m2, t2 = _pair()
    rhs = np.random.default_rng(6).standard_normal((5, 2)).astype(np.float32)
    m_rhs, t_rhs = munet.tensor(rhs, requires_grad=True), torch.tensor(rhs, requires_grad=True)
    m_out, t_out = munet.sparse.mm(m2, m_rhs), torch.sparse.mm(t2, t_rhs)
    assert_close(m_out, t_out)
    m_out.sum().backward()
    t_out.sum().backward()
    assert_close(m_rhs.grad, t_rhs.grad, what="mm gradient of the dense operand")
    assert_close(munet.sparse.sum(m), torch.sparse.sum(t))
    assert_close(m.sum(), t.sum())
    assert_close(munet.sparse.sum(m, [0, 1]), torch.sparse.sum(t, [0, 1]))
    assert_close(munet.sparse.sum(m, 2).to_dense(), torch.sparse.sum(t, 2).to_dense())
    _assert_same_sparse(munet.sparse.sum(m, 0), torch.sparse.sum(t, 0).coalesce(), "partial sum")


@pytest.mark.parametrize("p", [2, 1, float("inf"), "fro"])
def test_norm_of_duplicates_matches_torch(p):
    m, t = _pair((2,))
    assert_close(m.norm(p), t.norm(p))  # duplicates summed first
    if p != float("inf"):  # no stored elements: 0 (the inf norm of nothing raises in both)
        assert_close(m.clone().zero_().norm(p), t.clone().zero_().norm(p))


def test_to_moves_dtype_and_repr():
    m, t = _pair()
    _assert_same_sparse(m.to(munet.float64), t.to(torch.float64))
    assert m.to(munet.float32) is m
    text = repr(m)
    assert "indices=" in text and "values=" in text and "nnz=6" in text and "layout=munet.sparse_coo" in text
