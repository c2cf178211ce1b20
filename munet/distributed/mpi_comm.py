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

from munet.distributed.errors import DistBackendError, PeerDeathError

SPIN_SECONDS = 200e-6
_TESTS_PER_CLOCK = 32  # tests between two looks at the clock while spinning (a test takes 0.1-0.3 us)
IDLE_SECONDS = 0.01


@functools.cache
def mpi():
    """mpi4py's ``MPI`` module, imported on first use (mpi4py is optional)."""
    from mpi4py import MPI

    return MPI


@functools.cache
def mpi_op(name: str):
    """MPI's reduction called ``name`` (``"SUM"``, ``"LOR"``, ...)."""
    return getattr(mpi(), name)


class MpiRequest:
    """mpi4py requests of one operation on ``comm``; ``source``/``nbytes`` of a receive once it finished.

    Under ``munet-run --fault-tolerant`` (``mpirun --with-ft ulfm``) a peer whose process died fails the
    operation at once, and ``test``/``poll``/``wait`` raise :class:`PeerDeathError` naming it; without
    fault tolerance mpirun ends the job instead."""

    def __init__(self, comm, requests: list, status=None):
        self.comm = comm
        self.requests = requests
        self.status = status

    def test(self) -> bool:
        try:
            if self.status is None and len(self.requests) == 1:  # a collective: one request, no status
                return self.requests[0].Test()
            return bool(mpi().Request.Testall(self.requests, None if self.status is None else [self.status]))
        except mpi().Exception as error:
            raise peer_failure(self.comm, error) from None

    def poll(self) -> bool:
        """Test in a tight loop for about :data:`SPIN_SECONDS`; True once done. MPI moves a collective's
        data only inside MPI calls, on every rank, so Python run between two tests delays all ranks:
        a short collective finishes soonest when nothing else runs between them."""
        if self.status is not None or len(self.requests) != 1:
            return self.test()
        test = self.requests[0].Test
        end = time.monotonic() + SPIN_SECONDS
        try:
            while True:
                for _ in range(_TESTS_PER_CLOCK):
                    if test():
                        return True
                if time.monotonic() > end:
                    return False
        except mpi().Exception as error:
            raise peer_failure(self.comm, error) from None

    def wait(self, seconds: float, idle=None) -> bool:
        """Poll (which drives MPI's progress) until done; False after ``seconds``. Past the spin
        (``poll``), ``idle()`` runs every :data:`IDLE_SECONDS` (the watchdog answers census probes there)."""
        start = time.monotonic()
        if self.poll():  # a short message arrives within the spin; then let others run
            return True
        next_idle = start + IDLE_SECONDS
        while not self.test():
            now = time.monotonic()
            if now - start > seconds:
                return False
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


def peer_failure(comm, error) -> Exception:
    """What an MPI error raised by a request becomes: :class:`PeerDeathError` naming the dead peers' global
    ranks when MPI reports failed processes (ULFM), else a ``DistBackendError`` with MPI's message."""
    failed_classes = {
        getattr(mpi(), name, None) for name in ("ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING", "ERR_REVOKED")
    }
    detail = error.Get_error_string()
    if error.Get_error_class() not in failed_classes - {None}:
        return DistBackendError(f"MPI failed: {detail}")
    return PeerDeathError(failed_ranks(comm), detail)


def failed_ranks(comm) -> list[int]:
    """The global ranks of ``comm``'s processes that MPI's fault tolerance reports failed, sorted."""
    failed = comm.Get_failed()
    world = mpi().COMM_WORLD.Get_group()
    try:
        ranks = mpi().Group.Translate_ranks(failed, list(range(failed.Get_size())), world)
    finally:
        world.Free()
        failed.Free()
    return sorted(int(r) for r in ranks)


def _displacements(counts) -> list[int]:
    return [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])] if len(counts) else []


class MpiComm:
    """One MPI communicator (a private duplicate, or one made for a group)."""

    def __init__(self, comm):
        self.comm = comm
        self._rank, self._size = comm.Get_rank(), comm.Get_size()  # fixed for a communicator's life
        self._row_gathers: dict = {}  # row length -> (persistent all-gather, its row, its table)

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def allreduce(self, array: np.ndarray, op: str) -> MpiRequest:
        return MpiRequest(self.comm, [self.comm.Iallreduce(mpi().IN_PLACE, array, mpi_op(op))])

    def reduce(self, array: np.ndarray, op: str, root: int) -> MpiRequest:
        if self.rank() == root:
            return MpiRequest(self.comm, [self.comm.Ireduce(mpi().IN_PLACE, array, mpi_op(op), root)])
        return MpiRequest(self.comm, [self.comm.Ireduce(array, None, mpi_op(op), root)])

    def bcast(self, array: np.ndarray, root: int) -> MpiRequest:
        return MpiRequest(self.comm, [self.comm.Ibcast(array, root)])

    def allgather(self, send: np.ndarray, recv: np.ndarray) -> MpiRequest:
        return MpiRequest(self.comm, [self.comm.Iallgather(send, recv)])

    def gather_rows(self, row: np.ndarray) -> tuple[MpiRequest, np.ndarray]:
        """Start an all-gather of one small int64 row per rank (the signatures ``agree`` compares); returns
        the request and the table (size x len(row)) it fills, valid until the next call.

        A persistent collective (MPI 4's ``Allgather_init``) on buffers kept here, made by the first call
        for a row length (every rank makes it at the same call: ``agree`` runs on all of them, its rows
        have one length): starting it again costs about half of a new ``Iallgather``.
        """
        kept = self._row_gathers.get(row.size)
        if kept is None:
            mine, table = np.empty(row.size, dtype=np.int64), np.empty((self._size, row.size), dtype=np.int64)
            kept = self._row_gathers[row.size] = (self.comm.Allgather_init(mine, table), mine, table)
        persistent, mine, table = kept
        if not persistent.Test():  # still active: its last wait timed out (the group is broken anyway)
            table = np.empty_like(table)
            return MpiRequest(self.comm, [self.comm.Iallgather(row, table)]), table
        np.copyto(mine, row)
        persistent.Start()
        return MpiRequest(self.comm, [persistent]), table

    def allgatherv(self, send: np.ndarray, recv: np.ndarray, counts) -> MpiRequest:
        return MpiRequest(self.comm, [self.comm.Iallgatherv(send, [recv, (list(counts), _displacements(counts))])])

    def reduce_scatter(self, send: np.ndarray, recv: np.ndarray, op: str) -> MpiRequest:
        return MpiRequest(self.comm, [self.comm.Ireduce_scatter_block(send, recv, mpi_op(op))])

    def alltoallv(self, send: np.ndarray, send_counts, recv: np.ndarray, recv_counts) -> MpiRequest:
        send_spec = [send, (list(send_counts), _displacements(send_counts))]
        recv_spec = [recv, (list(recv_counts), _displacements(recv_counts))]
        return MpiRequest(self.comm, [self.comm.Ialltoallv(send_spec, recv_spec)])

    def gather(self, send: np.ndarray, recv: np.ndarray | None, root: int) -> MpiRequest:
        return MpiRequest(self.comm, [self.comm.Igather(send, recv, root)])

    def scatter(self, send: np.ndarray | None, recv: np.ndarray, root: int) -> MpiRequest:
        return MpiRequest(self.comm, [self.comm.Iscatter(send, recv, root)])

    def barrier(self) -> MpiRequest:
        return MpiRequest(self.comm, [self.comm.Ibarrier()])

    def send(self, array: np.ndarray, dst: int, tag: int) -> MpiRequest:
        return MpiRequest(self.comm, [self.comm.Isend(array, dst, tag)])

    def recv(self, array: np.ndarray, src: int | None, tag: int) -> MpiRequest:
        status = mpi().Status()
        source = mpi().ANY_SOURCE if src is None else src
        return MpiRequest(self.comm, [self.comm.Irecv(array, source, tag)], status)

    def subgroup(self, members: list[int]) -> MpiComm | None:
        """The communicator of ``members`` (ranks of this one); every rank calls it, non-members get None."""
        everyone = self.comm.Get_group()
        chosen = everyone.Incl(members)
        comm = self.comm.Create(chosen)
        chosen.Free()
        everyone.Free()
        return None if comm == mpi().COMM_NULL else MpiComm(comm)

    def free(self) -> None:
        for persistent, _, _ in self._row_gathers.values():
            if persistent.Test():  # inactive; an active one (a timed-out wait) cannot be freed safely
                persistent.Free()
        self._row_gathers.clear()
        if self.comm != mpi().COMM_NULL:
            self.comm.Free()
