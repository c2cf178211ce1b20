"""The pytorch/examples actor-critic pattern: Categorical(probs).sample(), .log_prob(a), .entropy() with autograd."""

import numpy as np
import torch
import torch.distributions as TD

import munet
import munet.distributions as D


def test_actor_critic_policy_gradient_matches_torch():
    rng = np.random.default_rng(0)
    w, obs = rng.normal(size=(4, 2)), rng.normal(size=(5, 4))
    mw = munet.tensor(w, requires_grad=True)
    probs = munet.softmax(munet.tensor(obs) @ mw, dim=-1)
    m = D.Categorical(probs)
    action = m.sample()
    assert action.dtype == munet.int64 and tuple(action.shape) == (5,)
    returns = rng.normal(size=5)
    loss = -(m.log_prob(action) * munet.tensor(returns)).sum() - 0.01 * m.entropy().sum()
    loss.backward()

    tw = torch.tensor(w, requires_grad=True)
    tm = TD.Categorical(torch.softmax(torch.tensor(obs) @ tw, dim=-1))
    taction = torch.tensor(action.numpy())
    tloss = -(tm.log_prob(taction) * torch.tensor(returns)).sum() - 0.01 * tm.entropy().sum()
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-7)
    np.testing.assert_allclose(mw.grad.numpy(), tw.grad.numpy(), rtol=1e-6, atol=1e-12)


def test_categorical_scalar_batch_and_item():
    m = D.Categorical(munet.tensor([0.1, 0.2, 0.7]))
    a = m.sample()
    assert tuple(a.shape) == () and 0 <= a.item() < 3
    np.testing.assert_allclose(m.log_prob(a).item(), np.log([0.1, 0.2, 0.7])[a.item()], rtol=1e-6)
    np.testing.assert_allclose(m.enumerate_support().numpy(), [0, 1, 2])


def test_enumerate_support_matches_torch():
    probs = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    p = np.array([0.3, 0.6])
    pairs = [
        (D.Categorical(munet.tensor(probs)), TD.Categorical(torch.tensor(probs))),
        (D.OneHotCategorical(munet.tensor(probs)), TD.OneHotCategorical(torch.tensor(probs))),
        (D.Bernoulli(munet.tensor(p)), TD.Bernoulli(torch.tensor(p))),
        (D.Binomial(4, munet.tensor(p)), TD.Binomial(4, torch.tensor(p))),
    ]
    for mine, theirs in pairs:
        for expand in (True, False):
            np.testing.assert_array_equal(
                mine.enumerate_support(expand).numpy(), theirs.enumerate_support(expand).numpy()
            )
        support = theirs.enumerate_support()
        np.testing.assert_allclose(
            mine.log_prob(munet.tensor(support.numpy())).numpy(), theirs.log_prob(support).numpy(), rtol=1e-7
        )
