"""Validated distributions inside munet.compile: checks are ops, so the compiled function validates too."""

import numpy as np
import pytest

import munet
import munet.distributions as D


def test_compiled_log_prob_matches_eager_and_still_validates():
    def normal_log_prob(loc, scale, x):
        return D.Normal(loc, scale).log_prob(x).sum()

    compiled = munet.compile(normal_log_prob)
    loc, scale, x = munet.randn(3), munet.rand(3) + 0.5, munet.randn(3)
    np.testing.assert_allclose(compiled(loc, scale, x).numpy(), normal_log_prob(loc, scale, x).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"scale .* GreaterThan\(lower_bound=0.0\)"):
        compiled(loc, -scale, x)


def test_compiled_categorical_policy_terms():
    def terms(logits, action):
        m = D.Categorical(logits=logits)
        return m.log_prob(action).sum() + m.entropy().sum()

    logits, action = munet.randn(2, 4), munet.tensor([1, 3])
    np.testing.assert_allclose(munet.compile(terms)(logits, action).numpy(), terms(logits, action).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="support"):
        munet.compile(terms)(logits, munet.tensor([1, 4]))
