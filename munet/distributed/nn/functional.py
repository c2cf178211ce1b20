"""Differentiable collectives: the backward of a sum over ranks is a sum over ranks of the gradients."""

from __future__ import annotations

from munet.autograd.function import Function
from munet.distributed import collectives
from munet.distributed.process_group import ReduceOp


class _AllReduceSum(Function):
    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        result = tensor.clone()
        collectives.all_reduce(result, ReduceOp.SUM, group=group)
        return result

    @staticmethod
    def backward(ctx, grad):
        # Rank r's input reaches every rank's output, so its gradient sums every rank's output gradient.
        result = grad.clone()
        collectives.all_reduce(result, ReduceOp.SUM, group=ctx.group)
        return result, None


def all_reduce(tensor, op: ReduceOp = ReduceOp.SUM, group=None):
    """A new tensor holding the sum of ``tensor`` over the ranks, differentiable (only SUM, as in PyTorch's autograd)."""
    if op is not ReduceOp.SUM:
        raise ValueError(f"munet.distributed.nn.functional.all_reduce: only ReduceOp.SUM is differentiable, got {op}")
    return _AllReduceSum.apply(tensor, group)
