"""DataLoader worker processes: fetch samples, collate, and send batches back as NumPy arrays.

A worker pickles each result itself and puts the bytes on the result queue, so that a result that
cannot be pickled reaches the main process as an error naming the sample.
"""

from __future__ import annotations

import queue
import random
import traceback
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

from munet._tensor import Tensor

_TENSOR = "__munet_tensor__"


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Inside a DataLoader worker: its id, the worker count, its seed and its dataset copy."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process with its traceback."""

    def __init__(self, exc: BaseException, where: str):
        self.exc_type = type(exc)
        self.message = f"Caught {type(exc).__name__} {where}.\nOriginal {traceback.format_exc()}"

    def reraise(self):
        try:
            exc = self.exc_type(self.message)
        except Exception:
            exc = RuntimeError(self.message)
        raise exc


class _IterableExhausted:
    pass


def to_transport(obj):
    """Tensors become tagged NumPy arrays, so batches cross process boundaries without Tensor pickling."""
    if isinstance(obj, Tensor):
        return (_TENSOR, obj.detach().cpu().contiguous().numpy())
    if isinstance(obj, dict):
        return {k: to_transport(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(to_transport(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_transport(v) for v in obj)
    return obj


def from_transport(obj):
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str) and obj[0] == _TENSOR:
        from munet.ops.creation import from_numpy

        return from_numpy(obj[1])
    if isinstance(obj, dict):
        return {k: from_transport(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(from_transport(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(from_transport(v) for v in obj)
    return obj


def fetch_map(dataset, indices, auto_collation: bool, collate_fn):
    return collate_map(read_map(dataset, indices, auto_collation), auto_collation, collate_fn)


def read_map(dataset, indices, auto_collation: bool) -> list:
    """The ``(index, sample)`` pairs of one batch of a map-style dataset."""
    if auto_collation:
        return [(i, dataset[i]) for i in indices]
    return [(indices, dataset[indices])]


def collate_map(samples: list, auto_collation: bool, collate_fn):
    if auto_collation:
        return collate_fn([sample for _, sample in samples])
    return collate_fn(samples[0][1])


def fetch_iterable(iterator, batch_size, auto_collation: bool, drop_last: bool, collate_fn):
    """The next batch from an iterable dataset's iterator; raises StopIteration when exhausted."""
    if not auto_collation:
        return collate_fn(next(iterator))
    batch = []
    for item in iterator:
        batch.append(item)
        if len(batch) == batch_size:
            break
    if not batch or (drop_last and len(batch) < batch_size):
        raise StopIteration
    return collate_fn(batch)


def worker_loop(
    dataset,
    is_iterable,
    index_queue,
    result_queue,
    collate_fn,
    auto_collation,
    batch_size,
    drop_last,
    seed,
    worker_init_fn,
    worker_id,
    num_workers,
):
    """Runs in a worker process until it receives ``None``."""
    global _worker_info
    from munet.ops.random import manual_seed

    manual_seed(seed)
    random.seed(seed)
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
    init_error = None
    try:
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
    except Exception as exc:  # reported with the first request
        init_error = ExceptionWrapper(exc, f"in DataLoader worker process {worker_id} (worker_init_fn)")
    iterator = iter(dataset) if is_iterable and init_error is None else None
    while True:
        try:
            request = index_queue.get(timeout=5.0)
        except queue.Empty:
            continue
        if request is None:
            break
        if request == "reset":
            iterator = iter(dataset) if is_iterable else None
            continue
        send_idx, indices = request
        samples = None
        try:
            if init_error is not None:
                data = init_error
            elif is_iterable:
                data = to_transport(fetch_iterable(iterator, batch_size, auto_collation, drop_last, collate_fn))
            else:
                samples = read_map(dataset, indices, auto_collation)
                data = to_transport(collate_map(samples, auto_collation, collate_fn))
        except StopIteration:
            data = _IterableExhausted()
        except Exception as exc:
            data = ExceptionWrapper(exc, f"in DataLoader worker process {worker_id}")
        result_queue.put((send_idx, pickle_result(data, samples, send_idx, worker_id)))


def pickle_result(data, samples: list | None, send_idx: int, worker_id: int) -> bytes:
    """``data`` pickled here rather than by the queue's feeder thread, which prints a result that
    cannot be pickled and drops it, leaving the main process waiting for it. Such a result becomes
    the error the main process raises, naming the sample (``samples``: the batch's ``(index,
    sample)`` pairs; None for an iterable dataset, whose batches are named by number)."""
    if isinstance(data, ExceptionWrapper):
        return _pickle_error(data)
    try:
        return bytes(ForkingPickler.dumps(data))
    except Exception as exc:
        what = _unsendable_part(samples, send_idx)
        return _pickle_error(
            ExceptionWrapper(exc, f"in DataLoader worker process {worker_id} while sending {what} to the main process")
        )


def _pickle_error(error: ExceptionWrapper) -> bytes:
    try:
        return bytes(ForkingPickler.dumps(error))
    except Exception:  # the exception's class cannot be pickled (defined in a function): its name is in the message
        error.exc_type = RuntimeError
        return bytes(ForkingPickler.dumps(error))


def _unsendable_part(samples: list | None, send_idx: int) -> str:
    if samples is None:
        return f"batch {send_idx} of its iterable dataset"
    for index, sample in samples:
        try:
            ForkingPickler.dumps(to_transport(sample))
        except Exception:
            return f"sample {index}"
    return f"the batch of samples {[index for index, _ in samples]} (the result of collate_fn)"
