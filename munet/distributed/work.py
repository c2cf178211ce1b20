"""``Work``: the handle of a collective started with ``async_op=True``.

A handle owns the MPI requests of one operation and what must happen when they finish
(copying a staged result back into the tensor, splitting a flat result into a list). Those
steps run once, on the first ``wait`` or ``is_completed`` that sees the requests done.
Waiting polls the requests (which also drives MPI's progress) until they finish or the
timeout passes, so a peer that never arrives ends in an error, not a hang.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

SPIN_SECONDS = 200e-6


class Work:
    """A started operation: ``wait()``, ``is_completed()``, ``result()``."""

    def __init__(self, requests, description: str, timeout: timedelta, result=(), statuses=None):
        self.requests = list(requests)
        self.statuses = statuses  # MPI.Status objects filled in when the requests finish
        self.description = description
        self.timeout = timeout
        self._steps: list = []  # callables run once, in order, after the requests finish
        self._result = list(result)
        self._done = False

    def is_completed(self) -> bool:
        """True once the operation finished (its outputs hold the result)."""
        if self._done:
            return True
        from mpi4py import MPI

        if self.requests and not MPI.Request.Testall(self.requests, self.statuses):
            return False
        self._finish()
        return True

    def wait(self, timeout: timedelta | None = None) -> bool:
        """Block until the operation finished; raises RuntimeError after ``timeout`` (the group's by default)."""
        limit = (timeout or self.timeout).total_seconds()
        start = time.monotonic()
        while not self.is_completed():
            waited = time.monotonic() - start
            if waited > limit:
                raise RuntimeError(
                    f"{self.description}: timed out after {limit:g} s waiting for the other ranks; "
                    "a rank may have died or called a different collective"
                )
            if waited > SPIN_SECONDS:  # a short message arrives within the spin; then let others run
                os.sched_yield()
        return True

    def is_success(self) -> bool:
        return self.is_completed()

    def exception(self):
        return None

    def result(self) -> list:
        """The output tensors, after waiting."""
        self.wait()
        return self._result

    def then(self, step) -> Work:
        """Run ``step()`` when the requests finish (now, if they already have)."""
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


def completed_work(description: str, timeout: timedelta, result=()) -> Work:
    """A handle for an operation that had nothing to wait for (a group of one, a size-0 tensor)."""
    return Work((), description, timeout, result)
