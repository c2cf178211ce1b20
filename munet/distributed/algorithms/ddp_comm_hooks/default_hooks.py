"""PyTorch's default DDP communication hooks: ``allreduce_hook`` and ``fp16_compress_hook``.

A hook is ``hook(state, bucket: GradBucket) -> Future`` whose value is the bucket's averaged
gradients (a flat tensor like ``bucket.buffer()``); register one with
``DistributedDataParallel.register_comm_hook(state, hook)``. Here ``state`` is the process group
(None: the default group).
"""

from __future__ import annotations

from munet import distributed as dist
from munet._dtype import float16


def allreduce_hook(process_group, bucket):
    """Average the bucket over the ranks (divide by the world size, then SUM), as DDP does without a hook."""
    group = process_group if process_group is not None else dist.group.WORLD
    tensor = bucket.buffer().div_(dist.get_world_size(group))
    return dist.all_reduce(tensor, group=group, async_op=True).get_future().then(lambda fut: fut.value()[0])


def fp16_compress_hook(process_group, bucket):
    """Average the bucket in float16 (half the bytes on the wire), then cast back to the bucket's dtype."""
    group = process_group if process_group is not None else dist.group.WORLD
    buffer = bucket.buffer()
    compressed = buffer.to(float16).div_(dist.get_world_size(group))

    def decompress(fut):
        buffer.copy_(fut.value()[0])
        return buffer

    return dist.all_reduce(compressed, group=group, async_op=True).get_future().then(decompress)
