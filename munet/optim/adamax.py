"""Adamax: Adam with the infinity norm."""

from __future__ import annotations

from munet.autograd.grad_mode import no_grad
from munet.ops.creation import zeros_like
from munet.ops.elementwise import maximum
from munet.ops.elementwise_math import pow as _pow
from munet.optim.adam import check_adam_hyperparameters
from munet.optim.optimizer import Optimizer, like_param, step_count, step_counter


class Adamax(Optimizer):
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
        check_adam_hyperparameters(lr, betas, eps, weight_decay)
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        super().__init__(params, defaults)

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps = group["lr"], group["eps"]
            for p, grad in self._grads(group):
                state = self.state[p]
                if not state:
                    state["step"] = step_counter()
                    state["exp_avg"] = zeros_like(p)
                    state["exp_inf"] = zeros_like(p)
                state["step"].add_(1)
                grad = self._weight_decay(p, grad, group)
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
                p.sub_(exp_avg / exp_inf * like_param(lr / (1 - _pow(beta1, step_count(state))), p))
        return loss
