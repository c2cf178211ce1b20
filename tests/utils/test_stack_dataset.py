"""StackDataset: tuple and dict samples, batched __getitems__, errors, against torch.utils.data.StackDataset."""

import pytest
import torch

import munet
from munet.utils.data import DataLoader, StackDataset, TensorDataset


class _Batched:
    """A dataset with ``__getitems__``: StackDataset must use it for batches."""

    def __init__(self):
        self.calls = 0

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i * 10

    def __getitems__(self, indices):
        self.calls += 1
        return [i * 10 for i in indices]


def test_tuple_and_dict_samples_match_torch():
    for lib in (munet, torch):
        data = lib.utils.data
        tup = data.StackDataset(data.TensorDataset(lib.arange(4)), [5, 6, 7, 8])
        dct = data.StackDataset(x=[1, 2, 3, 4], y=["a", "b", "c", "d"])
        assert len(tup) == 4 and tup[2][1] == 7 and int(tup[2][0][0]) == 2
        assert dct[1] == {"x": 2, "y": "b"}
        assert dct.__getitems__([0, 3]) == [{"x": 1, "y": "a"}, {"x": 4, "y": "d"}]


def test_getitems_of_nested_datasets_and_dataloader():
    batched = _Batched()
    ds = StackDataset(batched, TensorDataset(munet.arange(4.0)))

    items = ds.__getitems__([1, 2])
    assert [i[0] for i in items] == [10, 20] and batched.calls == 1
    batch = next(iter(DataLoader(StackDataset(a=[1, 2, 3], b=[4.0, 5.0, 6.0]), batch_size=3)))
    assert batch["a"].tolist() == [1, 2, 3] and batch["b"].tolist() == [4.0, 5.0, 6.0]


def test_errors():
    with pytest.raises(ValueError, match="Size mismatch"):
        StackDataset([1, 2], [1])
    with pytest.raises(ValueError, match="both types"):
        StackDataset([1], x=[1])
    with pytest.raises(ValueError, match="At least one"):
        StackDataset()
