"""Adamax: Adam with the infinity norm."""

from __future__ import annotations

from munet.ops.creation import zeros_like
from munet.ops.elementwise import maximum
from munet.ops.elementwise_math import pow as _pow
from munet.optim.adam import adam_defaults
from munet.optim.parameterwise import ParameterwiseOptimizer, like_param, step_count, step_counter


class Adamax(ParameterwiseOptimizer):
    """PyTorch's ``torch.optim.Adamax``."""

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        foreach=None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ):
        defaults = adam_defaults(
            lr,
            betas,
            eps,
            weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        super().__init__(params, defaults)

    def init_state(self, p, group) -> dict:
        return {"step": step_counter(), "exp_avg": zeros_like(p), "exp_inf": zeros_like(p)}

    def update(self, p, grad, state, group) -> None:
        beta1, beta2 = group["betas"]
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs().add_(group["eps"])))
        p.sub_(exp_avg / exp_inf * like_param(group["lr"] / (1 - _pow(beta1, step_count(state))), p))
