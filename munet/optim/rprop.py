"""Rprop: per-element step sizes that grow while the gradient keeps its sign and shrink when it flips."""

from __future__ import annotations

from munet.ops.creation import full_like, zeros_like
from munet.ops.elementwise import where
from munet.optim.parameterwise import ParameterwiseOptimizer, step_counter


class Rprop(ParameterwiseOptimizer):
    """PyTorch's ``torch.optim.Rprop`` (it has no weight decay, as in PyTorch)."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach=None,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(
            lr=lr,
            etas=etas,
            step_sizes=step_sizes,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        super().__init__(params, defaults)

    def init_state(self, p, group) -> dict:
        return {"step": step_counter(), "prev": zeros_like(p), "step_size": full_like(p, group["lr"])}

    def update(self, p, grad, state, group) -> None:
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        prev, step_size = state["prev"], state["step_size"]
        agreement = grad * prev
        factor = where(agreement > 0, etaplus, where(agreement < 0, etaminus, 1.0)).to(p.dtype)
        step_size.mul_(factor).clamp_(step_size_min, step_size_max)
        # after a sign flip the element does not move, and the next step sees no previous gradient
        grad = where(factor == etaminus, 0.0, grad).to(p.dtype)
        p.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)
