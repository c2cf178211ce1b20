"""``munet.DataParallel``: one training step whose batch is split over several devices of this process.

Each shard runs ``loss_fn`` on its device, in its own thread, against a private copy of the
parameters there; the gradients come back to the parameters' device and are averaged weighted
by shard size, always summed in the order of ``devices`` (so a fixed device list gives the same
result every run); then the optimizer takes one step. With a ``loss_fn`` that returns the mean
over its shard, this is the step single-device training takes on the whole batch.
"""

from __future__ import annotations

from itertools import chain

from munet._tensor import Tensor
from munet.autograd import grad as autograd_grad
from munet.nn.module import Module
from munet.nn.parallel.data_parallel import module_device, resolve_devices
from munet.nn.parallel.replicate import parallel_apply, replicate_module
from munet.ops.convert import to_device
from munet.ops.movement import tensor_split


class DataParallel:
    """``step = munet.DataParallel(loss_fn, model, optimizer, ["cpu", "vulkan:0"]); loss = step(x, y)``.

    ``params`` is a module or a list of tensors; ``loss_fn(replica, *shard, **shard_kwargs)`` gets
    the module's copy (or the list of tensor copies) on the shard's device and returns a scalar
    loss. Tensors among the call's arguments are split on dim 0 into ``len(devices)`` shards whose
    sizes differ by at most one (fewer when the batch is smaller); other arguments go to every
    shard. A call zeroes the gradients, sets each parameter's ``.grad`` to the weighted average,
    steps ``optimizer`` and returns the weighted average loss on the parameters' device. A module's
    buffers (running statistics) are updated by the first shard only, as ``nn.DataParallel`` does.
    """

    def __init__(self, loss_fn, params, optimizer, devices):
        if not callable(loss_fn):
            raise TypeError(f"munet.DataParallel: loss_fn must be callable, got {type(loss_fn).__name__}")
        self.loss_fn = loss_fn
        self.module = params if isinstance(params, Module) else None
        self.params = [p for p in (params.parameters() if self.module is not None else params)]
        if not all(isinstance(p, Tensor) for p in self.params):
            raise TypeError("munet.DataParallel: params must be a munet.nn.Module or a list of tensors")
        home = (
            module_device(self.module) if self.module is not None else (self.params[0].device if self.params else None)
        )
        if home is None:
            raise ValueError("munet.DataParallel: params is empty")
        for t in chain(self.params, self.module.buffers() if self.module is not None else ()):
            if t.device != home:
                raise ValueError(f"munet.DataParallel: all params must be on one device; found {home} and {t.device}")
        self.home = home
        self.optimizer = optimizer
        self.devices = resolve_devices(devices, home, "munet.DataParallel")
        if not self.devices:
            raise ValueError("munet.DataParallel: devices must name at least one device")

    def __call__(self, *batch, **kwargs) -> Tensor:
        sizes = {t.shape[0] for t in chain(batch, kwargs.values()) if isinstance(t, Tensor)}
        if len(sizes) != 1:
            raise ValueError(
                "munet.DataParallel: the call's tensors must all have the same size on dim 0 (the batch), "
                f"got sizes {sorted(sizes)}"
                if sizes
                else "munet.DataParallel: the call has no tensor to split"
            )
        total = sizes.pop()
        count = min(len(self.devices), total) or 1
        devices = self.devices[:count]

        def pieces(value):
            if isinstance(value, Tensor):
                return [to_device(piece, d) for piece, d in zip(tensor_split(value, count, 0), devices)]
            return [value] * count

        split_args = list(zip(*(pieces(a) for a in batch))) if batch else [()] * count
        split_kwargs = [dict(zip(kwargs, values)) for values in zip(*(pieces(v) for v in kwargs.values()))] or [
            {}
        ] * count
        weights = [
            next(t.shape[0] for t in chain(a, k.values()) if isinstance(t, Tensor)) / total
            for a, k in zip(split_args, split_kwargs)
        ]
        replicas = [self._replicate(d, first=i == 0) for i, d in enumerate(devices)]
        results = parallel_apply(
            [self._shard_step] * count, [(r, *a) for r, a in zip(replicas, split_args)], split_kwargs, devices
        )
        if self.module is not None and devices[0] != self.home:
            for mine, theirs in zip(self.module.buffers(), replicas[0][0].buffers()):
                mine.copy_(theirs)
        self.optimizer.zero_grad()
        for j, p in enumerate(self.params):
            average = None
            for (_, grads), w in zip(results, weights):
                if grads[j] is not None:
                    part = to_device(grads[j], p.device) * w
                    average = part if average is None else average + part
            if average is not None:
                p.grad = average
        self.optimizer.step()
        return sum(to_device(loss, self.home) * w for (loss, _), w in zip(results, weights))

    def _replicate(self, d, first: bool) -> tuple:
        """The shard's view of the parameters on ``d`` (a module copy or a list) and its leaves, in ``params`` order.

        Made in the calling thread, before any shard runs, so no shard's buffer update races a copy.
        """
        leaves = {id(p): p.detach().to(d).requires_grad_(p.requires_grad) for p in self.params}
        ordered = [leaves[id(p)] for p in self.params]
        if self.module is None:
            return ordered, ordered
        shares_buffers = first and d == self.home
        replica = replicate_module(
            self.module,
            lambda p: leaves[id(p)],
            lambda b: b if shares_buffers else b.detach().to(d, copy=True),
        )
        return replica, ordered

    def _shard_step(self, replica: tuple, *args, **kwargs) -> tuple:
        """Run in one shard's thread: the loss of ``loss_fn`` and its gradients for every parameter (None where unused)."""
        view, leaves = replica
        loss = self.loss_fn(view, *args, **kwargs)
        if not isinstance(loss, Tensor) or loss.ndim != 0:
            raise RuntimeError(
                "munet.DataParallel: loss_fn must return a scalar tensor, got "
                f"{tuple(loss.shape) if isinstance(loss, Tensor) else type(loss).__name__}"
            )
        trained = [leaf for leaf in leaves if leaf.requires_grad]
        grads = iter(autograd_grad(loss, trained, allow_unused=True))
        return loss.detach(), [next(grads) if leaf.requires_grad else None for leaf in leaves]
