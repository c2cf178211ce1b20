"""The step shared by optimizers that update each parameter from its gradient and its own state.

:class:`ParameterwiseOptimizer` runs the loop every such optimizer repeats (SGD, RMSprop,
Adagrad and the Adam family): for each parameter with a gradient, negated when the group
maximizes, it creates the state on the first step (``init_state``), counts the step, applies
weight decay (L2 into the gradient, or decoupled into the parameter) and calls the subclass's
``update``. A sparse gradient (``nn.Embedding(sparse=True)``) reaches ``update`` only in the
optimizers that take one (``check_sparse_grad``), as in PyTorch; the others raise PyTorch's error. Step counts are tensors and bias corrections are computed from them with tensor ops
(PyTorch's ``capturable`` formulation), so the same code runs eagerly and under ``munet.compile``.
"""

from __future__ import annotations

from munet._tensor import Tensor
from munet.autograd.grad_mode import no_grad
from munet.optim.optimizer import Optimizer


def check_nonnegative(*named: tuple[str, float]) -> None:
    """``ValueError`` as PyTorch words it for a negative hyperparameter:
    ``check_nonnegative(("learning rate", lr))`` raises ``Invalid learning rate: -1.0``."""
    for name, value in named:
        if value < 0.0:
            raise ValueError(f"Invalid {name}: {value}")


class ParameterwiseOptimizer(Optimizer):
    """An optimizer whose update of a parameter reads only its gradient, its state and the group.

    A subclass gives ``init_state(p, group) -> dict`` (the state of a parameter's first step; a
    ``"step"`` entry, see :func:`step_counter`, is counted before each update) and
    ``update(p, grad, state, group)`` (``grad`` already maximized and weight-decayed). One that takes
    sparse COO gradients overrides ``check_sparse_grad``.
    """

    def check_sparse_grad(self, group: dict) -> None:
        """Raise unless this optimizer updates from a sparse gradient under ``group``'s options."""
        raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    self.check_sparse_grad(group)
                if group.get("maximize", False):
                    grad = -grad
                state = self.state[p]
                if not state:
                    state.update(self.init_state(p, group))
                if "step" in state:
                    state["step"].add_(1)
                self.update(p, _weight_decay(p, grad, group), state, group)
        return loss

    def init_state(self, p: Tensor, group: dict) -> dict:
        """The state of ``p`` before its first update (none by default)."""
        return {}


def _weight_decay(p: Tensor, grad: Tensor, group: dict) -> Tensor:
    """L2 penalty added to the gradient, or (decoupled) applied to the parameter in place."""
    wd = group.get("weight_decay", 0)
    if wd == 0:
        return grad
    if group.get("decoupled_weight_decay", False):
        p.mul_(1 - group["lr"] * wd)
        return grad
    return grad.add(p, alpha=wd)


def step_counter() -> Tensor:
    """A fresh per-parameter step count: a float32 scalar tensor, as in PyTorch's state dicts."""
    from munet import _dtype as D
    from munet.ops.creation import tensor

    return tensor(0.0, dtype=D.float32)


def step_count(state) -> Tensor:
    """``state["step"]`` as a float64 tensor: bias corrections computed from it with tensor ops
    round as host float arithmetic does, and run the same eagerly and under ``munet.compile``."""
    from munet import _dtype as D

    return state["step"].to(D.float64)


def like_param(x: Tensor, p: Tensor) -> Tensor:
    """A float64 coefficient computed from the step count, in ``p``'s dtype on ``p``'s device."""
    return x.to(p.dtype).to(p.device)
