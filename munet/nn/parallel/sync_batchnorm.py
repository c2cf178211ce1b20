"""``SyncBatchNorm``: batch norm whose training statistics cover the whole global batch.

In training with more than one rank, the per-channel sums behind the mean and the variance
are summed over the ranks with a differentiable all-reduce, so forward normalizes with the
statistics of the concatenated batch and backward sums the statistics' gradients over the
ranks too. In eval mode, or on one rank, it is ``BatchNorm``.
"""

from __future__ import annotations

from munet.autograd.grad_mode import no_grad
from munet.nn.module import Module
from munet.nn.modules.normalization import _BatchNorm


class SyncBatchNorm(_BatchNorm):
    """Batch norm over ``(N, C, ...)`` inputs with statistics synchronized across ``process_group``."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group=None,
        device=None,
        dtype=None,
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input) -> None:
        if input.ndim < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.ndim}D input)")

    def forward(self, input):
        from munet import distributed as dist

        self._check_input_dim(input)
        synced = self.training and dist.is_initialized() and dist.get_world_size(self.process_group) > 1
        if not synced:
            return super().forward(input)
        return self._synced_batch_norm(input)

    def _synced_batch_norm(self, input):
        from munet.distributed.nn.functional import all_reduce
        from munet.ops.creation import tensor

        dims = [0, *range(2, input.ndim)]
        shape = [1, -1] + [1] * (input.ndim - 2)
        local_count = input.numel() // input.shape[1]
        count = all_reduce(tensor(float(local_count), dtype=input.dtype, device=input.device), group=self.process_group)
        mean = all_reduce(input.sum(dims), group=self.process_group) / count
        centered = input - mean.reshape(shape)
        var = all_reduce((centered * centered).sum(dims), group=self.process_group) / count
        out = centered / (var.reshape(shape) + self.eps).sqrt()
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        if self.bias is not None:
            out = out + self.bias.reshape(shape)
        if self.track_running_stats:
            self._update_running_stats(mean.detach(), var.detach(), float(count.item()))
        return out

    def _update_running_stats(self, mean, var, count: float) -> None:
        with no_grad():
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked.item()) if self.momentum is None else self.momentum
            unbiased = var * (count / max(count - 1.0, 1.0))
            self.running_mean.mul_(1 - factor).add_(mean * factor)
            self.running_var.mul_(1 - factor).add_(unbiased * factor)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with every BatchNorm*D replaced by a SyncBatchNorm sharing its parameters and buffers."""
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            converted = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
            )
            for name in ("weight", "bias"):
                if getattr(module, name, None) is not None:
                    setattr(converted, name, getattr(module, name))
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                converted.register_buffer(name, getattr(module, name))
            converted.train(module.training)
            return converted
        for name, child in list(module.named_children()):
            module.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return module
