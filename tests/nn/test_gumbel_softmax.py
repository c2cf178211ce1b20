"""F.gumbel_softmax: samples follow softmax(logits); hard samples are one-hot with the soft gradient."""

import numpy as np
import pytest

import munet
import munet.nn.functional as F


@pytest.mark.parametrize("dim", [-1, 0])
def test_hard_is_one_hot_with_the_soft_gradient(dim):
    logits = munet.randn(4, 5)
    results = []
    for hard in (False, True):
        x = logits.detach().clone().requires_grad_(True)
        munet.manual_seed(3)  # the same noise
        y = F.gumbel_softmax(x, tau=0.5, hard=hard, dim=dim)
        w = munet.tensor(np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32))
        (y * w).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy()))
    (soft, soft_grad), (hard, hard_grad) = results
    np.testing.assert_allclose(soft.sum(dim), 1.0, rtol=1e-6)
    assert set(np.unique(hard)) <= {0.0, 1.0} and (hard.sum(dim) == 1).all()
    np.testing.assert_array_equal(hard.argmax(dim), soft.argmax(dim))
    np.testing.assert_allclose(hard_grad, soft_grad, rtol=1e-5, atol=1e-7)


def test_samples_follow_the_categorical_distribution():
    munet.manual_seed(0)
    logits = munet.tensor([1.0, 0.0, -1.0, 2.0])
    draws = F.gumbel_softmax(logits.expand(20000, 4), hard=True).numpy().mean(0)
    probs = np.exp(logits.numpy()) / np.exp(logits.numpy()).sum()
    # 4 standard errors of a frequency from 20000 draws
    np.testing.assert_allclose(draws, probs, atol=4 * np.sqrt(probs * (1 - probs) / 20000).max())
