"""``DistributedSampler``: each rank of a data-parallel job reads its own share of a dataset.

As PyTorch's: the indices (shuffled with seed ``seed + epoch`` when ``shuffle``) are padded by
repeating from the start until they divide evenly among the replicas (or cut to a multiple
with ``drop_last``), and rank r takes every ``num_replicas``-th index starting at r. Call
``set_epoch(epoch)`` each epoch so the shuffle changes. MuNet's generator is not PyTorch's, so
the shuffled order differs from PyTorch's for the same seed; every rank agrees on it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from munet.utils.data.sampler import Sampler


def _default(value, name: str, query: str) -> int:
    if value is not None:
        return value
    from munet import distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(f"DistributedSampler: pass {name}= or call munet.distributed.init_process_group first")
    return getattr(dist, query)()


class DistributedSampler(Sampler):
    """Indices ``rank, rank + num_replicas, ...`` of the (shuffled, padded) dataset indices."""

    def __init__(
        self,
        dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        num_replicas = _default(num_replicas, "num_replicas", "get_world_size")
        rank = _default(rank, "rank", "get_rank")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be at least 1, got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        if drop_last and len(dataset) % num_replicas != 0:
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            from munet.ops.random import Generator, randperm

            generator = Generator().manual_seed(self.seed + self.epoch)
            indices = randperm(len(self.dataset), generator=generator, device="cpu").tolist()
        else:
            indices = list(range(len(self.dataset)))
        if self.drop_last:
            indices = indices[: self.total_size]
        else:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration shuffle with seed ``seed + epoch``."""
        self.epoch = epoch
