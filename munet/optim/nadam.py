"""NAdam: Adam with Nesterov momentum and momentum decay."""

from __future__ import annotations

from munet.autograd.grad_mode import no_grad
from munet.ops.creation import tensor, zeros_like
from munet.ops.elementwise_math import pow as _pow
from munet.optim.adam import check_adam_hyperparameters, update_moments
from munet.optim.optimizer import Optimizer, like_param, step_count, step_counter


class NAdam(Optimizer):
    """PyTorch's ``torch.optim.NAdam``."""

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach=None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ):
        check_adam_hyperparameters(lr, betas, eps, weight_decay)
        if momentum_decay < 0.0:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            momentum_decay=momentum_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    @no_grad()
    def step(self, closure=None):
        from munet import _dtype as D

        loss = self._run_closure(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, psi = group["lr"], group["eps"], group["momentum_decay"]
            for p, grad in self._grads(group):
                state = self.state[p]
                if not state:
                    state["step"] = step_counter()
                    state["mu_product"] = tensor(1.0, dtype=D.float32)
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                state["step"].add_(1)
                grad = self._weight_decay(p, grad, group)
                _update(p, grad, state, beta1, beta2, lr, eps, psi)
        return loss


def _update(p, grad, state, beta1, beta2, lr, eps, psi) -> None:
    """``step``'s update with the step count and ``mu_product`` as tensors: float64 host arithmetic
    becomes float64 tensor ops, rounded to the parameter's dtype where eager passes a float."""
    from munet import _dtype as D

    step = step_count(state)
    bias_correction2 = 1 - _pow(beta2, step)
    mu = beta1 * (1.0 - 0.5 * _pow(0.96, step * psi))
    mu_next = beta1 * (1.0 - 0.5 * _pow(0.96, (step + 1) * psi))
    mu_product = state["mu_product"]
    mu_product.mul_(mu.to(mu_product.dtype))
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    update_moments(exp_avg, exp_avg_sq, grad, beta1, beta2)
    denom = (exp_avg_sq / like_param(bias_correction2, p)).sqrt().add_(eps)
    product = mu_product.to(D.float64)
    p.sub_(grad / denom * like_param(lr * (1.0 - mu) / (1.0 - product), p))
    p.sub_(exp_avg / denom * like_param(lr * mu_next / (1.0 - product * mu_next), p))
