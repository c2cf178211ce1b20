"""The MPI transport: a group's operations on flat NumPy arrays as mpi4py's nonblocking calls.

A :class:`ProcessGroup` (munet/distributed/process_group.py) stages tensors into host arrays and
calls one of these; each returns a request with ``test()`` and ``wait(seconds)``. The TCP
transport (munet/distributed/tcp_comm.py) has the same methods, so every collective runs on
either. Reductions are named as MPI names them (``"SUM"``, ``"LOR"``, ...).
"""

from __future__ import annotations

import functools
import os
import time

import numpy as np

SPIN_SECONDS = 200e-6
IDLE_SECONDS = 0.01


@functools.cache
def mpi():
    """mpi4py's ``MPI`` module, imported on first use (mpi4py is optional)."""
    from mpi4py import MPI

    return MPI


class MpiRequest:
    """mpi4py requests of one operation; ``source``/``nbytes`` of a receive once it finished."""

    def __init__(self, requests: list, status=None):
        self.requests = requests
        self.status = status

    def test(self) -> bool:
        if self.status is None and len(self.requests) == 1:  # a collective: one request, no status
            return self.requests[0].Test()
        return bool(mpi().Request.Testall(self.requests, None if self.status is None else [self.status]))

    def wait(self, seconds: float, idle=None) -> bool:
        """Poll (which drives MPI's progress) until done; False after ``seconds``. Past the spin,
        ``idle()`` runs every :data:`IDLE_SECONDS` (the watchdog answers census probes there)."""
        if self.test():  # a short message is often there at once
            return True
        start = time.monotonic()
        next_idle = start + IDLE_SECONDS
        while not self.test():
            now = time.monotonic()
            if now - start > seconds:
                return False
            if now - start > SPIN_SECONDS:  # a short message arrives within the spin; then let others run
                os.sched_yield()
                if idle is not None and now >= next_idle:
                    idle()
                    next_idle = now + IDLE_SECONDS
        return True

    @property
    def source(self) -> int:
        return self.status.Get_source()

    @property
    def nbytes(self) -> int:
        return self.status.Get_count(mpi().BYTE)


def _displacements(counts) -> list[int]:
    return [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])] if len(counts) else []


class MpiComm:
    """One MPI communicator (a private duplicate, or one made for a group)."""

    def __init__(self, comm):
        self.comm = comm
        self._rank, self._size = comm.Get_rank(), comm.Get_size()  # fixed for a communicator's life

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def allreduce(self, array: np.ndarray, op: str) -> MpiRequest:
        return MpiRequest([self.comm.Iallreduce(mpi().IN_PLACE, array, getattr(mpi(), op))])

    def reduce(self, array: np.ndarray, op: str, root: int) -> MpiRequest:
        if self.rank() == root:
            return MpiRequest([self.comm.Ireduce(mpi().IN_PLACE, array, getattr(mpi(), op), root)])
        return MpiRequest([self.comm.Ireduce(array, None, getattr(mpi(), op), root)])

    def bcast(self, array: np.ndarray, root: int) -> MpiRequest:
        return MpiRequest([self.comm.Ibcast(array, root)])

    def allgather(self, send: np.ndarray, recv: np.ndarray) -> MpiRequest:
        return MpiRequest([self.comm.Iallgather(send, recv)])

    def allgatherv(self, send: np.ndarray, recv: np.ndarray, counts) -> MpiRequest:
        return MpiRequest([self.comm.Iallgatherv(send, [recv, (list(counts), _displacements(counts))])])

    def reduce_scatter(self, send: np.ndarray, recv: np.ndarray, op: str) -> MpiRequest:
        return MpiRequest([self.comm.Ireduce_scatter_block(send, recv, getattr(mpi(), op))])

    def alltoallv(self, send: np.ndarray, send_counts, recv: np.ndarray, recv_counts) -> MpiRequest:
        send_spec = [send, (list(send_counts), _displacements(send_counts))]
        recv_spec = [recv, (list(recv_counts), _displacements(recv_counts))]
        return MpiRequest([self.comm.Ialltoallv(send_spec, recv_spec)])

    def gather(self, send: np.ndarray, recv: np.ndarray | None, root: int) -> MpiRequest:
        return MpiRequest([self.comm.Igather(send, recv, root)])

    def scatter(self, send: np.ndarray | None, recv: np.ndarray, root: int) -> MpiRequest:
        return MpiRequest([self.comm.Iscatter(send, recv, root)])

    def barrier(self) -> MpiRequest:
        return MpiRequest([self.comm.Ibarrier()])

    def send(self, array: np.ndarray, dst: int, tag: int) -> MpiRequest:
        return MpiRequest([self.comm.Isend(array, dst, tag)])

    def recv(self, array: np.ndarray, src: int | None, tag: int) -> MpiRequest:
        status = mpi().Status()
        source = mpi().ANY_SOURCE if src is None else src
        return MpiRequest([self.comm.Irecv(array, source, tag)], status)

    def subgroup(self, members: list[int]) -> MpiComm | None:
        """The communicator of ``members`` (ranks of this one); every rank calls it, non-members get None."""
        everyone = self.comm.Get_group()
        chosen = everyone.Incl(members)
        comm = self.comm.Create(chosen)
        chosen.Free()
        everyone.Free()
        return None if comm == mpi().COMM_NULL else MpiComm(comm)

    def free(self) -> None:
        if self.comm != mpi().COMM_NULL:
            self.comm.Free()
