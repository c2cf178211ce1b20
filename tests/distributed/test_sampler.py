"""DistributedSampler: PyTorch's padding and striding exactly (unshuffled), and the shuffle's properties.

MuNet's generator differs from PyTorch's, so shuffled orders are compared by properties: a
permutation fixed by seed + epoch, padded and split among the ranks the way PyTorch does.
"""

import math

import pytest
import torch.utils.data as tdata

from munet.utils.data import DataLoader, DistributedSampler

CASES = [
    (n, replicas, drop_last) for n in (1, 5, 8, 10, 13) for replicas in (1, 2, 3, 4, 7) for drop_last in (False, True)
]


def shards(n, replicas, **kwargs):
    return [list(DistributedSampler(range(n), replicas, r, **kwargs)) for r in range(replicas)]


@pytest.mark.parametrize("n,replicas,drop_last", CASES)
def test_unshuffled_indices_are_pytorchs(n, replicas, drop_last):
    ours = shards(n, replicas, shuffle=False, drop_last=drop_last)
    theirs = [
        list(tdata.DistributedSampler(range(n), replicas, r, shuffle=False, drop_last=drop_last))
        for r in range(replicas)
    ]
    assert ours == theirs
    assert [len(DistributedSampler(range(n), replicas, r, drop_last=drop_last)) for r in range(replicas)] == [
        len(t) for t in theirs
    ]


@pytest.mark.parametrize("n,replicas,drop_last", CASES)
def test_shuffled_indices_are_a_padded_permutation_split_by_rank(n, replicas, drop_last):
    if drop_last and n < replicas:
        return
    parts = shards(n, replicas, shuffle=True, seed=3, drop_last=drop_last)
    assert len({len(p) for p in parts}) == 1
    interleaved = [parts[i % replicas][i // replicas] for i in range(sum(map(len, parts)))]
    total = len(interleaved)
    if drop_last:
        assert total == n - n % replicas and len(set(interleaved)) == total
    else:
        assert total == math.ceil(n / replicas) * replicas
        permutation = interleaved[:n]
        assert sorted(permutation) == list(range(n))
        assert interleaved[n:] == (permutation * math.ceil(total / n))[: total - n]


def test_set_epoch_and_seed_change_the_order_and_are_deterministic():
    first = shards(50, 2, seed=1)
    assert first == shards(50, 2, seed=1)
    assert first != shards(50, 2, seed=2)
    sampler = DistributedSampler(range(50), 2, 0, seed=1)
    sampler.set_epoch(1)
    assert list(sampler) != first[0]
    assert list(sampler) == shards(50, 2, seed=2)[0], "epoch e shuffles with seed + e, as PyTorch"


def test_drop_last_smaller_than_world():
    assert shards(2, 3, drop_last=True) == [[], [], []]


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="Invalid rank 2"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4), num_replicas=2)


def test_works_as_a_dataloader_sampler():
    loader = DataLoader(list(range(10)), batch_size=2, sampler=DistributedSampler(range(10), 2, 1, shuffle=False))
    assert [b.tolist() for b in loader] == [[1, 3], [5, 7], [9]]
