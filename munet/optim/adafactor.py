"""Adafactor (Shazeer and Stern, 2018) with PyTorch's ``torch.optim.Adafactor`` update rule.

Matrices (and stacks of them) keep factored second moments, a row and a column mean of the
squared gradient, and estimate the full one as ``row @ col / mean(row)``; vectors keep the full
second moment. The step is ``alpha_t = max(eps2, RMS(p)) * min(lr, 1 / sqrt(t))`` times the
normalized update clipped to RMS ``d``; ``lr`` also scales the decoupled weight decay.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet.autograd.grad_mode import no_grad
from munet.ops.creation import zeros_like
from munet.optim.optimizer import Optimizer
from munet.optim.parameterwise import step_counter

_EPS = {D.float16: 2.0**-10, D.bfloat16: 2.0**-7, D.float32: 2.0**-23, D.float64: 2.0**-52}


class Adafactor(Optimizer):
    """PyTorch's ``torch.optim.Adafactor``."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        beta2_decay: float = -0.8,
        eps=(None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach=None,
        maximize: bool = False,
    ):
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = {"lr": lr, "beta2_decay": beta2_decay, "eps": eps, "d": d, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize}  # fmt: skip
        super().__init__(params, defaults)

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Adafactor does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state.update(self._init_state(p))
                state["step"].add_(1)
                self._update(p, -p.grad if group["maximize"] else p.grad, state, group)
        return loss

    def _init_state(self, p) -> dict:
        state = {"step": step_counter()}
        if p.ndim > 1:
            state["row_var"] = p.new_zeros(tuple(p.shape[:-1]) + (1,))
            state["col_var"] = p.new_zeros(tuple(p.shape[:-2]) + (1, p.shape[-1]))
        else:
            state["variance"] = zeros_like(p)
        return state

    def _update(self, p, grad, state, group) -> None:
        lr, (eps1, eps2) = group["lr"], group["eps"]
        eps1 = _EPS[p.dtype] if eps1 is None else eps1
        step = float(state["step"].item())
        one_minus_beta2 = step ** group["beta2_decay"]
        rho = min(lr, 1 / math.sqrt(step))
        alpha = max(eps2, float(p.norm(2).item()) / math.sqrt(p.numel())) * rho
        if group["weight_decay"] != 0:
            p.mul_(1 - lr * group["weight_decay"])
        if grad.ndim > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_var.lerp_(grad.norm(dim=-1, keepdim=True).square() / grad.shape[-1], one_minus_beta2)
            col_var.lerp_(grad.norm(dim=-2, keepdim=True).square() / grad.shape[-2], one_minus_beta2)
            var_estimate = (row_var @ col_var) / row_var.mean(dim=-2, keepdim=True).clamp(min=eps1)
        else:
            state["variance"].lerp_(grad * grad, one_minus_beta2)
            var_estimate = state["variance"].clone()
        update = var_estimate.clamp(min=eps1 * eps1).rsqrt() * grad
        denom = max(1.0, float(update.norm(2).item()) / (math.sqrt(update.numel()) * group["d"]))
        p.add_(update, alpha=-alpha / denom)
