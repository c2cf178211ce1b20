"""Float32 master weights for models held in float16/bfloat16."""

from __future__ import annotations

from munet import _dtype as D
from munet.autograd.grad_mode import no_grad
from munet.nn.module import _zero_grads


class MasterWeightOptimizer:
    """Wraps an optimizer built over low-precision parameters so it updates float32 copies.

    The wrapped optimizer's groups are switched to float32 master copies. ``step()`` copies the
    model's gradients into the masters (in float32), steps, and writes the masters back into the
    model's parameters (rounded once). Small updates therefore accumulate instead of vanishing
    in float16/bfloat16 rounding.

    >>> opt = MasterWeightOptimizer(munet.optim.AdamW(model.bfloat16().parameters(), lr=1e-3))
    """

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self._pairs = []
        for group in optimizer.param_groups:
            masters = []
            for p in group["params"]:
                master = p.detach().to(D.float32).clone().requires_grad_(p.requires_grad)
                self._pairs.append((p, master))
                masters.append(master)
            group["params"] = masters

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def zero_grad(self, set_to_none: bool = True) -> None:
        _zero_grads((p for pair in self._pairs for p in pair), set_to_none)

    @no_grad()
    def step(self, closure=None):
        for model_param, master in self._pairs:
            master.grad = None if model_param.grad is None else model_param.grad.to(D.float32)
        loss = self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        for model_param, master in self._pairs:
            model_param.copy_(master)
        return loss

    def master_params(self):
        return [m for _, m in self._pairs]

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "masters": [m.detach() for _, m in self._pairs]}

    @no_grad()
    def load_state_dict(self, state_dict: dict) -> None:
        masters = state_dict["masters"]
        if len(masters) != len(self._pairs):
            raise ValueError(
                f"MasterWeightOptimizer: state has {len(masters)} master weights, this optimizer has {len(self._pairs)}"
            )
        for (_, master), saved in zip(self._pairs, masters):
            if tuple(saved.shape) != tuple(master.shape):
                raise ValueError(
                    f"MasterWeightOptimizer: master weight of shape {tuple(saved.shape)} does not fit {tuple(master.shape)}"
                )
        self.optimizer.load_state_dict(state_dict["optimizer"])
        for (model_param, master), saved in zip(self._pairs, masters):
            master.copy_(saved)
            model_param.copy_(master)
