"""DataLoader worker processes: fetch samples, collate, and send batches back as NumPy arrays."""

from __future__ import annotations

import queue
import random
import traceback
from dataclasses import dataclass

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
    if auto_collation:
        return collate_fn([dataset[i] for i in indices])
    return collate_fn(dataset[indices])


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
        if init_error is not None:
            result_queue.put((send_idx, init_error))
            continue
        try:
            if is_iterable:
                data = fetch_iterable(iterator, batch_size, auto_collation, drop_last, collate_fn)
            else:
                data = fetch_map(dataset, indices, auto_collation, collate_fn)
            result_queue.put((send_idx, to_transport(data)))
        except StopIteration:
            result_queue.put((send_idx, _IterableExhausted()))
        except Exception as exc:
            result_queue.put((send_idx, ExceptionWrapper(exc, f"in DataLoader worker process {worker_id}")))
