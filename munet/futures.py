"""``munet.futures``: PyTorch's ``torch.futures.Future`` for values that become ready later.

A ``Future`` is completed with ``set_result``/``set_exception``, or made by an operation that
completes it when waited on: ``Work.get_future()`` of a collective (its value is the list of
output tensors), and ``future.then(callback)``, whose value is ``callback(future)`` once
``future`` is done. MuNet runs no completion thread, so such a future is resolved by the first
``wait()`` (or a ``done()`` that finds the operation finished); ``wait()`` on a future that
nothing will complete raises instead of blocking forever.
"""

from __future__ import annotations

__all__ = ["Future", "collect_all", "wait_all"]


class Future:
    """``done()``, ``wait()``, ``value()``, ``then(callback)``, ``add_done_callback``, ``set_result``."""

    def __init__(self, *, devices=None):
        self._done = False
        self._value = None
        self._error: BaseException | None = None
        self._resolve = None  # callable giving the value, for futures an operation completes
        self._poll = None  # callable: True once the operation finished
        self._callbacks: list = []

    @classmethod
    def completed_by(cls, resolve, poll=None) -> Future:
        """A future whose value is ``resolve()``, computed on the first wait (or a ``done()`` after ``poll()``)."""
        future = cls()
        future._resolve, future._poll = resolve, poll
        return future

    def _complete(self) -> None:
        resolve, self._resolve = self._resolve, None
        try:
            value = resolve()
        except Exception as error:  # the future holds it; wait() raises it
            self.set_exception(error)
            return
        self.set_result(value)

    def done(self) -> bool:
        if not self._done and self._resolve is not None and self._poll is not None and self._poll():
            self._complete()
        return self._done

    def wait(self):
        """The value, once complete; raises the future's exception."""
        if not self._done:
            if self._resolve is None:
                raise RuntimeError("Future.wait: nothing will complete this future (set_result was never called)")
            self._complete()
        if self._error is not None:
            raise self._error
        return self._value

    def value(self):
        """The value of a completed future (raises its exception)."""
        if not self.done():
            raise RuntimeError("Future.value: the future is not completed yet; call wait()")
        return self.wait()

    def then(self, callback) -> Future:
        """A future holding ``callback(self)`` once this one is done."""

        def resolve():
            self.wait()
            return callback(self)

        return Future.completed_by(resolve, self.done)

    def add_done_callback(self, callback) -> None:
        """Run ``callback(self)`` when this future completes (now, if it has)."""
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def set_result(self, result) -> None:
        self._finish(result, None)

    def set_exception(self, result: BaseException) -> None:
        if not isinstance(result, BaseException):
            raise TypeError(f"Future.set_exception: expected an exception, got {type(result).__name__}")
        self._finish(None, result)

    def _finish(self, value, error) -> None:
        if self._done:
            raise RuntimeError("Future can only be marked completed once.")
        self._done, self._value, self._error, self._resolve = True, value, error, None
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)


def collect_all(futures: list) -> Future:
    """A future whose value is the list of ``futures`` once all are done."""

    def resolve():
        for future in futures:
            future.wait()
        return list(futures)

    return Future.completed_by(resolve, lambda: all(f.done() for f in futures))


def wait_all(futures: list) -> list:
    """Wait for every future; their values, in order."""
    return [f.wait() for f in futures]
