"""Datasets, samplers, collation and the DataLoader, with and without worker processes."""

import contextlib
import functools
import gc
import math
import multiprocessing
import os
import re
import signal
import threading
import time
import traceback
from collections import namedtuple

import numpy as np
import pytest
import torch

import munet
from munet.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    get_worker_info,
    random_split,
)
from tests.reference import assert_close

Point = namedtuple("Point", ["x", "y"])


class Squares(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return {"x": munet.tensor([float(i), float(i * i)]), "label": i % 3, "name": f"s{i}", "w": np.float32(i) / 2}


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, self.n, step):
            yield munet.tensor([i])

    def __len__(self):
        return self.n


class Failing(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            raise KeyError("sample 2 is broken")
        return i


def _batches(loader):
    return [{k: (v.tolist() if isinstance(v, munet.Tensor) else v) for k, v in b.items()} for b in loader]


def test_default_collate_matches_pytorch_structure():
    samples = [(np.ones(2, np.float32) * i, i, 0.5 * i, True, Point(i, [i, i])) for i in range(3)]
    ours = default_collate(samples)
    theirs = torch.utils.data.default_collate(samples)
    assert_close(ours[0], theirs[0])
    assert_close(ours[1], theirs[1])
    assert_close(ours[2], theirs[2])
    assert_close(ours[3], theirs[3])
    assert isinstance(ours[4], Point) and ours[4].y[1].tolist() == theirs[4].y[1].tolist()
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])


def test_sequential_batches_and_drop_last():
    loader = DataLoader(Squares(), batch_size=4)
    batches = _batches(loader)
    assert len(loader) == 3 and len(batches) == 3
    assert batches[0]["x"] == [[0.0, 0.0], [1.0, 1.0], [2.0, 4.0], [3.0, 9.0]]
    assert batches[0]["label"] == [0, 1, 2, 0] and batches[0]["name"] == ["s0", "s1", "s2", "s3"]
    assert batches[2]["w"] == [4.0, 4.5]
    assert len(DataLoader(Squares(), batch_size=4, drop_last=True)) == 2


def test_shuffle_with_generator_is_reproducible_and_a_permutation():
    ds = TensorDataset(munet.arange(20))
    runs = [
        [b[0].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=munet.Generator().manual_seed(7))]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    flat = sorted(x for batch in runs[0] for x in batch)
    assert flat == list(range(20)) and runs[0][0] != [0, 1, 2, 3, 4]


@pytest.mark.parametrize("persistent", [False, True])
def test_workers_yield_the_same_batches_as_the_main_process(persistent):
    ds = Squares()
    expected = _batches(DataLoader(ds, batch_size=3, shuffle=True, generator=munet.Generator().manual_seed(3)))
    loader = DataLoader(
        ds,
        batch_size=3,
        shuffle=True,
        num_workers=2,
        generator=munet.Generator().manual_seed(3),
        persistent_workers=persistent,
    )
    assert _batches(loader) == expected
    assert len(_batches(loader)) == len(expected)  # a second epoch works too


def test_worker_init_fn_and_iterable_sharding():
    seen = munet.tensor(sorted(int(b.item()) for b in DataLoader(Stream(9), batch_size=None, num_workers=3)))
    assert seen.tolist() == list(range(9))
    batches = [b.view(-1).tolist() for b in DataLoader(Stream(8), batch_size=2, num_workers=2)]
    assert batches == [[0, 2], [1, 3], [4, 6], [5, 7]]
    ids = [b[0].item() for b in DataLoader(_WorkerIds(), batch_size=1, num_workers=2, worker_init_fn=_init)]
    assert sorted(ids) == [100, 100, 101, 101]


class _WorkerIds(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return _INIT["id"]


_INIT = {"id": -1}


def _init(worker_id):
    _INIT["id"] = 100 + worker_id


def test_worker_exception_propagates():
    with pytest.raises(KeyError, match="sample 2 is broken"):
        list(DataLoader(Failing(), batch_size=1, num_workers=2))
    with pytest.raises(KeyError, match="sample 2 is broken"):
        list(DataLoader(Failing(), batch_size=1))


@pytest.mark.parametrize("persistent", [False, True])
def test_after_a_worker_exception_the_loader_goes_on(persistent):
    # as PyTorch: the same iterator yields the next batch, and a persistent loader's next epoch works
    loader = DataLoader(Failing(), batch_size=1, num_workers=1, persistent_workers=persistent)
    it = iter(loader)
    assert [next(it).tolist(), next(it).tolist()] == [[0], [1]]
    with pytest.raises(KeyError, match="sample 2 is broken"):
        next(it)
    assert next(it).tolist() == [3]
    with pytest.raises(StopIteration):
        next(it)
    for _ in range(2):
        with pytest.raises(KeyError, match="sample 2 is broken"):
            list(loader)


# A worker that fails must raise in the main process, never hang it. A case that would hang on a
# regression runs in a forked child with a hard limit, so that it fails instead of stalling the suite.


def _in_bounded_child(fn, *args, limit: float = 15.0):
    """``fn(*args)`` in a forked child process (its own process group, which its DataLoader
    workers join); returns what it returns. A child still running after ``limit`` seconds is
    killed with its workers and the test fails."""
    gc.collect()  # no garbage DataLoader iterator of this process for the child to collect and shut down
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_report_to, args=(send, fn, args))
    child.start()
    send.close()
    try:
        if not receive.poll(limit):
            pytest.fail(f"{fn.__name__}{args} still running after {limit} s: the DataLoader hangs")
        outcome, value = receive.recv()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.join()
    if outcome != "returned":
        pytest.fail(value)
    return value


def _report_to(conn, fn, args):
    os.setpgrp()
    try:
        conn.send(("returned", fn(*args)))
    except BaseException:
        conn.send(("raised", traceback.format_exc()))
    finally:
        os._exit(0)


def _error_from_one_worker(dataset, options: dict):
    """The batches a 1-worker DataLoader yields before it raises, and the error's type and message."""
    got = []
    try:
        for batch in DataLoader(dataset, num_workers=1, **options):
            got.append(batch if isinstance(batch, (int, list)) else batch.tolist())
    except Exception as exc:
        return got, type(exc).__name__, str(exc)
    return got, None, None


class _Lock(Dataset):
    """Sample 2 holds a lock, which cannot be pickled."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return threading.Lock() if i == 2 else i


class _LockStream(IterableDataset):
    def __iter__(self):
        yield threading.Lock()


class _RefusesToUnpickle:
    def __reduce__(self):
        return (_refuse, ())


def _refuse():
    raise ValueError("refusing to unpickle")


class _Unpicklable(Dataset):
    """Sample 1 pickles in the worker but fails to unpickle in the main process."""

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return _RefusesToUnpickle() if i == 1 else i


class _RaisesLocalError(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        class LocalError(Exception):  # a class defined in a function cannot be pickled
            pass

        raise LocalError(f"sample {i} is broken")


def _lock_collate(batch):
    return threading.Lock()


UNSENDABLE = {
    # case: (dataset, DataLoader options, batches before the error, error type, what the message says)
    "sample": (_Lock(), {"batch_size": None}, [0, 1], "TypeError", "while sending sample 2 to the main"),
    "sample in a batch": (_Lock(), {"batch_size": 2, "collate_fn": list}, [[0, 1]], "TypeError", "sending sample 2"),
    "collate_fn result": (_Lock(), {"batch_size": 2, "collate_fn": _lock_collate}, [], "TypeError", "samples [0, 1]"),
    "iterable": (_LockStream(), {"batch_size": None}, [], "TypeError", "batch 0 of its iterable dataset"),
    "unpickling": (
        _Unpicklable(),
        {"batch_size": None},
        [0],
        "ValueError",
        "while unpickling batch 1 from DataLoader worker process 0",
    ),
    "exception class": (
        _RaisesLocalError(),
        {"batch_size": None},
        [],
        "RuntimeError",
        "Caught LocalError in DataLoader",
    ),
}


@pytest.mark.parametrize("case", UNSENDABLE)
def test_a_result_that_cannot_be_sent_raises_in_the_main_process(case):
    dataset, options, before, error, message = UNSENDABLE[case]
    got, raised, text = _in_bounded_child(_error_from_one_worker, dataset, options)
    assert (got, raised) == (before, error), text
    assert message in text
    if raised == "TypeError":
        assert "worker process 0" in text and "cannot pickle '_thread.lock' object" in text


class _Sample1Misbehaves(Dataset):
    """Sample 1 runs ``act`` (exit the worker, sleep) before it is returned."""

    def __init__(self, act):
        self.act = act

    def __len__(self):
        return 3

    def __getitem__(self, i):
        if i == 1:
            self.act()
        return i


def test_a_worker_that_exits_raises_with_timeout_zero():
    got, raised, text = _in_bounded_child(
        _error_from_one_worker, _Sample1Misbehaves(functools.partial(os._exit, 3)), {"batch_size": None}
    )
    assert raised == "RuntimeError" and re.fullmatch(r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly", text)


@pytest.mark.parametrize("persistent", [False, True])
def test_timeout_raises_and_terminates_the_stuck_worker(persistent):
    slow = _Sample1Misbehaves(functools.partial(time.sleep, 3))
    loader = DataLoader(slow, batch_size=None, num_workers=1, timeout=0.5, persistent_workers=persistent)
    for _ in range(2 if persistent else 1):  # a persistent loader's next epoch has new workers
        it = iter(loader)
        assert next(it) == 0
        with pytest.raises(RuntimeError, match=r"^DataLoader timed out after 0.5 seconds$"):
            next(it)
        # the worker was still in its 3 s sleep: the error came at the timeout, and the worker was
        # terminated rather than waited for
        assert it.workers[0].exitcode == -signal.SIGTERM


def test_loader_argument_errors():
    ds = Squares()
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 2, False), batch_size=3)
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(ds, num_workers=-1)


def test_samplers_and_datasets():
    ds = TensorDataset(munet.arange(10), munet.arange(10) * 2)
    assert ds[3][1].item() == 6 and len(ds) == 10
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(munet.zeros(3), munet.zeros(4))
    both = ConcatDataset([ds, ds])
    assert len(both) == 20 and both[12][0].item() == 2 and both[-1][0].item() == 9
    sub = Subset(ds, [1, 5])
    assert [s[0].item() for s in sub] == [1, 5]
    assert list(BatchSampler(range(5), 2, drop_last=False)) == [[0, 1], [2, 3], [4]]
    assert len(BatchSampler(range(5), 2, drop_last=True)) == 2
    g = munet.Generator().manual_seed(1)
    assert sorted(RandomSampler(range(6), generator=g)) == list(range(6))
    assert len(list(RandomSampler(range(6), replacement=True, num_samples=20))) == 20
    assert sorted(SubsetRandomSampler([3, 7, 9])) == [3, 7, 9]
    draws = list(WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 200, generator=munet.Generator().manual_seed(0)))
    assert set(draws) <= {1, 3} and 100 < draws.count(3) < 190


def test_random_split_lengths_and_fractions():
    parts = random_split(range(10), [3, 7], generator=munet.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(list(parts[0]) + list(parts[1])) == list(range(10))
    parts = random_split(range(11), [0.5, 0.3, 0.2], generator=munet.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [6, 3, 2]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(range(5), [2, 2])
    assert math.isclose(sum(len(p) for p in parts), 11)


def test_shuffling_works_under_a_vulkan_default_device(vulkan):
    # Index sampling draws from cpu generators (as in PyTorch), whatever the default device is.
    data = TensorDataset(munet.arange(10.0))
    with munet.device(vulkan):
        loader = DataLoader(data, batch_size=4, shuffle=True)
        seen = sorted(v for (batch,) in loader for v in batch.tolist())
        parts = random_split(data, [3, 7])
        weighted = list(WeightedRandomSampler([0.1, 0.9], 5))
    assert seen == [float(i) for i in range(10)]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10)) and len(weighted) == 5


def test_random_sampler_with_replacement_draws_lazily():
    """num_samples=1e10 (80 GB of indices at once) starts at once and is deterministic under a seed."""
    import itertools

    def first(seed, count):
        sampler = RandomSampler(
            range(7), replacement=True, num_samples=int(1e10), generator=munet.Generator().manual_seed(seed)
        )
        assert len(sampler) == int(1e10)
        return list(itertools.islice(iter(sampler), count))

    draws = first(3, 100)
    assert draws == first(3, 100) and draws != first(4, 100)
    assert set(draws) <= set(range(7)) and len(set(draws)) > 1
    counts = [len(list(RandomSampler(range(3), replacement=True, num_samples=k))) for k in (1, 31, 32, 33, 65)]
    assert counts == [1, 31, 32, 33, 65]

    def seeded(num_samples):
        return list(RandomSampler(range(5), True, num_samples, generator=munet.Generator().manual_seed(5)))

    assert seeded(40)[:32] == seeded(32)  # whole chunks of 32, as PyTorch draws them
