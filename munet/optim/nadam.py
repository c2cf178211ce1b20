"""NAdam: Adam with Nesterov momentum and momentum decay."""

from __future__ import annotations

from munet import _dtype as D
from munet.ops.creation import tensor, zeros_like
from munet.ops.elementwise_math import pow as _pow
from munet.optim.adam import adam_defaults, update_moments
from munet.optim.parameterwise import ParameterwiseOptimizer, check_nonnegative, like_param, step_count, step_counter


class NAdam(ParameterwiseOptimizer):
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
        defaults = adam_defaults(
            lr,
            betas,
            eps,
            weight_decay,
            momentum_decay=momentum_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
        )
        check_nonnegative(("momentum_decay value", momentum_decay))
        super().__init__(params, defaults)

    def init_state(self, p, group) -> dict:
        return {
            "step": step_counter(),
            "mu_product": tensor(1.0, dtype=D.float32),
            "exp_avg": zeros_like(p),
            "exp_avg_sq": zeros_like(p),
        }

    def update(self, p, grad, state, group) -> None:
        """The step count and ``mu_product`` are tensors: float64 host arithmetic becomes float64
        tensor ops, rounded to the parameter's dtype where eager passes a float."""
        beta1, beta2 = group["betas"]
        lr, psi = group["lr"], group["momentum_decay"]
        step = step_count(state)
        bias_correction2 = 1 - _pow(beta2, step)
        mu = beta1 * (1.0 - 0.5 * _pow(0.96, step * psi))
        mu_next = beta1 * (1.0 - 0.5 * _pow(0.96, (step + 1) * psi))
        mu_product = state["mu_product"]
        mu_product.mul_(mu.to(mu_product.dtype))
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        update_moments(exp_avg, exp_avg_sq, grad, beta1, beta2)
        denom = (exp_avg_sq / like_param(bias_correction2, p)).sqrt().add_(group["eps"])
        product = mu_product.to(D.float64)
        p.sub_(grad / denom * like_param(lr * (1.0 - mu) / (1.0 - product), p))
        p.sub_(exp_avg / denom * like_param(lr * mu_next / (1.0 - product * mu_next), p))
