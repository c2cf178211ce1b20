"""Datasets: map-style and iterable, plus TensorDataset, StackDataset, ConcatDataset, Subset and random_split."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from munet._tensor import Tensor


class Dataset:
    """A map-style dataset: ``__getitem__(index)`` and usually ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: implement ``__iter__``."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are tuples of the given tensors indexed along their first dimension."""

    def __init__(self, *tensors: Tensor):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor")
        n = tensors[0].shape[0]
        for i, t in enumerate(tensors):
            if t.shape[0] != n:
                raise ValueError(
                    f"TensorDataset: size mismatch between tensors: tensor 0 has {n} rows, tensor {i} has {t.shape[0]}"
                )
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class StackDataset(Dataset):
    """Samples are tuples (``StackDataset(a, b)``) or dicts (``StackDataset(x=a, y=b)``) of the same
    index in each dataset; all datasets must have one length."""

    def __init__(self, *args: Dataset, **kwargs: Dataset):
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like input/output, "
                "but both types are given."
            )
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])
        if any(self._length != len(dataset) for dataset in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: dataset[index] for k, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def _column(self, dataset, indices: list) -> list:
        """``dataset``'s items at ``indices``, batched through its ``__getitems__`` when it has one."""
        if not callable(getattr(dataset, "__getitems__", None)):
            return [dataset[i] for i in indices]
        items = dataset.__getitems__(indices)
        if len(items) != len(indices):
            raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, got {len(items)}")
        return list(items)

    def __getitems__(self, indices: list) -> list:
        if isinstance(self.datasets, dict):
            columns = {k: self._column(dataset, indices) for k, dataset in self.datasets.items()}
            return [{k: column[n] for k, column in columns.items()} for n in range(len(indices))]
        columns = [self._column(dataset, indices) for dataset in self.datasets]
        return [tuple(column[n] for column in columns) for n in range(len(indices))]

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset):
    """The concatenation of several map-style datasets."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        offset = idx - (self.cumulative_sizes[which - 1] if which else 0)
        return self.datasets[which][offset]


class ChainDataset(IterableDataset):
    """Iterable datasets chained one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: Dataset, lengths: Sequence, generator=None) -> list[Subset]:
    """Split into non-overlapping random subsets of the given lengths (or fractions summing to 1)."""
    from munet.ops.random import default_generator, randperm

    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(len(dataset) * frac)) for frac in lengths]
        remainder = len(dataset) - sum(counts)
        for i in range(remainder):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(lengths), generator=generator or default_generator, device="cpu").tolist()
    out = []
    offset = 0
    for n in lengths:
        out.append(Subset(dataset, indices[offset : offset + n]))
        offset += n
    return out
