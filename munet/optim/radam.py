"""RAdam: Adam with a rectified adaptive learning rate."""

from __future__ import annotations

from munet.ops.creation import zeros_like
from munet.ops.elementwise import where
from munet.ops.elementwise_math import pow as _pow
from munet.optim.adam import adam_defaults, update_moments
from munet.optim.parameterwise import ParameterwiseOptimizer, like_param, step_count, step_counter


class RAdam(ParameterwiseOptimizer):
    """PyTorch's ``torch.optim.RAdam``."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
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
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            decoupled_weight_decay=decoupled_weight_decay,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def init_state(self, p, group) -> dict:
        return {"step": step_counter(), "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}

    def update(self, p, grad, state, group) -> None:
        """The step count is a tensor: both of eager's branches are computed and
        ``where(rho_t > 5, ...)`` picks one (the rectified one is NaN where it is not picked)."""
        beta1, beta2 = group["betas"]
        lr = group["lr"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        update_moments(exp_avg, exp_avg_sq, grad, beta1, beta2)
        step = step_count(state)
        bias_correction1 = 1 - _pow(beta1, step)
        bias_correction2 = 1 - _pow(beta2, step)
        corrected = exp_avg / like_param(bias_correction1, p)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * _pow(beta2, step) / bias_correction2
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)).sqrt()
        adaptive_lr = like_param(bias_correction2.sqrt(), p) / exp_avg_sq.sqrt().add_(group["eps"])
        rectified = corrected * lr * adaptive_lr * like_param(rect, p)
        p.add_(where((rho_t > 5.0).to(p.device), rectified, corrected * lr), alpha=-1.0)
