"""SparseAdam: Adam for sparse gradients, PyTorch's ``torch.optim.SparseAdam``.

Each step coalesces a parameter's sparse gradient (``nn.Embedding(sparse=True)`` gives one) and
updates the moments and the parameter at its indices only, with PyTorch's arithmetic: the moments
move by ``(1 - beta) * (new - old)`` there, and the parameter by
``lr * sqrt(1 - beta2**t) / (1 - beta1**t) * m / (sqrt(v) + eps)``, ``t`` the parameter's own step
count (a Python int, as in PyTorch's state). A dense gradient raises PyTorch's error.
"""

from __future__ import annotations

import math

from munet.autograd.grad_mode import no_grad
from munet.ops.creation import zeros_like
from munet.optim.optimizer import Optimizer


class SparseAdam(Optimizer):
    """PyTorch's ``torch.optim.SparseAdam``: the masked Adam update of parameters with sparse gradients."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, maximize: bool = False):
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize})
        sparse_params = _indices_where(self.param_groups, lambda p: p.is_sparse)
        if sparse_params:
            raise ValueError(f"Sparse params at indices {sparse_params}: SparseAdam requires dense parameter tensors")
        complex_params = _indices_where(self.param_groups, lambda p: p.is_complex())
        if complex_params:
            raise ValueError(
                f"Complex params at indices {complex_params}: SparseAdam does not support complex parameters"
            )

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for group in self.param_groups:
            with_grad = []
            for p in group["params"]:  # every gradient is checked before any parameter moves, as in PyTorch
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
                state = self.state[p]
                if not state:
                    state.update(step=0, exp_avg=zeros_like(p), exp_avg_sq=zeros_like(p))
                state["step"] += 1
                with_grad.append(p)
            for p in with_grad:
                _update(p, p.grad, self.state[p], group)
        return loss


def _indices_where(groups, test) -> list:
    return [[i, j] for i, group in enumerate(groups) for j, p in enumerate(group["params"]) if test(p)]


def _update(p, grad, state, group) -> None:
    """One SparseAdam step of ``p`` (PyTorch's ``F.sparse_adam`` for one parameter)."""
    beta1, beta2 = group["betas"]
    if group["maximize"]:
        grad = -grad
    grad = grad.coalesce()  # the update is not linear in the gradient: one value per index
    values = grad._values()
    if values.numel() == 0:
        return
    at = tuple(grad._indices().unbind(0))
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    # old <- b * old + (1 - b) * new, written old += (1 - b) * (new - old) at the gradient's rows
    old_exp_avg = exp_avg[at]
    exp_avg_update = values.sub(old_exp_avg).mul_(1 - beta1)
    exp_avg.index_put_(at, exp_avg_update, accumulate=True)
    old_exp_avg_sq = exp_avg_sq[at]
    exp_avg_sq_update = values.pow(2).sub_(old_exp_avg_sq).mul_(1 - beta2)
    exp_avg_sq.index_put_(at, exp_avg_sq_update, accumulate=True)
    numer = exp_avg_update.add_(old_exp_avg)
    denom = exp_avg_sq_update.add_(old_exp_avg_sq).sqrt_().add_(group["eps"])
    step = state["step"]
    step_size = group["lr"] * math.sqrt(1 - beta2**step) / (1 - beta1**step)
    p.index_put_(at, -step_size * numer.div_(denom), accumulate=True)
