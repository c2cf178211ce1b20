"""Pickling tensors, Parameters and Modules (``Tensor.__reduce_ex__`` in munet/_tensor.py).

The pickled form is plain data (NumPy arrays, dtype names, flags), so ``copy``, ``pickle``,
``multiprocessing`` and spawn DataLoader workers work; the expectations are PyTorch's own.
"""

import copy
import io
import pickle

import numpy as np
import pytest
import torch

import munet
import munet.nn as nn
from munet.utils.data import DataLoader, Dataset
from tests.reference import assert_close, noncontiguous, randn


def roundtrip(obj, protocol=pickle.HIGHEST_PROTOCOL):
    return pickle.loads(pickle.dumps(obj, protocol=protocol))


def pickled_globals(obj) -> set:
    """The ``module.name`` globals that loading a pickle of ``obj`` looks up (all it can call)."""
    found = set()

    class Recorder(pickle.Unpickler):
        def find_class(self, module, name):
            found.add(f"{module}.{name}")
            return super().find_class(module, name)

    Recorder(io.BytesIO(pickle.dumps(obj))).load()
    return found


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_tensor_roundtrip_matches_torch(dtype, protocol):
    values = noncontiguous(randn(3, 4, seed=1) * 5)
    for lib in (munet, torch):
        x = lib.tensor(values).to(getattr(lib, dtype))
        y = roundtrip(x, protocol)
        assert y.dtype is x.dtype and y.shape == x.shape and y.is_contiguous() and not y.requires_grad
    m, t = munet.tensor(values).to(getattr(munet, dtype)), torch.tensor(values).to(getattr(torch, dtype))
    assert_close(roundtrip(m, protocol), roundtrip(t, protocol), rtol=0, atol=0)
    assert roundtrip(munet.tensor(3.5)).shape == () and roundtrip(munet.zeros(0, 3)).shape == (0, 3)


def test_requires_grad_grad_and_attributes_as_torch():
    """requires_grad and instance attributes survive; ``.grad`` and history do not (PyTorch's rules)."""
    for lib in (munet, torch):
        x = lib.ones(3, requires_grad=True)
        x.grad = lib.full((3,), 2.0)
        x.note = "kept"
        y = roundtrip(x)
        assert y.requires_grad and y.grad is None and y.note == "kept" and y.is_leaf
        z = roundtrip(x * 2)  # a non-leaf unpickles as a leaf that requires grad
        assert z.is_leaf and z.requires_grad and z.tolist() == [2.0, 2.0, 2.0]
        copied = copy.deepcopy(x)  # deepcopy, unlike pickle, copies .grad
        assert copied.grad.tolist() == [2.0, 2.0, 2.0] and copied.grad is not x.grad


def test_views_unpickle_as_separate_tensors_with_their_own_values():
    base = munet.arange(12.0)
    view = base.reshape(3, 4).t()[1:]
    base2, view2 = roundtrip([base, view])
    assert view2.tolist() == view.tolist() and view2.is_contiguous()
    base2[5] = -1.0
    assert view2.tolist() == view.tolist()  # not sharing storage, as PyTorch's pickle


def test_parameter_and_buffer_keep_their_class():
    p = nn.Parameter(munet.ones(2, 3))
    q = roundtrip(p)
    assert type(q) is nn.Parameter and q.requires_grad and q.tolist() == p.tolist()
    frozen = roundtrip(nn.Parameter(munet.ones(2), requires_grad=False))
    assert type(frozen) is nn.Parameter and not frozen.requires_grad
    b = roundtrip(nn.Buffer(munet.zeros(2), persistent=False))
    assert type(b) is nn.Buffer and b.persistent is False


def test_pickle_holds_only_plain_data():
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    names = pickled_globals(model)
    code = {n for n in names if not n.startswith(("munet.", "numpy.", "collections.", "builtins."))}
    assert not code, f"a pickled model references {code}"
    rebuilt = {n for n in names if n.startswith("munet.") and not n.startswith(("munet.nn.", "munet._dtype."))}
    assert rebuilt == {"munet._tensor._rebuild_tensor", "munet._tensor.Tensor"}, rebuilt
    assert "munet._tensor._rebuild_tensor" in names
    assert not any("<locals>" in n or "lambda" in n for n in names)


class Tied(nn.Module):
    """An embedding whose weight the output layer shares."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(5, 4)
        self.head = nn.Linear(4, 5, bias=False)
        self.head.weight = self.embed.weight
        self.norm = nn.BatchNorm1d(4)

    def forward(self, idx):
        return self.head(self.norm(self.embed(idx)))


def test_module_pickle_and_deepcopy_keep_values_sharing_and_state():
    model = Tied()
    model.norm.running_mean.fill_(0.25)
    idx = munet.tensor([0, 3, 4])
    expected = model.eval()(idx).detach().numpy()
    for copied in (copy.deepcopy(model), roundtrip(model)):
        assert copied.head.weight is copied.embed.weight  # the tie survives
        assert copied.embed.weight is not model.embed.weight
        assert copied.embed.weight.data_ptr() != model.embed.weight.data_ptr()
        assert len(list(copied.parameters())) == len(list(model.parameters()))
        assert not copied.training
        np.testing.assert_array_equal(copied(idx).detach().numpy(), expected)
        assert copied.state_dict().keys() == model.state_dict().keys()
        with munet.no_grad():
            copied.embed.weight.add_(1.0)
        assert copied.head.weight.tolist() == copied.embed.weight.tolist()
        assert model.embed.weight.tolist() != copied.embed.weight.tolist()


def test_vulkan_tensor_pickles_with_its_device(vulkan):
    x = munet.tensor(randn(2, 3), device=vulkan)
    y = roundtrip(x)
    assert y.device == x.device and y.tolist() == x.tolist()
    p = roundtrip(nn.Parameter(x))
    assert type(p) is nn.Parameter and p.device == x.device and p.requires_grad


class TensorSquares(Dataset):
    """A dataset whose samples are munet tensors (and that holds one), for spawned workers."""

    def __init__(self):
        self.table = munet.arange(8.0)

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return self.table[i] * self.table[i], munet.tensor(i)


def test_spawn_dataloader_over_a_dataset_of_tensors():
    loader = DataLoader(TensorSquares(), batch_size=3, num_workers=2, multiprocessing_context="spawn")
    batches = list(loader)
    squares = np.concatenate([b[0].numpy() for b in batches])
    np.testing.assert_array_equal(squares, np.arange(8.0) ** 2)
    assert [b[1].tolist() for b in batches] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def double(t):
    return t * 2


def test_multiprocessing_pool_sends_and_returns_tensors():
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        out = pool.map(double, [munet.ones(2), munet.arange(3)])
    assert [o.tolist() for o in out] == [[2.0, 2.0], [0, 2, 4]]
