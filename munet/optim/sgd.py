"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""

from __future__ import annotations

from munet.optim.parameterwise import ParameterwiseOptimizer, check_nonnegative


class SGD(ParameterwiseOptimizer):
    """PyTorch's ``torch.optim.SGD`` (single-tensor update rule, same defaults).

    Sparse gradients work as in PyTorch: without momentum the parameter's rows at the gradient's
    indices move; with momentum the buffer starts as a sparse copy of the first gradient and stays
    sparse (a dense gradient later meets PyTorch's ``add(sparse, dense)`` error, and so does weight decay).
    """

    def check_sparse_grad(self, group: dict) -> None:
        return None  # sparse gradients flow through update's tensor ops

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach=None,
        differentiable: bool = False,
        fused=None,
    ):
        check_nonnegative(("learning rate", lr), ("momentum value", momentum), ("weight_decay value", weight_decay))
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
            foreach=foreach,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)

    def update(self, p, grad, state, group) -> None:
        momentum = group["momentum"]
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:  # the first step's buffer is its (decayed) gradient, as in PyTorch
                buf = state["momentum_buffer"] = grad.clone().detach()
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
            grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
        p.add_(grad, alpha=-group["lr"])
