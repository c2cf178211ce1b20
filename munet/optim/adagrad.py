"""Adagrad with learning-rate decay."""

from __future__ import annotations

from munet.autograd.grad_mode import no_grad
from munet.ops.creation import full_like
from munet.optim.optimizer import Optimizer, like_param, step_count, step_counter


class Adagrad(Optimizer):
    """PyTorch's ``torch.optim.Adagrad``."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach=None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused=None,
    ):
        for name, value in (
            ("learning rate", lr),
            ("lr_decay value", lr_decay),
            ("weight_decay value", weight_decay),
            ("initial_accumulator_value value", initial_accumulator_value),
            ("epsilon value", eps),
        ):
            if value < 0.0:
                raise ValueError(f"Invalid {name}: {value}")
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            eps=eps,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = step_counter()
                state["sum"] = full_like(p, group["initial_accumulator_value"])

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for group in self.param_groups:
            lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
            for p, grad in self._grads(group):
                state = self.state[p]
                state["step"].add_(1)
                grad = self._weight_decay(p, grad, group)
                state["sum"].addcmul_(grad, grad, value=1)
                std = state["sum"].sqrt().add_(eps)
                p.sub_(grad / std * like_param(lr / (1 + (step_count(state) - 1) * lr_decay), p))
        return loss
