"""Muon (Jordan et al., 2024) with PyTorch's ``torch.optim.Muon`` update rule, for 2-D parameters.

The momentum buffer is an exponential average of the gradients (``buf.lerp_(grad, 1 - momentum)``);
the update (Nesterov: ``grad.lerp(buf, momentum)``) is orthogonalized by ``ns_steps`` Newton-Schulz
iterations ``X <- a X + (b A + c A^2) X`` with ``A = X X^T``, run in bfloat16 as PyTorch does, and
applied with the learning rate scaled for the matrix shape (``adjust_lr_fn``) after decoupled
weight decay ``p <- p (1 - lr weight_decay)``.
"""

from __future__ import annotations

import math

from munet import _dtype as D
from munet.autograd.grad_mode import no_grad
from munet.ops.creation import zeros_like
from munet.optim.optimizer import Optimizer

__all__ = ["Muon"]

EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.775
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5
NS_DTYPE = D.bfloat16  # the dtype of the Newton-Schulz iteration (PyTorch's)


def zeropower_via_newtonschulz(grad, ns_coefficients, ns_steps: int, eps: float):
    """An approximately orthogonal matrix with ``grad``'s singular vectors, in ``NS_DTYPE`` (bfloat16, as PyTorch)."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    x = grad.to(NS_DTYPE)
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        gram_update = gram.addmm(gram, gram, beta=b, alpha=c)
        x = x.addmm(gram_update, x, beta=a)
    return x.T if tall else x


def adjust_lr(lr: float, adjust_lr_fn: str | None, param_shape) -> float:
    """``lr`` scaled for an ``A x B`` matrix: ``sqrt(max(1, A / B))`` ("original") or ``0.2 sqrt(max(A, B))``."""
    rows, cols = param_shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


class Muon(Optimizer):
    """PyTorch's ``torch.optim.Muon`` (2-D parameters only; optimize the others with, e.g., AdamW)."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients=(DEFAULT_A, DEFAULT_B, DEFAULT_C),
        eps: float = EPS,
        ns_steps: int = DEFAULT_NS_STEPS,
        adjust_lr_fn: str | None = None,
    ):
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = {"lr": lr, "weight_decay": weight_decay, "momentum": momentum, "nesterov": nesterov,
                    "ns_coefficients": ns_coefficients, "eps": eps, "ns_steps": ns_steps, "adjust_lr_fn": adjust_lr_fn}  # fmt: skip
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(
                        f"Muon only supports 2D parameters whereas we found a parameter with size: {p.size()}"
                    )

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("Muon does not support sparse gradients")
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = zeros_like(grad)
                buf = state["momentum_buffer"]
                buf.lerp_(grad, 1 - momentum)
                update = grad.lerp(buf, momentum) if group["nesterov"] else buf
                update = zeropower_via_newtonschulz(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
                p.mul_(1 - lr * group["weight_decay"])
                p.add_(update.to(p.dtype), alpha=-adjust_lr(lr, group["adjust_lr_fn"], p.shape))
        return loss
