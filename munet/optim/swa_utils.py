"""Weight averaging: ``AveragedModel`` (SWA and EMA), ``update_bn`` and the ``SWALR`` scheduler."""

from __future__ import annotations

import copy
import itertools
import math

from munet import _dtype as D
from munet.autograd.grad_mode import no_grad
from munet.nn.module import Module
from munet.ops.creation import tensor
from munet.ops.elementwise import where
from munet.optim.lr_scheduler import LRScheduler

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]


def get_ema_multi_avg_fn(decay: float = 0.999):
    """Exponential moving average over lists of parameters: ``ema += (1 - decay) * (p - ema)``."""

    @no_grad()
    def ema_update(ema_params, current_params, num_averaged):
        for ema, current in zip(ema_params, current_params):
            if ema.is_floating_point():
                ema.lerp_(current, 1 - decay)
            else:
                ema.copy_(current)

    return ema_update


def get_swa_multi_avg_fn():
    """Equal-weight running average over lists of parameters."""

    @no_grad()
    def swa_update(averaged_params, current_params, num_averaged):
        # avg += (current - avg) / (n + 1) with n a tensor: no host read, so it works inside munet.compile
        for avg, current in zip(averaged_params, current_params):
            if avg.is_floating_point():
                avg.add_((current - avg) / (num_averaged + 1))
            else:
                avg.copy_(current)

    return swa_update


def get_ema_avg_fn(decay: float = 0.999):
    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters are a running (SWA) or exponential (EMA) average.

    >>> ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    >>> ema.update_parameters(model)  # after each optimizer step

    ``update_parameters`` never reads ``n_averaged`` on the host: the first update (a plain copy)
    is selected with ``where(n_averaged == 0, current, averaged)``, so it also runs inside a
    ``munet.compile``d step, where ``n_averaged`` and the averages are state of the graph.
    """

    def __init__(self, model: Module, device=None, avg_fn=None, multi_avg_fn=None, use_buffers: bool = False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=D.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @no_grad()
    def update_parameters(self, model: Module) -> None:
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine = list(self.module.parameters())
            theirs = list(model.parameters())
        if len(mine) != len(theirs):
            raise ValueError(f"AveragedModel: model has {len(theirs)} tensors to average, the average has {len(mine)}")
        current = [p.detach().to(a.device) for a, p in zip(mine, theirs)]
        averaged = [a.detach() for a in mine]
        n = self.n_averaged
        if self.avg_fn is not None:
            updates = [self.avg_fn(a, c, n.to(a.device)) for a, c in zip(averaged, current)]
        else:
            updates = averaged
            if averaged:
                (self.multi_avg_fn or get_swa_multi_avg_fn())(averaged, current, n.to(averaged[0].device))
        first = {}
        for a, c, u in zip(averaged, current, updates):
            if a.device not in first:
                first[a.device] = (n == 0).to(a.device)
            a.copy_(where(first[a.device], c, u))
        if not self.use_buffers:
            for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                b_avg.detach().copy_(b_model.detach().to(b_avg.device))
        self.n_averaged.add_(1)


def _batch_norm_layers(model: Module) -> list:
    from munet.nn.modules.normalization import _BatchNorm

    return [m for m in model.modules() if isinstance(m, _BatchNorm)]


@no_grad()
def update_bn(loader, model: Module, device=None) -> None:
    """Recompute BatchNorm running statistics with one pass over ``loader`` (cumulative average)."""
    layers = _batch_norm_layers(model)
    if not layers:
        return
    momenta = {}
    for layer in layers:
        layer.reset_running_stats()
        momenta[layer] = layer.momentum
        layer.momentum = None
    was_training = model.training
    model.train()
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for layer, momentum in momenta.items():
        layer.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to ``swa_lr`` over ``anneal_epochs`` (cos or linear), then hold it."""

    def __init__(self, optimizer, swa_lr, anneal_epochs: int = 10, anneal_strategy: str = "cos", last_epoch: int = -1):
        swa_lrs = swa_lr if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(optimizer.param_groups)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2 if self.anneal_strategy == "cos" else t

    @staticmethod
    def _initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [self._initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in self.optimizer.param_groups]
        alpha = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(self.optimizer.param_groups, prev_lrs)]
