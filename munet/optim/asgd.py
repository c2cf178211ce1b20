"""ASGD: SGD with a decaying step size and a running average of the iterates (``ax``)."""

from __future__ import annotations

from munet import _dtype as D
from munet.ops.creation import ones_like, tensor, zeros_like
from munet.ops.elementwise import maximum, where
from munet.optim.parameterwise import ParameterwiseOptimizer, check_nonnegative, like_param, step_count, step_counter


class ASGD(ParameterwiseOptimizer):
    """PyTorch's ``torch.optim.ASGD``.

    ``eta`` (the step size) and ``mu`` (the averaging weight) are float32 scalar tensors in the
    state, as in PyTorch, and are recomputed from the step count with tensor ops after each update,
    so no value is read on the host and the step compiles.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0.0,
        foreach=None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ):
        check_nonnegative(("learning rate", lr), ("weight_decay value", weight_decay))
        defaults = dict(
            lr=lr,
            lambd=lambd,
            alpha=alpha,
            t0=t0,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        super().__init__(params, defaults)

    def init_state(self, p, group) -> dict:
        return {
            "step": step_counter(),
            "eta": tensor(float(group["lr"]), dtype=D.float32),
            "mu": tensor(1.0, dtype=D.float32),
            "ax": zeros_like(p),
        }

    def update(self, p, grad, state, group) -> None:
        lr, lambd, alpha = group["lr"], group["lambd"], group["alpha"]
        eta, mu, ax = state["eta"], state["mu"], state["ax"]
        eta64 = eta.to(D.float64)
        p.mul_(like_param(1 - lambd * eta64, p))
        p.sub_(grad * like_param(eta64, p))
        # PyTorch copies the parameter while mu is 1 (before t0), and averages after
        mu_p = like_param(mu, p)
        ax.copy_(where(mu_p == 1, p, ax + (p - ax) * mu_p))
        step = step_count(state)
        eta.copy_((lr / (1 + lambd * lr * step) ** alpha).to(D.float32))
        mu.copy_((1 / maximum(step - group["t0"], ones_like(step))).to(D.float32))
