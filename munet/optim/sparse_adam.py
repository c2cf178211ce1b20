"""SparseAdam: Adam for sparse gradients, PyTorch's ``torch.optim.SparseAdam``.

MuNet has no sparse tensors (``nn.Embedding(sparse=True)`` is refused), so no gradient MuNet
computes is sparse. A step over a dense gradient raises the error PyTorch raises for one.
"""

from __future__ import annotations

from munet.autograd.grad_mode import no_grad
from munet.optim.optimizer import Optimizer


class SparseAdam(Optimizer):
    """PyTorch's ``torch.optim.SparseAdam``: the constructor's checks, and its refusal of dense gradients."""

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
        complex_params = [
            [i, j] for i, group in enumerate(self.param_groups) for j, p in enumerate(group["params"]) if p.is_complex()
        ]
        if complex_params:
            raise ValueError(
                f"Complex params at indices {complex_params}: SparseAdam does not support complex parameters"
            )

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    raise RuntimeError(
                        "SparseAdam does not support dense gradients, please consider Adam instead "
                        "(MuNet has no sparse gradients)"
                    )
        return loss
