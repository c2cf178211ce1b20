"""Adam and AdamW (decoupled weight decay), with AMSGrad."""

from __future__ import annotations

from munet.ops.creation import zeros_like
from munet.ops.elementwise import maximum
from munet.ops.elementwise_math import pow as _pow
from munet.ops.optim_update import adam_param_update_, adam_second_moment_
from munet.optim.parameterwise import ParameterwiseOptimizer, like_param, step_count, step_counter


def adam_defaults(lr, betas, eps, weight_decay, **options) -> dict:
    """The defaults of an Adam-family optimizer: the shared hyperparameters, checked (``ValueError``
    as PyTorch words it), then ``options`` in their order."""
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    return dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, **options)


def update_moments(exp_avg, exp_avg_sq, grad, beta1: float, beta2: float) -> None:
    """Adam's running averages of the gradient and of its square, updated in place (one pass each)."""
    exp_avg.lerp_(grad, 1 - beta1)
    adam_second_moment_(exp_avg_sq, grad, beta2)


class Adam(ParameterwiseOptimizer):
    """PyTorch's ``torch.optim.Adam`` (``decoupled_weight_decay=True`` is AdamW)."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach=None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused=None,
        decoupled_weight_decay: bool = False,
    ):
        defaults = adam_defaults(
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        super().__init__(params, defaults)

    def check_sparse_grad(self, group: dict) -> None:
        raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam instead")

    def init_state(self, p, group) -> dict:
        state = {"step": step_counter(), "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def update(self, p, grad, state, group) -> None:
        beta1, beta2 = group["betas"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        update_moments(exp_avg, exp_avg_sq, grad, beta1, beta2)
        # float64, then float32: the same numbers as eager's host arithmetic on the step count
        step = step_count(state)
        bias_correction1 = 1 - _pow(beta1, step)
        # on another device than the cpu step count: computed on the cpu, then moved as eager's floats are
        bias_correction2_sqrt = like_param((1 - _pow(beta2, step)).sqrt(), p)
        if group["amsgrad"]:
            state["max_exp_avg_sq"].copy_(maximum(state["max_exp_avg_sq"], exp_avg_sq))
            exp_avg_sq = state["max_exp_avg_sq"]
        step_size = like_param(group["lr"] / bias_correction1, p)
        adam_param_update_(p, exp_avg, exp_avg_sq, bias_correction2_sqrt, group["eps"], step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2), PyTorch's ``torch.optim.AdamW``."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach=None,
        capturable: bool = False,
        differentiable: bool = False,
        fused=None,
    ):
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )
