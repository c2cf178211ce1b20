"""``Work``: the handle of a collective started with ``async_op=True``.

A handle owns the transport request of one operation (``test()``, ``wait(seconds)``; see
munet/distributed/mpi_comm.py and tcp_comm.py) and what must happen when it finishes (copying
a staged result back into the tensor, splitting a flat result into a list). Those steps run
once, on the first ``wait`` or ``is_completed`` that sees the request done. Waiting ends in an
error after the timeout, so a peer that never arrives is an error, not a hang.
"""

from __future__ import annotations

from datetime import timedelta

from munet.distributed.errors import DistBackendError, PeerDeathError


class Work:
    """A started operation: ``wait()``, ``is_completed()``, ``result()``."""

    def __init__(self, request, description: str, timeout: timedelta, result=(), watch=None):
        self.request = request  # None: nothing to wait for
        self.description = description
        self.timeout = timeout
        # (watchdog, group key, group ranks, global rank, collective number) of a collective on MPI:
        # a timeout names the ranks that did not arrive (munet/distributed/watchdog.py)
        self.watch = watch
        self._steps: list = []  # callables run once, in order, after the request finished
        self._result = list(result)
        self._done = False

    def is_completed(self) -> bool:
        """True once the operation finished (its outputs hold the result)."""
        if self._done:
            return True
        if self.request is not None:
            try:
                if not self.request.test():
                    return False
            except PeerDeathError as error:
                raise failed_operation(self.description, error) from None
        self._finish()
        return True

    def wait(self, timeout: timedelta | None = None) -> bool:
        """Block until the operation finished; ``DistBackendError`` (a RuntimeError) after ``timeout``
        (the group's by default)."""
        if self._done:
            return True
        limit = (timeout or self.timeout).total_seconds()
        if self.request is not None:
            try:
                why = self._wait_request(limit)
            except PeerDeathError as error:
                raise failed_operation(self.description, error) from None
            if why is not None:
                raise DistBackendError(
                    f"{self.description}: timed out after {limit:g} s waiting for the other ranks; {why}"
                )
        self._finish()
        return True

    def _wait_request(self, limit: float):
        """Wait for the request; None when it finished, else why not."""
        if self.watch is None:
            done = self.request.wait(limit)
            return None if done else "a rank may have died or called a different collective"
        watchdog, key, ranks, me, number = self.watch
        watchdog.waiting = (key, number, self.description)
        try:
            if self.request.wait(limit, watchdog.answer):
                return None
            return watchdog.census(ranks, me, number)  # still waiting here: the others' censuses see this rank
        finally:
            watchdog.waiting = None

    def is_success(self) -> bool:
        return self.is_completed()

    def exception(self):
        return None

    def result(self) -> list:
        """The output tensors, after waiting."""
        self.wait()
        return self._result

    def get_future(self):
        """A ``munet.futures.Future`` whose value is the output tensors, once the operation finished."""
        from munet.futures import Future

        return Future.completed_by(self.result, self.is_completed)

    def then(self, step) -> Work:
        """Run ``step()`` when the request finishes (now, if it already has)."""
        if self._done:
            step()
        else:
            self._steps.append(step)
        return self

    def _finish(self) -> None:
        self._done = True
        steps, self._steps = self._steps, []
        for step in steps:
            step()


def failed_operation(description: str, error: PeerDeathError) -> DistBackendError:
    """The error of an operation (``description``) whose wait found peers dead."""
    return DistBackendError(f"{description}: {error}")


def completed_work(description: str, timeout: timedelta, result=()) -> Work:
    """A handle for an operation that had nothing to wait for (a group of one, a size-0 tensor)."""
    return Work(None, description, timeout, result)
