"""Adadelta: step sizes from running averages of squared gradients and squared updates."""

from __future__ import annotations

from munet.ops.creation import zeros_like
from munet.optim.parameterwise import ParameterwiseOptimizer, check_nonnegative, step_counter


class Adadelta(ParameterwiseOptimizer):
    """PyTorch's ``torch.optim.Adadelta``."""

    def __init__(
        self,
        params,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach=None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        check_nonnegative(("learning rate", lr), ("epsilon value", eps), ("weight_decay value", weight_decay))
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        defaults = dict(
            lr=lr,
            rho=rho,
            eps=eps,
            weight_decay=weight_decay,
            maximize=maximize,
            capturable=capturable,
            foreach=foreach,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def init_state(self, p, group) -> dict:
        return {"step": step_counter(), "square_avg": zeros_like(p), "acc_delta": zeros_like(p)}

    def update(self, p, grad, state, group) -> None:
        rho, eps = group["rho"], group["eps"]
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        delta = acc_delta.add(eps).sqrt_().div_(square_avg.add(eps).sqrt_()).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-group["lr"])
