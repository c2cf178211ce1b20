"""Activation checkpointing gives the same gradients as running the segment normally."""

import numpy as np

import munet
import munet.nn.functional as F
from munet.utils.checkpoint import checkpoint, checkpoint_sequential


def _params(seed=0):
    rng = np.random.default_rng(seed)
    w1 = munet.tensor(rng.standard_normal((5, 8)).astype(np.float32), requires_grad=True)
    w2 = munet.tensor(rng.standard_normal((8, 3)).astype(np.float32), requires_grad=True)
    x = munet.tensor(rng.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    return w1, w2, x


def _segment(w1, w2):
    def fn(x):
        h = F.dropout(x @ w1, p=0.3, training=True)
        return (h.tanh() @ w2).sigmoid()

    return fn


def test_checkpoint_matches_plain_gradients_with_dropout():
    grads = []
    for use_checkpoint in (False, True):
        w1, w2, x = _params()
        munet.manual_seed(5)
        fn = _segment(w1, w2)
        out = checkpoint(fn, x) if use_checkpoint else fn(x)
        (out * out).sum().backward()
        grads.append([t.grad.numpy().copy() for t in (w1, w2, x)])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_checkpoint_without_input_grad_still_trains_parameters():
    w1, w2, x = _params()
    out = checkpoint(_segment(w1, w2), x.detach())
    out.sum().backward()
    assert w1.grad is not None and w2.grad is not None


def test_checkpoint_sequential_matches():
    layers = [lambda t: t * 2, lambda t: t.sin(), lambda t: t * t, lambda t: t.exp()]
    x1 = munet.tensor([0.1, 0.5, -0.3], requires_grad=True)
    x2 = munet.tensor([0.1, 0.5, -0.3], requires_grad=True)
    checkpoint_sequential(layers, 2, x1).sum().backward()
    out = x2
    for f in layers:
        out = f(out)
    out.sum().backward()
    np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-6)
