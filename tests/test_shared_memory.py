"""``Tensor.share_memory_()``: the storage moves to a shared-memory segment that forked children
and processes reached through ``multiprocessing`` (spawn) write into, as PyTorch's; plain pickling
still copies the values."""

import multiprocessing as mp
import pickle

import numpy as np
import pytest
import torch

import munet


def _add_one(t):
    t.add_(1)


def _fill_from_queue(queue, done):
    t = queue.get()
    t.fill_(7.0)
    done.put(t.is_shared())


def test_share_memory_keeps_values_and_is_idempotent():
    m, t = munet.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    assert not m.is_shared() and not t.is_shared()
    assert m.share_memory_() is m and t.share_memory_() is t
    assert m.is_shared() and t.is_shared()
    np.testing.assert_array_equal(m.numpy(), t.numpy())
    pointer = m.data_ptr()
    assert m.share_memory_().data_ptr() == pointer
    assert m.t().is_shared()  # views made afterwards share it
    m.mul_(2)
    assert m.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs the fork start method")
def test_forked_child_writes_are_seen():
    t = munet.zeros(4).share_memory_()
    child = mp.get_context("fork").Process(target=_add_one, args=(t,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert t.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_spawned_process_receives_the_same_memory():
    ctx = mp.get_context("spawn")
    queue, done = ctx.Queue(), ctx.Queue()
    param = munet.nn.Parameter(munet.zeros(2, 3)).share_memory_()
    view = param.detach()[1]  # a view of the shared storage travels as its geometry
    child = ctx.Process(target=_fill_from_queue, args=(queue, done))
    child.start()
    queue.put(view)
    assert done.get(timeout=120) is True
    child.join(60)
    assert child.exitcode == 0
    assert param.tolist() == [[0.0, 0.0, 0.0], [7.0, 7.0, 7.0]]


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs the fork start method")
def test_views_made_before_the_move_follow_it():
    base = munet.zeros(4)
    view, alias = base[1:3], base.detach()
    base.share_memory_()
    assert view.is_shared() and view.data_ptr() == base.data_ptr() + 4 and alias.data_ptr() == base.data_ptr()
    child = mp.get_context("fork").Process(target=_add_one, args=(view,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert base.tolist() == alias.tolist() == [0.0, 1.0, 1.0, 0.0]
    with pytest.raises(RuntimeError, match="cannot grow"):
        base.resize_(8)


def test_pickle_copies_values():
    t = munet.ones(3).share_memory_()
    copy = pickle.loads(pickle.dumps(t))
    assert not copy.is_shared()
    copy.zero_()
    assert t.tolist() == [1.0, 1.0, 1.0]


def test_parameter_keeps_its_class_and_grad_flag():
    param = munet.nn.Parameter(munet.ones(2)).share_memory_()
    assert isinstance(param, munet.nn.Parameter) and param.requires_grad and param.is_shared()
    (param * 2).sum().backward()
    assert param.grad.tolist() == [2.0, 2.0]


def test_share_memory_on_vulkan_raises(vulkan):
    with pytest.raises(RuntimeError, match="only cpu tensors"):
        munet.ones(2, device=vulkan).share_memory_()


def _sgd_step(model):
    with munet.no_grad():
        for p in model.parameters():
            p.add_(1.0)


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs the fork start method")
def test_module_share_memory_lets_workers_train_the_same_weights():
    model = munet.nn.Sequential(munet.nn.Linear(3, 2), munet.nn.BatchNorm1d(2))
    model(munet.randn(4, 3)).sum().backward()
    assert model.share_memory() is model
    shared = [*model.parameters(), *(p.grad for p in model.parameters()), *model.buffers()]
    assert all(t.is_shared() for t in shared)
    before = [p.detach().clone() for p in model.parameters()]
    child = mp.get_context("fork").Process(target=_sgd_step, args=(model,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    for p, old in zip(model.parameters(), before):
        assert munet.equal(p.detach(), old + 1.0)
