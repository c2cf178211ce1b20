"""Samplers: the order in which a DataLoader visits dataset indices."""

from __future__ import annotations

from collections.abc import Iterator, Sequence


def _fresh_generator(generator):
    """The given generator, or a new one seeded from the default stream (as PyTorch does)."""
    from munet.ops.random import Generator, default_generator, randint

    if generator is not None:
        return generator
    seed = int(randint(0, 2**62, (), generator=default_generator, device="cpu").item())
    return Generator().manual_seed(seed)


class Sampler:
    """Base class: iterate over indices."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


_DRAW_CHUNK = 32  # indices RandomSampler(replacement=True) draws at a time (PyTorch's figure)


class RandomSampler(Sampler):
    """A random permutation (or, with ``replacement``, independent draws) of the indices."""

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        from munet.ops.random import randint, randperm

        n = len(self.data_source)
        generator = _fresh_generator(self.generator)
        if self.replacement:
            # drawn in chunks as PyTorch does, so a huge num_samples never holds all its indices at once
            for _ in range(self.num_samples // _DRAW_CHUNK):
                yield from randint(0, n, (_DRAW_CHUNK,), generator=generator, device="cpu").tolist()
            yield from randint(0, n, (self.num_samples % _DRAW_CHUNK,), generator=generator, device="cpu").tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=generator, device="cpu").tolist()
        yield from randperm(n, generator=generator, device="cpu").tolist()[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in random order."""

    def __init__(self, indices: Sequence[int], generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        from munet.ops.random import randperm

        for i in randperm(len(self.indices), generator=_fresh_generator(self.generator), device="cpu").tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """Indices drawn with probability proportional to ``weights``."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        from munet.ops.creation import tensor

        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        self.weights = (
            tensor(weights, dtype=None, device="cpu").double() if not hasattr(weights, "double") else weights.double()
        )
        if self.weights.ndim != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape {tuple(self.weights.shape)}"
            )
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        from munet.ops.random import multinomial

        yield from multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups indices from ``sampler`` into lists of ``batch_size``."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
