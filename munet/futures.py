"""``munet.Future`` (PyTorch's ``torch.futures.Future``): a value that is set once, with callbacks;
``collect_all`` and ``wait_all`` as ``torch.futures``'.

MuNet runs work in the calling thread, so the futures it hands out (``munet.jit.fork``) are
complete when returned; a Future made by user code completes when ``set_result`` or
``set_exception`` is called (from any thread: ``wait`` blocks until then).
"""

from __future__ import annotations

import threading

__all__ = ["Future", "collect_all", "wait_all"]


class Future:
    """A result to come: ``wait()`` returns it (or raises its exception), ``then(fn)`` chains."""

    def __init__(self, *, devices=None):
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._value = None
        self._error: BaseException | None = None
        self._callbacks: list = []

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self):
        self._done.wait()
        return self.value()

    def value(self):
        """The result of a completed future (its exception raised); it must be done."""
        if not self.done():
            raise RuntimeError("Future.value: the future is not completed yet (use wait())")
        if self._error is not None:
            raise self._error
        return self._value

    def set_result(self, result) -> None:
        self._complete(result, None)

    def set_exception(self, result: BaseException) -> None:
        if not isinstance(result, BaseException):
            raise TypeError(f"set_exception: expected an exception, got {type(result).__name__}")
        self._complete(None, result)

    def _complete(self, value, error) -> None:
        with self._lock:
            if self._done.is_set():
                raise RuntimeError("Future can only be marked completed once")
            self._value, self._error = value, error
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def add_done_callback(self, callback) -> None:
        """Call ``callback(self)`` once complete (now, if it already is)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback) -> Future:
        """A new future holding ``callback(self)`` (or what it raised) once this one completes."""
        chained = Future()

        def run(done: Future) -> None:
            try:
                result = callback(done)
            except Exception as error:  # noqa: BLE001 - handed to the chained future, as PyTorch does
                chained.set_exception(error)
                return
            chained.set_result(result)

        self.add_done_callback(run)
        return chained


def collect_all(futures: list) -> Future:
    """A future of the list of ``futures``, complete when all of them are."""
    out = Future()
    remaining = [len(futures)]
    lock = threading.Lock()
    if not futures:
        out.set_result([])
        return out

    def one_done(_):
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            out.set_result(list(futures))

    for future in futures:
        future.add_done_callback(one_done)
    return out


def wait_all(futures: list) -> list:
    """The values of ``futures``, waiting for each (the first exception is raised)."""
    return [future.wait() for future in futures]
