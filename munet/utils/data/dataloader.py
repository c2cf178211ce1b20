"""``DataLoader``: batches from a dataset, in the main process or in worker processes.

With ``num_workers > 0`` the main process keeps drawing indices from the sampler (so the
batches are the same as without workers, for the same generator) and hands index batches to
workers round-robin, ``prefetch_factor`` per worker in flight; results come back in order.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import queue
import time
from multiprocessing.reduction import ForkingPickler

from munet import metrics
from munet._tensor import Tensor
from munet.utils.data import _worker
from munet.utils.data.collate import default_collate, default_convert
from munet.utils.data.dataset import IterableDataset
from munet.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler

_log = logging.getLogger(__name__)


class _InfiniteNone:
    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """PyTorch's ``torch.utils.data.DataLoader`` (map-style and iterable datasets, workers).

    With workers, what goes wrong in one raises in the main process instead of hanging it:
    an exception in the dataset or ``collate_fn`` is re-raised with its worker traceback; a result
    that cannot be pickled raises the pickling error naming the worker and the sample index (the
    batch number for an iterable dataset); a worker that exits is reported within a second,
    "DataLoader worker (pid(s) X) exited unexpectedly"; with ``timeout > 0`` a batch not received
    within ``timeout`` seconds raises "DataLoader timed out after N seconds". The last two terminate
    the workers at once (as does dropping an iterator mid-epoch), and a persistent loader starts
    new ones for its next epoch. After the other errors the same iterator goes on with the next
    batch, as in PyTorch. As in PyTorch, with ``timeout=0`` (the default) a live worker that never
    returns (a dataset blocked in a call) makes the main process wait for it: set ``timeout`` to
    bound that wait. (PyTorch itself waits forever for a result that cannot be pickled.)
    """

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler=None,
        batch_sampler=None,
        num_workers: int = 0,
        collate_fn=None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing. let num_workers > 0 to enable multiprocessing."
            )
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers > 0 else prefetch_factor
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.generator = generator
        self._is_iterable = isinstance(dataset, IterableDataset)
        if self._is_iterable:
            if shuffle not in (None, False):
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if self._is_iterable:
                sampler = _InfiniteNone()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.collate_fn = collate_fn or (default_collate if batch_sampler is not None else default_convert)
        self.pin_memory = pin_memory
        self._iterator = None

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        if self._is_iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else -(-length // self.batch_size)
            return length
        return len(self._index_sampler)

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None or self._iterator._shutdown:  # none yet, or stopped by a timeout or dead worker
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator.reset()
            return self._iterator
        return _MultiProcessIter(self)


def _pinned(batch):
    """``pin_memory=True``: every cpu tensor of ``batch`` (through tuples, lists and dicts) in pinned
    memory, so ``.to("cuda", non_blocking=True)`` is asynchronous; as is without CUDA (PyTorch warns
    and does nothing without an accelerator; MuNet's Vulkan uploads need no pinning)."""
    import munet.cuda

    if not munet.cuda.is_available():
        return batch
    if isinstance(batch, Tensor):
        return batch.pin_memory() if batch.device.type == "cpu" else batch
    if isinstance(batch, dict):
        return type(batch)({k: _pinned(v) for k, v in batch.items()})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(_pinned(v) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_pinned(v) for v in batch)
    return batch


def _base_seed(loader: DataLoader) -> int:
    """One draw from the loader's generator per epoch, with or without workers (as PyTorch does),
    so the sampler sees the same stream either way; workers are seeded from it."""
    from munet.ops.random import default_generator, randint

    return int(randint(0, 2**62, (), generator=loader.generator or default_generator, device="cpu").item())


class _SingleProcessIter:
    def __init__(self, loader: DataLoader):
        self.loader = loader
        self.base_seed = _base_seed(loader)
        self.indices = iter(loader._index_sampler)
        self.dataset_iter = iter(loader.dataset) if loader._is_iterable else None

    def __iter__(self):
        return self

    @metrics.time_dataloader_wait
    def __next__(self):
        loader = self.loader
        if loader._is_iterable:
            batch = _worker.fetch_iterable(
                self.dataset_iter, loader.batch_size, loader._auto_collation, loader.drop_last, loader.collate_fn
            )
        else:
            batch = _worker.fetch_map(loader.dataset, next(self.indices), loader._auto_collation, loader.collate_fn)
        return _pinned(batch) if loader.pin_memory else batch

    def __len__(self) -> int:
        return len(self.loader)


class _MultiProcessIter:
    _POLL = 1.0

    def __init__(self, loader: DataLoader):
        self.loader = loader
        method = loader.multiprocessing_context or (
            "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        )
        ctx = multiprocessing.get_context(method) if isinstance(method, str) else method
        self.result_queue = ctx.Queue()
        self.index_queues = []
        self.workers = []
        base_seed = _base_seed(loader)
        for wid in range(loader.num_workers):
            index_queue = ctx.Queue()
            worker = ctx.Process(
                target=_worker.worker_loop,
                args=(
                    loader.dataset,
                    loader._is_iterable,
                    index_queue,
                    self.result_queue,
                    loader.collate_fn,
                    loader._auto_collation,
                    loader.batch_size,
                    loader.drop_last,
                    base_seed + wid,
                    loader.worker_init_fn,
                    wid,
                    loader.num_workers,
                ),
                daemon=True,
            )
            worker.start()
            _log.debug("DataLoader: started worker %d (pid %d)", wid, worker.pid)
            self.index_queues.append(index_queue)
            self.workers.append(worker)
        self._shutdown = False
        self._owner_pid = os.getpid()
        self._start_epoch()

    def _start_epoch(self) -> None:
        self.indices = iter(self.loader._index_sampler)
        self.send_idx = 0
        self.rcvd_idx = 0
        self.pending: dict[int, int] = {}  # send index -> worker id
        self.buffer: dict = {}
        self.active = [True] * len(self.workers)
        self.next_worker = 0
        for _ in range(self.loader.prefetch_factor * len(self.workers)):
            self._dispatch()

    def reset(self) -> None:
        """Start a new epoch with the same (persistent) workers."""
        self._drain()
        _base_seed(self.loader)
        if self.loader._is_iterable:
            for q in self.index_queues:
                q.put("reset")
        self._start_epoch()

    def _drain(self) -> None:
        while self.pending:
            idx, _ = self._get()
            self.pending.pop(idx, None)

    def _dispatch(self) -> None:
        if not any(self.active):
            return
        for _ in range(len(self.workers)):
            wid = self.next_worker
            self.next_worker = (self.next_worker + 1) % len(self.workers)
            if self.active[wid]:
                break
        try:
            indices = next(self.indices)
        except StopIteration:
            return
        self.index_queues[wid].put((self.send_idx, indices))
        self.pending[self.send_idx] = wid
        self.send_idx += 1

    def _get(self):
        """The next ``(send index, result)``, an ``ExceptionWrapper`` if it fails to unpickle.
        Checks every ``_POLL`` seconds that the workers live, and gives up after ``timeout`` seconds
        (if set); either way the workers are terminated and the error raised."""
        timeout = self.loader.timeout
        deadline = time.monotonic() + timeout if timeout else math.inf
        while True:
            try:
                idx, payload = self.result_queue.get(timeout=max(0.0, min(self._POLL, deadline - time.monotonic())))
            except queue.Empty:
                dead = [w for w in self.workers if not w.is_alive()]
                if dead:
                    self.shutdown(terminate=True)
                    raise RuntimeError(
                        f"DataLoader worker (pid(s) {', '.join(str(w.pid) for w in dead)}) exited unexpectedly"
                    ) from None
                if time.monotonic() >= deadline:
                    self.shutdown(terminate=True)
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None
                continue
            try:
                return idx, ForkingPickler.loads(payload)
            except Exception as exc:  # raised in its turn, as a worker's exception, naming batch and worker
                wid = self.pending[idx]
                where = (
                    f"while unpickling batch {idx} from DataLoader worker process {wid} (pid {self.workers[wid].pid})"
                )
                return idx, _worker.ExceptionWrapper(exc, where)

    def __iter__(self):
        return self

    def __len__(self) -> int:
        return len(self.loader)

    @metrics.time_dataloader_wait
    def __next__(self):
        while True:
            if self.rcvd_idx in self.buffer:
                data = self.buffer.pop(self.rcvd_idx)
                self.rcvd_idx += 1
                if isinstance(data, _worker._IterableExhausted):
                    continue
                self._dispatch()
                if isinstance(data, _worker.ExceptionWrapper):  # as PyTorch: the next call goes on with the next batch
                    data.reraise()
                batch = _worker.from_transport(data)
                return _pinned(batch) if self.loader.pin_memory else batch
            if self.rcvd_idx not in self.pending:
                if not self.loader.persistent_workers:
                    self.shutdown()
                raise StopIteration
            idx, data = self._get()
            wid = self.pending.pop(idx)
            if isinstance(data, _worker._IterableExhausted):
                self.active[wid] = False
                self._requeue_after_exhaustion()
            self.buffer[idx] = data

    def _requeue_after_exhaustion(self) -> None:
        """An iterable worker ran dry: keep the other workers busy instead."""
        self._dispatch()

    def shutdown(self, terminate: bool = False) -> None:
        """Stop the workers: ask them to exit and wait up to 5 s each, or (``terminate``: after a
        timeout or a dead worker, or for a dropped iterator) terminate them at once."""
        if self._shutdown or os.getpid() != self._owner_pid:  # a forked copy of this iterator owns no workers
            return
        self._shutdown = True
        for q in self.index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for w in self.workers:
            if terminate:
                w.terminate()
            w.join(timeout=1 if terminate else 5)
            if w.is_alive():
                w.kill()
                w.join()
            _log.debug("DataLoader: worker pid %d exited (exit code %s)", w.pid, w.exitcode)
        for q in [*self.index_queues, self.result_queue]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        # an iterator dropped mid-epoch: its workers hold only prefetched batches, and when the
        # garbage collector runs this, the queues may already be closed, so a worker would not hear
        # the request to exit
        self.shutdown(terminate=True)
