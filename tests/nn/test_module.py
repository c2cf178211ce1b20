"""nn.Module registration, traversal, state dicts, conversion, hooks and containers."""

import copy

import numpy as np
import pytest

import munet
import munet.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(munet.ones(2, 3))
        self.register_buffer("running", munet.zeros(3))
        self.register_buffer("scratch", munet.zeros(1), persistent=False)
        self.child = nn.Sequential(Leaf(), Leaf())

    def forward(self, x):
        return self.child(x @ self.weight)


class Leaf(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(munet.full((3,), 2.0))

    def forward(self, x):
        return x * self.scale


def test_registration_and_named_members():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["weight", "child.0.scale", "child.1.scale"]
    assert [n for n, _ in net.named_buffers()] == ["running", "scratch"]
    assert [n for n, _ in net.named_modules()] == ["", "child", "child.0", "child.1"]
    assert [n for n, _ in net.named_children()] == ["child"]
    assert list(net.state_dict()) == ["weight", "running", "child.0.scale", "child.1.scale"]
    assert net.get_submodule("child.1") is net.child[1]
    assert net.get_parameter("child.0.scale") is net.child[0].scale
    with pytest.raises(AttributeError, match="has no attribute 'missing'"):
        _ = net.missing


def test_shared_parameters_are_deduplicated_and_stay_tied():
    a, b = Leaf(), Leaf()
    b.scale = a.scale
    seq = nn.Sequential(a, b)
    assert len(list(seq.parameters())) == 1
    assert list(seq.state_dict()) == ["0.scale", "1.scale"]
    seq.double()
    assert seq[0].scale is seq[1].scale and seq[0].scale.dtype is munet.float64
    seq.load_state_dict({"0.scale": munet.full((3,), 5.0), "1.scale": munet.full((3,), 5.0)})
    assert seq[1].scale.tolist() == [5.0, 5.0, 5.0]


def test_state_dict_shares_memory_and_load_copies():
    net = Net()
    sd = net.state_dict()
    assert sd["weight"].data_ptr() == net.weight.data_ptr() and not sd["weight"].requires_grad
    other = Net()
    with munet.no_grad():
        other.weight.fill_(7.0)
    result = net.load_state_dict(other.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert net.weight.tolist() == [[7.0] * 3] * 2
    assert net.weight is not other.weight


def test_load_state_dict_validates_everything_before_assigning():
    net = Net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    bad = dict(net.state_dict())
    bad = {k: v.clone() + 1 for k, v in bad.items()}
    bad["child.1.scale"] = munet.zeros(4)
    bad["extra"] = munet.zeros(1)
    del bad["running"]
    with pytest.raises(RuntimeError) as err:
        net.load_state_dict(bad)
    message = str(err.value)
    assert 'Unexpected key(s) in state_dict: "extra"' in message
    assert 'Missing key(s) in state_dict: "running"' in message
    assert "size mismatch for child.1.scale" in message
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k].numpy())
    with pytest.raises(RuntimeError, match="dtype mismatch for weight"):
        net.load_state_dict({**net.state_dict(), "weight": munet.zeros(2, 3, dtype=munet.int64)})
    res = net.load_state_dict({"weight": munet.zeros(2, 3)}, strict=False)
    assert "running" in res.missing_keys and net.weight.sum().item() == 0


def test_train_eval_requires_grad_zero_grad_apply():
    net = Net()
    net.eval()
    assert not net.training and not net.child[0].training
    net.train()
    assert net.child[1].training
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_(True)
    net(munet.ones(1, 2)).sum().backward()
    assert net.weight.grad is not None
    net.zero_grad(set_to_none=False)
    assert net.weight.grad.abs().sum().item() == 0
    net.zero_grad()
    assert net.weight.grad is None
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Leaf", "Leaf", "Sequential", "Net"]


def test_to_converts_floating_state_only():
    net = Net()
    net.register_buffer("counter", munet.tensor(3))
    net.to(munet.float64)
    assert net.weight.dtype is munet.float64 and net.running.dtype is munet.float64
    assert net.counter.dtype is munet.int64
    with pytest.raises(TypeError, match="floating point"):
        net.to(munet.int32)
    net.half()
    assert net.child[0].scale.dtype is munet.float16


def test_forward_hooks():
    leaf = Leaf()
    calls = []
    h1 = leaf.register_forward_pre_hook(lambda m, args: (args[0] * 10,))
    h2 = leaf.register_forward_hook(lambda m, args, out: out + 1)
    out = leaf(munet.ones(3))
    assert out.tolist() == [21.0, 21.0, 21.0]
    h1.remove()
    h2.remove()
    leaf.register_forward_hook(lambda m, args, kwargs, out: calls.append(kwargs), with_kwargs=True)
    leaf(munet.ones(3))
    assert calls == [{}]


def test_assignment_rules():
    leaf = Leaf()
    with pytest.raises(TypeError, match="cannot assign"):
        leaf.scale = munet.ones(3)
    leaf.scale = None
    assert leaf.scale is None
    with pytest.raises(ValueError, match="non-leaf"):
        leaf.register_parameter("w", _non_leaf_param())

    class NoInit(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(munet.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        NoInit()


def _non_leaf_param():
    p = nn.Parameter(munet.ones(1))
    p._grad_fn = (p * 2).grad_fn
    return p


def test_repr_like_pytorch():
    seq = nn.Sequential(Leaf(), nn.Sequential(Leaf()))
    assert repr(seq) == "Sequential(\n  (0): Leaf()\n  (1): Sequential(\n    (0): Leaf()\n  )\n)"
    assert repr(nn.Parameter(munet.ones(2))) == "Parameter containing:\ntensor([1., 1.], requires_grad=True)"


def test_containers():
    seq = nn.Sequential(Leaf(), Leaf(), Leaf())
    assert len(seq[1:]) == 2 and isinstance(seq[-1], Leaf)
    seq.append(Leaf())
    del seq[0]
    assert list(seq._modules) == ["0", "1", "2"]
    ml = nn.ModuleList([Leaf()])
    ml.append(Leaf())
    ml += [Leaf()]
    assert len(ml) == 3 and len(list(ml.parameters())) == 3
    md = nn.ModuleDict({"a": Leaf()})
    md["b"] = Leaf()
    assert list(md.keys()) == ["a", "b"] and "a" in md
    pl = nn.ParameterList([munet.ones(2), nn.Parameter(munet.zeros(1))])
    assert isinstance(pl[0], nn.Parameter) and len(list(pl.parameters())) == 2
    pd = nn.ParameterDict({"x": munet.ones(1)})
    assert isinstance(pd["x"], nn.Parameter) and [n for n, _ in pd.named_parameters()] == ["x"]
    with pytest.raises(IndexError, match="out of range"):
        seq[10]


def test_deepcopy_keeps_ties_and_copies_data():
    a, b = Leaf(), Leaf()
    b.scale = a.scale
    seq = nn.Sequential(a, b)
    clone = copy.deepcopy(seq)
    assert clone[0].scale is clone[1].scale
    assert clone[0].scale is not seq[0].scale
    with munet.no_grad():
        clone[0].scale.fill_(0)
    assert seq[0].scale.tolist() == [2.0, 2.0, 2.0]


def test_module_list_repr_collapses_repeats_like_pytorch():
    import torch

    ours = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)])
    theirs = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 2)])
    assert repr(ours) == repr(theirs)


def test_batchnorm_loads_state_dict_without_num_batches_tracked():
    old = nn.BatchNorm1d(3)
    state = {k: v for k, v in old.state_dict().items() if k != "num_batches_tracked"}
    state["running_mean"] = munet.tensor([1.0, 2.0, 3.0])
    bn = nn.BatchNorm1d(3)
    bn.num_batches_tracked.fill_(5)
    result = bn.load_state_dict(state)
    assert result.missing_keys == [] and bn.num_batches_tracked.item() == 5
    assert bn.running_mean.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match='Missing key.*"running_var"'):
        nn.BatchNorm1d(3).load_state_dict({k: v for k, v in state.items() if k != "running_var"})


def test_factory_kwargs_matches_torch():
    import torch

    for kwargs in [None, {}, {"dtype": "d"}, {"device": "cpu", "factory_kwargs": {"dtype": "d"}}]:
        assert munet.nn.factory_kwargs(kwargs) == torch.nn.factory_kwargs(kwargs)
    for bad in [{"bias": True}, {"dtype": "d", "factory_kwargs": {"dtype": "e"}}]:
        with pytest.raises(TypeError) as mine:
            munet.nn.factory_kwargs(bad)
        with pytest.raises(TypeError) as theirs:
            torch.nn.factory_kwargs(bad)
        assert str(mine.value) == str(theirs.value)
