"""One optimizer in MuNet and in PyTorch, stepped side by side on the same gradients."""

from __future__ import annotations

import torch

import munet
import munet.optim as optim


def step_side_by_side(name: str, kwargs: dict, init: list, grads: list, two_groups: bool = False):
    """``(munet params, torch params, munet optimizer, torch optimizer)`` after one step per entry of
    ``grads`` (a list of per-parameter NumPy gradients) from the NumPy arrays ``init``. With
    ``two_groups`` the first parameter is its own group at half the learning rate."""
    m_params = [munet.tensor(a, requires_grad=True) for a in init]
    t_params = [torch.tensor(a, requires_grad=True) for a in init]
    if two_groups:
        m_groups = [{"params": m_params[:1], "lr": kwargs["lr"] * 0.5}, {"params": m_params[1:]}]
        t_groups = [{"params": t_params[:1], "lr": kwargs["lr"] * 0.5}, {"params": t_params[1:]}]
    else:
        m_groups, t_groups = m_params, t_params
    m_opt = getattr(optim, name)(m_groups, **kwargs)
    t_opt = getattr(torch.optim, name)(t_groups, foreach=False, **kwargs)
    for step_grads in grads:
        for mp, tp, g in zip(m_params, t_params, step_grads):
            mp.grad = munet.tensor(g)
            tp.grad = torch.tensor(g)
        m_opt.step()
        t_opt.step()
    return m_params, t_params, m_opt, t_opt
