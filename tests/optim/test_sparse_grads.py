"""Optimizers given sparse gradients (``nn.Embedding(sparse=True)``), stepped side by side with
PyTorch's over several steps with indices repeated in each batch: SparseAdam, SGD (with and without
momentum, Nesterov, maximize) and Adagrad follow PyTorch's trajectories within float32 tolerance, and
the others refuse a sparse gradient with PyTorch's error."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import munet
from tests.reference import assert_close, to_torch

BATCHES = [
    np.array([[1, 2, 2, 7], [7, 7, 0, 2]], dtype=np.int64),
    np.array([[3, 3, 3, 1]], dtype=np.int64),
    np.array([[9, 1, 2, 2], [0, 0, 5, 1]], dtype=np.int64),
    np.array([[2, 8, 2, 4]], dtype=np.int64),
    np.array([[1, 2, 2, 7], [6, 6, 6, 6]], dtype=np.int64),
]


def _pair(rows=12, dim=3, seed=0):  # rows 10 and 11 are never looked up
    m = munet.nn.Embedding(rows, dim, sparse=True)
    t = torch.nn.Embedding(rows, dim, sparse=True)
    table = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    with munet.no_grad():
        m.weight.copy_(munet.tensor(table))
    with torch.no_grad():
        t.weight.copy_(torch.tensor(table))
    return m, t


def _loss(layer, lib, idx, seed):
    target = np.random.default_rng(seed).standard_normal((*idx.shape, layer.embedding_dim)).astype(np.float32)
    return ((layer(lib.tensor(idx)) - lib.tensor(target)) ** 2).sum()


def _train_side_by_side(name, kwargs, batches=BATCHES, extra_dense=False):
    m, t = _pair()
    m_params, t_params = [m.weight], [t.weight]
    if extra_dense:  # a dense parameter in the same optimizer
        bias = np.arange(3, dtype=np.float32)
        m_bias, t_bias = munet.tensor(bias, requires_grad=True), torch.tensor(bias, requires_grad=True)
        m_params.append(m_bias)
        t_params.append(t_bias)
    m_opt = getattr(munet.optim, name)(m_params, **kwargs)
    t_opt = getattr(torch.optim, name)(t_params, **kwargs)
    for step, idx in enumerate(batches):
        m_opt.zero_grad()
        t_opt.zero_grad()
        m_loss, t_loss = _loss(m, munet, idx, step), _loss(t, torch, idx, step)
        if extra_dense:
            m_loss = m_loss + (m_bias**2).sum()
            t_loss = t_loss + (t_bias**2).sum()
        m_loss.backward()
        t_loss.backward()
        assert m.weight.grad.is_sparse
        m_opt.step()
        t_opt.step()
        assert_close(m.weight, t.weight.detach(), what=f"{name} weight after step {step + 1}")
    return m, t, m_opt, t_opt


@pytest.mark.parametrize(
    "kwargs",
    [dict(lr=0.1), dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6), dict(lr=0.1, maximize=True)],
    ids=str,
)
def test_sparse_adam_trajectory_matches_torch(kwargs):
    m, t, m_opt, t_opt = _train_side_by_side("SparseAdam", kwargs)
    m_state, t_state = m_opt.state[m.weight], t_opt.state[t.weight]
    assert m_state["step"] == t_state["step"] == len(BATCHES)
    # the moments moved only at rows some batch looked up
    for key in ("exp_avg", "exp_avg_sq"):
        assert_close(m_state[key], t_state[key], what=key)
    untouched = sorted(set(range(12)) - set(np.concatenate([b.reshape(-1) for b in BATCHES]).tolist()))
    assert untouched and not m_state["exp_avg"][untouched].abs().sum().item()


def test_sparse_adam_refuses_dense_and_sparse_params():
    m, _ = _pair()
    p = munet.nn.Parameter(munet.ones(2))
    opt = munet.optim.SparseAdam([m.weight, p], lr=0.1)
    m(munet.tensor(BATCHES[0])).sum().backward()
    p.grad = munet.ones(2)
    before = m.weight.detach().clone()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        opt.step()
    assert_close(m.weight.detach(), to_torch(before), what="no parameter moved before the error")
    s = munet.ones(2, 2).to_sparse()
    for lib, param in ((munet, s), (torch, torch.ones(2, 2).to_sparse())):
        with pytest.raises(ValueError, match="SparseAdam requires dense parameter tensors"):
            lib.optim.SparseAdam([param])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(lr=0.1),
        dict(lr=0.1, maximize=True),
        dict(lr=0.05, momentum=0.9),
        dict(lr=0.05, momentum=0.9, dampening=0.3),
        dict(lr=0.05, momentum=0.8, nesterov=True),
    ],
    ids=str,
)
def test_sgd_trajectory_with_sparse_grads_matches_torch(kwargs):
    m, t, m_opt, t_opt = _train_side_by_side("SGD", kwargs, extra_dense=True)
    if kwargs.get("momentum"):
        m_buf, t_buf = m_opt.state[m.weight]["momentum_buffer"], t_opt.state[t.weight]["momentum_buffer"]
        assert m_buf.is_sparse and t_buf.is_sparse
        assert_close(m_buf.to_dense(), t_buf.to_dense(), what="momentum buffer")


def test_sgd_weight_decay_with_sparse_grads_raises_as_torch():
    for lib in (munet, torch):
        layer = lib.nn.Embedding(5, 2, sparse=True)
        opt = lib.optim.SGD(layer.parameters(), lr=0.1, weight_decay=0.01)
        layer(lib.tensor([1, 1, 3])).sum().backward()
        with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
            opt.step()


@pytest.mark.parametrize(
    "kwargs",
    [dict(lr=0.1), dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.2), dict(lr=0.1, eps=1e-3, maximize=True)],
    ids=str,
)
def test_adagrad_trajectory_with_sparse_grads_matches_torch(kwargs):
    m, t, m_opt, t_opt = _train_side_by_side("Adagrad", kwargs, extra_dense=True)
    assert_close(m_opt.state[m.weight]["sum"], t_opt.state[t.weight]["sum"], what="accumulator")


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("Adagrad", dict(weight_decay=0.1), "weight_decay option is not compatible with sparse gradients"),
        ("Adam", {}, "Adam does not support sparse gradients, please consider SparseAdam instead"),
        ("AdamW", {}, "Adam does not support sparse gradients, please consider SparseAdam instead"),
        ("RMSprop", {}, "RMSprop does not support sparse gradients"),
        ("Adadelta", {}, "Adadelta does not support sparse gradients"),
        ("Adamax", {}, "Adamax does not support sparse gradients"),
        ("NAdam", {}, "NAdam does not support sparse gradients"),
        ("RAdam", {}, "RAdam does not support sparse gradients"),
        ("Rprop", {}, "Rprop does not support sparse gradients"),
        ("ASGD", {}, "ASGD does not support sparse gradients"),
        ("Adafactor", {}, "Adafactor does not support sparse gradients"),
    ],
)
def test_optimizers_without_sparse_support_raise_torchs_error(name, kwargs, message):
    for lib in (munet, torch):
        layer = lib.nn.Embedding(5, 2, sparse=True)
        opt = getattr(lib.optim, name)(layer.parameters(), **kwargs)
        layer(lib.tensor([1, 1, 3])).sum().backward()
        with pytest.raises(RuntimeError, match=message):
            opt.step()


def test_hand_written_sgd_step_with_sparse_grad_matches_torch():
    m, t = _pair()
    for layer, lib in ((m, munet), (t, torch)):
        _loss(layer, lib, BATCHES[0], 0).backward()
        with lib.no_grad():
            layer.weight.add_(layer.weight.grad, alpha=-0.1)
            layer.weight.data.sub_(0.05 * layer.weight.grad)
    assert_close(m.weight, t.weight.detach())


def test_lbfgs_takes_a_sparse_gradient_densely_as_torch():
    m, t = _pair()
    m_opt = munet.optim.LBFGS([m.weight], lr=0.5, max_iter=3)
    t_opt = torch.optim.LBFGS([t.weight], lr=0.5, max_iter=3)

    def closure(layer, lib, opt):
        def run():
            opt.zero_grad()
            loss = _loss(layer, lib, BATCHES[0], 0)
            loss.backward()
            return loss

        return run

    m_opt.step(closure(m, munet, m_opt))
    t_opt.step(closure(t, torch, t_opt))
    assert_close(m.weight, t.weight.detach())
