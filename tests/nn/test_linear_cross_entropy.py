"""F.linear_cross_entropy and nn.LinearCrossEntropyLoss against PyTorch 2.13 (forward and gradients, float64)."""

import numpy as np
import pytest
import torch

import munet
import munet.nn as nn
import munet.nn.functional as F

CASES = [
    ({}, (5, 6), (4,), False, "index"),
    ({"reduction": "sum", "label_smoothing": 0.1}, (5, 6), (4,), True, "index"),
    ({"reduction": "none", "ignore_index": 2}, (5, 6), (4,), True, "index"),
    ({}, (5, 6), (4, 3), True, "index"),  # K-dimensional: logits (N, C, 3)
    ({"reduction": "mean"}, (5, 6), (4,), True, "probs"),
    ({}, (6,), (4,), True, "index"),  # unbatched
]


@pytest.mark.parametrize("kwargs,input_shape,weight_shape,bias,target_kind", CASES)
def test_functional_matches_torch(kwargs, input_shape, weight_shape, bias, target_kind):
    rng = np.random.default_rng(0)
    classes, extra = weight_shape[0], weight_shape[1:]
    x = rng.normal(size=input_shape)
    w = rng.normal(size=(*weight_shape, input_shape[-1]))
    b = rng.normal(size=weight_shape) if bias else None
    batch = input_shape[:-1]
    if target_kind == "index":
        target = rng.integers(0, classes, size=(*batch, *extra))
    else:
        target = rng.dirichlet(np.ones(classes), size=batch)
    leaves = [a for a in (x, w, b) if a is not None]
    mine = [munet.tensor(a, requires_grad=True) for a in leaves]
    theirs = [torch.tensor(a, requires_grad=True) for a in leaves]
    out_m = F.linear_cross_entropy(
        mine[0], mine[1], munet.tensor(target), linear_bias=mine[2] if bias else None, **kwargs
    )
    out_t = torch.nn.functional.linear_cross_entropy(theirs[0], theirs[1], torch.tensor(target),
                                                     linear_bias=theirs[2] if bias else None, **kwargs)  # fmt: skip
    np.testing.assert_allclose(out_m.detach().numpy(), out_t.detach().numpy(), rtol=1e-10)
    out_m.sum().backward()
    out_t.sum().backward()
    for a, c in zip(mine, theirs):
        np.testing.assert_allclose(a.grad.numpy(), c.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_module_matches_torch_with_options():
    torch.manual_seed(0)
    opts_t = torch.nn.LinearCrossEntropyOptions(batch_chunk_size=2, chunking_method=None)
    theirs = torch.nn.LinearCrossEntropyLoss(6, 4, bias=True, options=opts_t).double()
    mine = nn.LinearCrossEntropyLoss(
        6, 4, bias=True, options=nn.LinearCrossEntropyOptions(batch_chunk_size=2, chunking_method=None)
    ).double()
    assert sorted(mine.state_dict()) == sorted(theirs.state_dict())
    mine.load_state_dict({k: munet.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x, y = np.random.default_rng(1).normal(size=(5, 6)), np.array([0, 3, 1, 2, 3])
    lm, lt = mine(munet.tensor(x), munet.tensor(y)), theirs(torch.tensor(x), torch.tensor(y))
    np.testing.assert_allclose(lm.item(), lt.item(), rtol=1e-10)
    lm.backward()
    lt.backward()
    np.testing.assert_allclose(mine.linear.weight.grad.numpy(), theirs.linear.weight.grad.numpy(), rtol=1e-8)


def test_checks_match_torch():
    for lib, module in ((munet, nn), (torch, torch.nn)):
        f = lib.nn.functional.linear_cross_entropy
        with pytest.raises(RuntimeError, match="dimensionality 1 or 2"):
            f(lib.ones(2, 2, 3), lib.ones(4, 3), lib.zeros(2, dtype=lib.int64))
        with pytest.raises(RuntimeError, match="in_features"):
            f(lib.ones(2, 5), lib.ones(4, 3), lib.zeros(2, dtype=lib.int64))
        with pytest.raises(RuntimeError, match="requires batched"):
            f(lib.ones(3), lib.ones(4, 2, 3), lib.zeros(2, dtype=lib.int64))
        with pytest.raises(RuntimeError, match="label_smoothing"):
            module.LinearCrossEntropyLoss(3, 4, label_smoothing=2.0)
        with pytest.raises(ValueError, match="invalid acc_policy"):
            module.LinearCrossEntropyOptions(acc_policy="fast")
        with pytest.raises(ValueError, match="batch_chunk_size"):
            module.LinearCrossEntropyOptions(batch_chunk_size=0)
