"""Adagrad with learning-rate decay."""

from __future__ import annotations

from munet.ops.creation import full_like
from munet.optim.parameterwise import ParameterwiseOptimizer, check_nonnegative, like_param, step_count, step_counter
from munet.sparse.coo import SparseCOOTensor, add_to_dense


class Adagrad(ParameterwiseOptimizer):
    """PyTorch's ``torch.optim.Adagrad``. A sparse gradient updates the accumulator and the parameter
    at its (coalesced) indices only; weight decay is refused with it, as in PyTorch."""

    def check_sparse_grad(self, group: dict) -> None:
        if group["weight_decay"] != 0:
            raise RuntimeError("weight_decay option is not compatible with sparse gradients")

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
        check_nonnegative(
            ("learning rate", lr),
            ("lr_decay value", lr_decay),
            ("weight_decay value", weight_decay),
            ("initial_accumulator_value value", initial_accumulator_value),
            ("epsilon value", eps),
        )
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
        for group in self.param_groups:  # PyTorch creates Adagrad's state with the optimizer
            for p in group["params"]:
                self.state[p].update(self.init_state(p, group))

    def init_state(self, p, group) -> dict:
        return {"step": step_counter(), "sum": full_like(p, group["initial_accumulator_value"])}

    def update(self, p, grad, state, group) -> None:
        if grad.is_sparse:
            self._update_sparse(p, grad, state, group)
            return
        state["sum"].addcmul_(grad, grad, value=1)
        std = state["sum"].sqrt().add_(group["eps"])
        clr = group["lr"] / (1 + (step_count(state) - 1) * group["lr_decay"])
        p.sub_(grad / std * like_param(clr, p))

    def _update_sparse(self, p, grad, state, group) -> None:
        """PyTorch's sparse Adagrad step: the squared (coalesced) values added into ``sum`` at their rows,
        the parameter moved by ``lr_t * values / (sqrt(sum) + eps)`` there (``lr_t`` a host float)."""
        grad = grad.coalesce()  # the update is not linear in the gradient: one value per index
        indices, values = grad._indices(), grad._values()
        at = tuple(indices.unbind(0))
        add_to_dense(state["sum"], SparseCOOTensor._build(indices, values.pow(2), grad.shape, True), out=state["sum"])
        std = state["sum"][at].sqrt_().add_(group["eps"])
        clr = group["lr"] / (1 + (step_count(state).item() - 1) * group["lr_decay"])
        add_to_dense(p, SparseCOOTensor._build(indices, values / std, grad.shape, True), alpha=-clr, out=p)
