"""Adafactor and Muon stepped side by side with PyTorch's on the same gradients; SparseAdam's checks
and its refusal of dense gradients, as PyTorch's."""

import numpy as np
import pytest
import torch

import munet
import munet.optim as optim


def _side_by_side(name, kwargs, shapes, steps, dtype="float32"):
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(steps)]
    m_params = [munet.tensor(a, requires_grad=True) for a in init]
    t_params = [torch.tensor(a, requires_grad=True) for a in init]
    m_opt = getattr(optim, name)(m_params, **kwargs)
    t_opt = getattr(torch.optim, name)(t_params, **kwargs)
    history = []
    for step_grads in grads:
        for mp, tp, g in zip(m_params, t_params, step_grads):
            mp.grad, tp.grad = munet.tensor(g), torch.tensor(g)
        m_opt.step()
        t_opt.step()
        history.append([(mp.detach().numpy().copy(), tp.detach().numpy().copy()) for mp, tp in zip(m_params, t_params)])
    return history, m_opt, t_opt


ADAFACTOR = [
    {},
    {"lr": 0.05, "weight_decay": 0.1, "beta2_decay": -0.5, "d": 2.0},
    {"lr": 0.02, "eps": (1e-30, 1e-3), "maximize": True},
]


@pytest.mark.parametrize("kwargs", ADAFACTOR)
def test_adafactor_matches_torch(kwargs):
    history, m_opt, t_opt = _side_by_side("Adafactor", kwargs, [(4, 3), (3,), (2, 3, 2)], steps=15)
    for step in history:
        for mine, theirs in step:
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-6)
    for mp, tp in zip(m_opt.param_groups[0]["params"], t_opt.param_groups[0]["params"]):
        ms, ts = m_opt.state[mp], t_opt.state[tp]
        assert sorted(ms) == sorted(ts)
        for key in ms:
            np.testing.assert_allclose(np.asarray(ms[key].numpy()), ts[key].numpy(), rtol=1e-5, atol=1e-7)


def test_adafactor_float64_matches_torch_tightly():
    history, _, _ = _side_by_side("Adafactor", {"lr": 0.05, "weight_decay": 0.01}, [(5, 4), (6,)], 10, "float64")
    for mine, theirs in history[-1]:
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-14)


MUON = [
    {},
    {"lr": 0.02, "momentum": 0.9, "nesterov": False, "weight_decay": 0.0},
    {"lr": 0.01, "adjust_lr_fn": "match_rms_adamw", "ns_steps": 3},
]


def _torch_newton_schulz_in(dtype):
    """PyTorch's Newton-Schulz iteration with its bfloat16 cast replaced by ``dtype``."""

    def newton_schulz(grad, ns_coefficients, ns_steps, eps):
        a, b, c = ns_coefficients
        x = grad.to(dtype)
        tall = grad.size(0) > grad.size(1)
        x = x.T if tall else x
        x = x / x.norm().clamp(min=eps)
        for _ in range(ns_steps):
            gram = x @ x.T
            x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
        return x.T if tall else x

    return newton_schulz


@pytest.mark.parametrize("kwargs", MUON)
def test_muon_update_rule_matches_torch(kwargs, monkeypatch):
    """With the orthogonalization in float64 on both sides, the update rule (momentum, Nesterov,
    decoupled weight decay, learning-rate adjustment) agrees to float64 rounding."""
    import munet.optim.muon as muon

    monkeypatch.setattr(torch.optim._muon, "_zeropower_via_newtonschulz", _torch_newton_schulz_in(torch.float64))
    monkeypatch.setattr(muon, "NS_DTYPE", munet.float64)
    history, _, _ = _side_by_side("Muon", kwargs, [(6, 4), (3, 5)], steps=5, dtype="float64")
    for step in history:
        for mine, theirs in step:
            np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shape", [(6, 4), (3, 5), (32, 16)])
def test_muon_bfloat16_orthogonalization_is_as_accurate_as_torchs(shape):
    from torch.optim._muon import _zeropower_via_newtonschulz

    from munet.optim.muon import zeropower_via_newtonschulz

    g = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    coefficients = (3.4445, -4.775, 2.0315)
    exact = _torch_newton_schulz_in(torch.float64)(torch.tensor(g), coefficients, 5, 1e-7).numpy()
    theirs = _zeropower_via_newtonschulz(torch.tensor(g), coefficients, 5, 1e-7).double().numpy()
    mine = zeropower_via_newtonschulz(munet.tensor(g), coefficients, 5, 1e-7)
    assert mine.dtype == munet.bfloat16
    # both round every op to bfloat16; the iteration amplifies rounding, so the bound is torch's own error
    torch_error = np.abs(theirs - exact).max()
    assert np.abs(mine.double().numpy() - exact).max() <= 2 * torch_error + 2**-8


def test_muon_bfloat16_steps_stay_close_to_torch():
    history, _, _ = _side_by_side("Muon", {"lr": 0.01}, [(6, 4)], steps=3)
    for step in history:
        for mine, theirs in step:
            # one step moves a parameter by adjusted lr (0.01 sqrt(1.5)) times an update entry of at most ~1
            # whose bfloat16 error is below 0.1 (see the test above): 3 steps stay within 3 * 0.0123 * 0.1
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=3 * 0.0123 * 0.1)


def test_muon_update_is_orthogonal_and_rejects_non_matrices():
    from munet.optim.muon import zeropower_via_newtonschulz

    g = munet.randn(8, 5, dtype=munet.float64)
    q = zeropower_via_newtonschulz(g, (3.4445, -4.775, 2.0315), 5, 1e-7).to(munet.float64)
    singular = np.linalg.svd(q.numpy(), compute_uv=False)
    assert np.all((singular > 0.6) & (singular < 1.25))  # the quintic's fixed band, as PyTorch's
    with pytest.raises(ValueError, match="only supports 2D parameters"):
        optim.Muon([munet.nn.Parameter(munet.ones(3))])
    with pytest.raises(ValueError, match="not supported"):
        optim.Muon([munet.nn.Parameter(munet.ones(3, 2))], adjust_lr_fn="other")


def test_sparse_adam_refuses_dense_gradients_as_torch():
    for lib in (munet, torch):
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SparseAdam([p], lr=0.1)
        opt.step()  # no gradient yet: nothing to do
        p.grad = lib.ones(2)
        with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
            opt.step()
        with pytest.raises(ValueError, match="Invalid learning rate"):
            lib.optim.SparseAdam([p], lr=0.0)
        with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
            lib.optim.SparseAdam([p], betas=(0.9, 1.0))
